// Bearer-token authentication and role-based authorization (SPEC.md §10).
//
// Token file: one token per line, `SHA256_HEX ROLE [PATTERN...]`; a field that starts with '#'
// starts a comment (so patterns may contain '#', as thing names do).
// ROLE is admin, app or device; a PATTERN is an exact thing name or a prefix ending in '*';
// without patterns the token covers every thing. Only hashes are stored: `shadowd hash-token
// TOKEN` prints the hash of a token.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace deviceshadow::server {

enum class Role { admin, app, device };

enum class Action {
  read,            // get, batch get
  write_reported,  // report
  write_desired,   // desire
  remove,          // delete
  list,            // list things and shadows
  history,
};

struct Token {
  std::string sha256_hex;
  Role role = Role::device;
  std::vector<std::string> patterns;  // empty: every thing

  bool covers(std::string_view thing) const;
  bool may(Action action) const;
};

std::string sha256_hex(std::string_view data);

class Authenticator {
 public:
  // Parses a token file; throws std::runtime_error naming the line of a malformed entry.
  static Authenticator load(const std::string& path);
  static Authenticator parse(std::string_view text);

  // The token of an "Authorization: Bearer …" header value, or nullptr.
  const Token* authenticate(std::string_view authorization) const;
  std::size_t size() const { return tokens_.size(); }

 private:
  std::vector<Token> tokens_;
};

}  // namespace deviceshadow::server
