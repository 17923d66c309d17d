// Bearer-token authentication and role-based authorization: an admin token may do everything, an
// app token read, write desired, delete, list and read history, a device token read and write
// reported, each limited to the things its patterns cover.
//
// Token file: one token per line, `SHA256_HEX ROLE [PATTERN...]`, fields separated by spaces
// or tabs; a line whose first non-blank character is '#' is a comment, and blank lines are
// skipped. ROLE is admin, app or device. A PATTERN is an exact thing name, or a prefix when it
// ends in an unencoded '*' ("*" alone: every thing); without patterns the token covers every
// thing. Patterns are percent-encoded so that every valid thing name can be written: '%' is
// %25, a space %20, '#' %23, a tab %09, a final literal '*' %2A. A pattern holding a raw '#',
// a malformed escape or a name that is not a valid thing (1-512 bytes of UTF-8 without control
// characters) is an error naming the line: the file is refused whole, never read so as to widen
// a token's rights. Only hashes are stored: `shadowd hash-token TOKEN` prints the hash of a token.
#pragma once

#include "deviceshadow/engine.hpp"

#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace deviceshadow::http {

enum class Role { admin, app, device };

enum class Action {
  read,            // get, batch get
  write_reported,  // report
  write_desired,   // desire
  remove,          // delete
  list,            // list things and shadows
  history,
};

// What a caller may do: a role, limited to the things its patterns cover.
struct Grant {
  Role role = Role::device;
  std::vector<ThingPattern> patterns;  // empty: every thing

  bool covers(std::string_view thing) const;
  bool may(Action action) const;
};

struct Token : Grant {
  std::string sha256_hex;  // of the secret, as aws::hex_sha256 writes it
};

// Pieces of the line-oriented files that grant rights (this token file, the AWS credentials
// file of src/awsiot/): one entry a line, fields separated by spaces or tabs, '#' comments.

// Calls `entry` with the 1-based line number and the fields of every line that is neither blank
// nor a comment. A trailing '\r' is dropped.
void for_each_entry(std::string_view text,
                    const std::function<void(int line, std::span<const std::string_view> fields)>& entry);
// `ROLE [PATTERN...]` as described above; throws std::invalid_argument saying what is wrong
// (without the line, which the caller knows).
Grant parse_grant(std::span<const std::string_view> fields);

class Authenticator {
 public:
  // Parses a token file; throws std::runtime_error naming the line of a malformed entry or of a
  // token's second line, and for a file that is not regular, that group or others may write,
  // or that holds no token.
  static Authenticator load(const std::string& path);
  static Authenticator parse(std::string_view text);

  // The token of an "Authorization: Bearer …" header value, or nullptr.
  const Token* authenticate(std::string_view authorization) const;
  std::size_t size() const { return tokens_.size(); }

 private:
  std::vector<Token> tokens_;
};

}  // namespace deviceshadow::http
