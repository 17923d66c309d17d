// The AWS credentials file (`shadowd --aws-credentials FILE`): the access keys whose SigV4
// signatures the AWS IoT compatible API accepts, each with the rights of an API v1 token.
//
// One key a line, fields separated by spaces or tabs:
//   ACCESS_KEY_ID SECRET_ACCESS_KEY ROLE [PATTERN...]
// ROLE and PATTERNs as in the token file (http/auth.hpp): admin, app or device, limited to the
// things the patterns cover (none: every thing). A line whose first non-blank character is '#'
// is a comment; blank lines are skipped. An access key id is 1-128 characters without '/', ',',
// '=' or a control character (they would make the Authorization header ambiguous); a key listed
// twice, or any malformed line, refuses the whole file with an error naming the line. The
// secrets are kept in clear (SigV4 needs them), so the file must not be readable or writable by
// group or others.
#pragma once

#include "http/auth.hpp"

#include <string>
#include <string_view>
#include <map>

namespace deviceshadow::awsiot {

// Who signed a request: the access key and the rights it carries.
struct Principal : http::Grant {
  std::string access_key_id;
};

struct AccessKey {
  Principal principal;
  std::string secret_access_key;
};

// Immutable once loaded; safe to share between threads.
class CredentialsTable {
 public:
  // Reads and parses FILE; throws std::runtime_error when it cannot be read, when group or
  // others may read or write it, or when a line is malformed (naming the line).
  static CredentialsTable load(const std::string& path);
  // Parses the text of a credentials file; throws std::runtime_error naming a malformed line.
  static CredentialsTable parse(std::string_view text);

  // The key with this id, or nullptr.
  const AccessKey* find(std::string_view access_key_id) const;
  std::size_t size() const { return keys_.size(); }

 private:
  std::map<std::string, AccessKey, std::less<>> keys_;
};

}  // namespace deviceshadow::awsiot
