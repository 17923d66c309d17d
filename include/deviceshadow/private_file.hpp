// Files holding a secret (the cursor key, AWS credentials): only their owner may read or write them.
#pragma once

#include <string>
#include <string_view>

namespace deviceshadow {

// The contents of the file at `path`, which errors call `what` ("the cursor key file"). Throws
// std::runtime_error when it cannot be read, or when group or others may read or write it (the
// error says to chmod 600 it).
std::string read_private_file(const std::string& path, std::string_view what);

}  // namespace deviceshadow
