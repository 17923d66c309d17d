#include "deviceshadow/error.hpp"
#include "deviceshadow/validation.hpp"

#include <algorithm>
#include <string>

namespace deviceshadow {

namespace {

// The length of the well-formed multi-byte UTF-8 sequence that starts at p (*p >= 0x80), or 0.
std::size_t multibyte_sequence(const unsigned char* p, const unsigned char* end) noexcept {
  unsigned char c = *p;
  std::size_t extra;
  char32_t cp;
  char32_t min;
  if ((c & 0xE0) == 0xC0) {
    extra = 1, cp = c & 0x1F, min = 0x80;
  } else if ((c & 0xF0) == 0xE0) {
    extra = 2, cp = c & 0x0F, min = 0x800;
  } else if ((c & 0xF8) == 0xF0) {
    extra = 3, cp = c & 0x07, min = 0x10000;
  } else {
    return 0;
  }
  if (static_cast<std::size_t>(end - p) <= extra) return 0;
  for (std::size_t i = 1; i <= extra; ++i) {
    if ((p[i] & 0xC0) != 0x80) return 0;
    cp = (cp << 6) | (p[i] & 0x3F);
  }
  if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
  return extra + 1;
}

}  // namespace

bool is_valid_utf8(std::string_view s) noexcept {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  const auto* end = p + s.size();
  while (p < end) {
    if (*p < 0x80) {
      ++p;
      continue;
    }
    std::size_t n = multibyte_sequence(p, end);
    if (n == 0) return false;
    p += n;
  }
  return true;
}

std::string to_valid_utf8(std::string_view s) {
  if (is_valid_utf8(s)) return std::string(s);
  std::string out;
  const auto* begin = reinterpret_cast<const unsigned char*>(s.data());
  const auto* end = begin + s.size();
  for (const auto* p = begin; p < end;) {
    std::size_t n = *p < 0x80 ? 1 : multibyte_sequence(p, end);
    if (n == 0) {
      out += "\xEF\xBF\xBD";  // U+FFFD REPLACEMENT CHARACTER
      ++p;
    } else {
      out.append(reinterpret_cast<const char*>(p), n);
      p += n;
    }
  }
  return out;
}

bool is_thing_text(std::string_view s) noexcept {
  return is_valid_utf8(s) && std::none_of(s.begin(), s.end(), [](char c) {
           const auto u = static_cast<unsigned char>(c);
           return u < 0x20 || u == 0x7F;
         });
}

void validate_thing(std::string_view thing) {
  if (thing.empty()) throw Error::invalid_name("thing", "must not be empty");
  if (thing.size() > kMaxThingBytes) {
    throw Error::invalid_name("thing", "longer than " + std::to_string(kMaxThingBytes) + " bytes");
  }
  if (!is_valid_utf8(thing)) throw Error::invalid_name("thing", "not valid UTF-8");
  if (!is_thing_text(thing)) throw Error::invalid_name("thing", "contains a control character");
}

void validate_shadow_name(std::string_view name) {
  if (name.empty()) throw Error::invalid_name("name", "must not be empty");
  if (name.size() > kMaxShadowNameChars) {
    throw Error::invalid_name("name", "longer than " + std::to_string(kMaxShadowNameChars) + " characters");
  }
  for (char c : name) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
              c == '.' || c == ':' || c == '$' || c == '-';
    if (!ok) throw Error::invalid_name("name", "may only contain A-Z a-z 0-9 _ . : $ -");
  }
}

void validate_client_token(std::string_view token) {
  if (token.size() > kMaxClientTokenBytes) {
    throw Error::invalid_request(
        "clientToken is longer than " + std::to_string(kMaxClientTokenBytes) + " bytes", "clientToken");
  }
}

void validate_tz(std::string_view tz) {
  // Segments of [A-Za-z0-9_+-], the first starting with a letter, joined by '/', at most 3.
  auto fail = [] { throw Error::invalid_request("tz must be an IANA time zone name such as Europe/Stockholm", "tz"); };
  if (tz.empty() || tz.size() > kMaxTzBytes) fail();
  std::size_t segments = 1;
  bool segment_start = true;
  for (char c : tz) {
    bool letter = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
    if (c == '/') {
      if (segment_start) fail();
      ++segments;
      segment_start = true;
      continue;
    }
    bool ok = letter || (c >= '0' && c <= '9') || c == '_' || c == '+' || c == '-';
    if (!ok || (segment_start && !letter)) fail();
    segment_start = false;
  }
  if (segment_start || segments > 3) fail();
}

}  // namespace deviceshadow
