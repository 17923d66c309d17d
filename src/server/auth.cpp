#include "server/auth.hpp"

#include <openssl/evp.h>
#include <openssl/crypto.h>

#include "deviceshadow/error.hpp"
#include "deviceshadow/uri.hpp"
#include "deviceshadow/validation.hpp"

#include <algorithm>
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
  return std::any_of(patterns.begin(), patterns.end(), [&](const ThingPattern& p) { return p.matches(thing); });
}

bool Token::may(Action action) const {
  switch (role) {
    case Role::admin: return true;
    case Role::app: return action != Action::write_reported;
    case Role::device: return action == Action::read || action == Action::write_reported;
  }
  return false;
}

namespace {

// One pattern field as the header describes; throws std::invalid_argument saying what is wrong.
ThingPattern parse_pattern(std::string_view field) {
  if (field.find('#') != std::string_view::npos) {
    throw std::invalid_argument("a '#' in a pattern is written %23 (comments take a whole line)");
  }
  ThingPattern p;
  p.prefix = field.back() == '*';
  if (p.prefix) field.remove_suffix(1);
  try {
    p.text = percent_decode(field, false);
  } catch (const Error&) {
    throw std::invalid_argument("'%' in a pattern starts an escape of two hex digits (write '%' as %25)");
  }
  if (p.text.empty() && !p.prefix) throw std::invalid_argument("empty pattern");
  if (!p.text.empty()) {
    try {
      validate_thing(p.text);
    } catch (const Error& e) {
      throw std::invalid_argument(std::string("pattern is not a valid thing name: ") + e.what());
    }
  }
  return p;
}

}  // namespace

Authenticator Authenticator::parse(std::string_view text) {
  Authenticator auth;
  std::istringstream in{std::string(text)};
  std::string line;
  for (int number = 1; std::getline(in, line); ++number) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    std::size_t first = line.find_first_not_of(" \t");
    if (first == std::string::npos || line[first] == '#') continue;  // blank or comment
    auto bad = [&](const std::string& why) {
      return std::runtime_error("token file line " + std::to_string(number) + ": " + why);
    };
    std::vector<std::string_view> fields;
    for (std::size_t at = first; at < line.size();) {
      std::size_t end = std::min(line.find_first_of(" \t", at), line.size());
      fields.emplace_back(line.data() + at, end - at);
      at = line.find_first_not_of(" \t", end);
      if (at == std::string::npos) break;
    }
    Token token;
    token.sha256_hex = std::string(fields[0]);
    if (token.sha256_hex.size() != 64 || token.sha256_hex.find_first_not_of("0123456789abcdef") != std::string::npos) {
      throw bad("expected the lowercase hex SHA-256 of a token (64 characters), see `shadowd hash-token`");
    }
    if (fields.size() < 2) throw bad("missing role (admin, app or device)");
    const std::string_view role = fields[1];
    if (role == "admin") {
      token.role = Role::admin;
    } else if (role == "app") {
      token.role = Role::app;
    } else if (role == "device") {
      token.role = Role::device;
    } else {
      throw bad("unknown role '" + std::string(role) + "' (admin, app or device)");
    }
    for (std::size_t i = 2; i < fields.size(); ++i) {
      try {
        token.patterns.push_back(parse_pattern(fields[i]));
      } catch (const std::invalid_argument& e) {
        throw bad("pattern " + std::to_string(i - 1) + ": " + e.what());
      }
    }
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
