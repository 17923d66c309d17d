#include "server/auth.hpp"

#include <openssl/evp.h>
#include <openssl/crypto.h>

#include <fstream>
#include <sstream>
#include <stdexcept>

namespace deviceshadow::server {

std::string sha256_hex(std::string_view data) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  EVP_Digest(data.data(), data.size(), digest, &length, EVP_sha256(), nullptr);
  static constexpr char hex[] = "0123456789abcdef";
  std::string out;
  for (unsigned int i = 0; i < length; ++i) {
    out += hex[digest[i] >> 4];
    out += hex[digest[i] & 0xF];
  }
  return out;
}

bool Token::covers(std::string_view thing) const {
  if (patterns.empty()) return true;
  for (const std::string& p : patterns) {
    if (!p.empty() && p.back() == '*') {
      if (thing.substr(0, p.size() - 1) == std::string_view(p).substr(0, p.size() - 1)) return true;
    } else if (thing == p) {
      return true;
    }
  }
  return false;
}

bool Token::may(Action action) const {
  switch (role) {
    case Role::admin: return true;
    case Role::app: return action != Action::write_reported;
    case Role::device: return action == Action::read || action == Action::write_reported;
  }
  return false;
}

Authenticator Authenticator::parse(std::string_view text) {
  Authenticator auth;
  std::istringstream in{std::string(text)};
  std::string line;
  for (int number = 1; std::getline(in, line); ++number) {
    // A field starting with '#' starts a comment; '#' inside a pattern is part of it.
    std::istringstream all_fields(line);
    std::string kept;
    for (std::string f; all_fields >> f && f[0] != '#';) kept += f + ' ';
    std::istringstream fields(kept);
    Token token;
    std::string role;
    if (!(fields >> token.sha256_hex)) continue;  // blank or comment
    auto bad = [&](const std::string& why) {
      return std::runtime_error("token file line " + std::to_string(number) + ": " + why);
    };
    if (token.sha256_hex.size() != 64 || token.sha256_hex.find_first_not_of("0123456789abcdef") != std::string::npos) {
      throw bad("expected the lowercase hex SHA-256 of a token (64 characters), see `shadowd hash-token`");
    }
    if (!(fields >> role)) throw bad("missing role (admin, app or device)");
    if (role == "admin") {
      token.role = Role::admin;
    } else if (role == "app") {
      token.role = Role::app;
    } else if (role == "device") {
      token.role = Role::device;
    } else {
      throw bad("unknown role '" + role + "' (admin, app or device)");
    }
    for (std::string p; fields >> p;) token.patterns.push_back(p);
    auth.tokens_.push_back(std::move(token));
  }
  return auth;
}

Authenticator Authenticator::load(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error("cannot read token file " + path);
  std::stringstream text;
  text << in.rdbuf();
  return parse(text.str());
}

const Token* Authenticator::authenticate(std::string_view authorization) const {
  constexpr std::string_view kBearer = "Bearer ";
  if (authorization.size() <= kBearer.size() || authorization.substr(0, kBearer.size()) != kBearer) return nullptr;
  const std::string hash = sha256_hex(authorization.substr(kBearer.size()));
  for (const Token& t : tokens_) {
    if (CRYPTO_memcmp(t.sha256_hex.data(), hash.data(), hash.size()) == 0) return &t;
  }
  return nullptr;
}

}  // namespace deviceshadow::server
