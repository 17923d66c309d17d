// Files that grant or hold a secret: only their owner may write them, and, for a secret (the cursor
// key, AWS credentials), read them; a file of token hashes may be read by others.
#pragma once

#include <string>
#include <string_view>

namespace deviceshadow {

enum class OthersMay { nothing, read };

// The contents of the regular file at `path`, which errors call `what` ("the cursor key file").
// Throws std::runtime_error when it cannot be read, is not a regular file, or when group or
// others may write it or (OthersMay::nothing) read it; the error says which chmod mends it.
std::string read_private_file(const std::string& path, std::string_view what, OthersMay others = OthersMay::nothing);

}  // namespace deviceshadow
