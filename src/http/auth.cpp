#include "http/auth.hpp"

#include <openssl/crypto.h>

#include "aws/sigv4.hpp"
#include "deviceshadow/error.hpp"
#include "deviceshadow/private_file.hpp"
#include "deviceshadow/uri.hpp"
#include "deviceshadow/validation.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace deviceshadow::http {

bool Grant::covers(std::string_view thing) const {
  if (patterns.empty()) return true;
  return std::any_of(patterns.begin(), patterns.end(), [&](const ThingPattern& p) { return p.matches(thing); });
}

bool Grant::may(Action action) const {
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

void for_each_entry(std::string_view text,
                    const std::function<void(int line, std::span<const std::string_view> fields)>& entry) {
  int number = 0;
  std::vector<std::string_view> fields;
  while (!text.empty()) {
    ++number;
    const std::size_t nl = text.find('\n');
    std::string_view line = text.substr(0, nl);
    text.remove_prefix(nl == std::string_view::npos ? text.size() : nl + 1);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    fields.clear();
    for (std::size_t at = line.find_first_not_of(" \t"); at != std::string_view::npos;
         at = line.find_first_not_of(" \t", at)) {
      const std::size_t end = std::min(line.find_first_of(" \t", at), line.size());
      fields.push_back(line.substr(at, end - at));
      at = end;
    }
    if (fields.empty() || fields[0].front() == '#') continue;  // blank or comment
    entry(number, fields);
  }
}

Grant parse_grant(std::span<const std::string_view> fields) {
  if (fields.empty()) throw std::invalid_argument("missing role (admin, app or device)");
  Grant grant;
  const std::string_view role = fields[0];
  if (role == "admin") {
    grant.role = Role::admin;
  } else if (role == "app") {
    grant.role = Role::app;
  } else if (role == "device") {
    grant.role = Role::device;
  } else {
    throw std::invalid_argument("unknown role '" + std::string(role) + "' (admin, app or device)");
  }
  for (std::size_t i = 1; i < fields.size(); ++i) {
    try {
      grant.patterns.push_back(parse_pattern(fields[i]));
    } catch (const std::invalid_argument& e) {
      throw std::invalid_argument("pattern " + std::to_string(i) + ": " + e.what());
    }
  }
  return grant;
}

Authenticator Authenticator::parse(std::string_view text) {
  Authenticator auth;
  for_each_entry(text, [&](int number, std::span<const std::string_view> fields) {
    auto bad = [&](const std::string& why) {
      return std::runtime_error("token file line " + std::to_string(number) + ": " + why);
    };
    Token token;
    token.sha256_hex = std::string(fields[0]);
    if (token.sha256_hex.size() != 64 || token.sha256_hex.find_first_not_of("0123456789abcdef") != std::string::npos) {
      throw bad("expected the lowercase hex SHA-256 of a token (64 characters), see `shadowd hash-token`");
    }
    try {
      static_cast<Grant&>(token) = parse_grant(fields.subspan(1));
    } catch (const std::invalid_argument& e) {
      throw bad(e.what());
    }
    // One grant a token: a second line would be dead (the first one found wins).
    if (std::any_of(auth.tokens_.begin(), auth.tokens_.end(), [&](const Token& t) { return t.sha256_hex == token.sha256_hex; })) {
      throw bad("this token's hash is on an earlier line too: give each token one line");
    }
    auth.tokens_.push_back(std::move(token));
  });
  return auth;
}

Authenticator Authenticator::load(const std::string& path) {
  // Hashes, not secrets, so others may read it; whoever may write it may grant themselves admin.
  Authenticator auth = parse(read_private_file(path, "token file", OthersMay::read));
  if (auth.tokens_.empty()) {
    throw std::runtime_error("token file " + path + " holds no token: every request would be refused (see `shadowd hash-token`)");
  }
  return auth;
}

const Token* Authenticator::authenticate(std::string_view authorization) const {
  constexpr std::string_view kBearer = "Bearer ";
  if (authorization.size() <= kBearer.size() || authorization.substr(0, kBearer.size()) != kBearer) return nullptr;
  const std::string hash = aws::hex_sha256(authorization.substr(kBearer.size()));
  for (const Token& t : tokens_) {
    if (CRYPTO_memcmp(t.sha256_hex.data(), hash.data(), hash.size()) == 0) return &t;
  }
  return nullptr;
}

}  // namespace deviceshadow::http
