#include "deviceshadow/uri.hpp"

#include "deviceshadow/error.hpp"

#include <charconv>

namespace deviceshadow {
namespace {

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

bool unreserved(unsigned char c) {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_' ||
         c == '.' || c == '~';
}

}  // namespace

std::string percent_encode(std::string_view s, std::string_view keep) {
  static constexpr char hex[] = "0123456789ABCDEF";
  std::string out;
  out.reserve(s.size());
  for (unsigned char c : s) {
    if (unreserved(c) || keep.find(static_cast<char>(c)) != std::string_view::npos) {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += hex[c >> 4];
      out += hex[c & 0xF];
    }
  }
  return out;
}

std::string percent_encode_segment(std::string_view s) {
  if (s == "." || s == "..") return s == "." ? "%2E" : "%2E%2E";
  return percent_encode(s);
}

std::string percent_decode(std::string_view s, bool plus_is_space) {
  std::string out;
  out.reserve(s.size());
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '%') {
      int hi = i + 2 < s.size() ? hex_value(s[i + 1]) : -1;
      int lo = hi >= 0 ? hex_value(s[i + 2]) : -1;
      if (lo < 0) throw Error::invalid_request("malformed percent-encoding in the URL");
      out += static_cast<char>(hi * 16 + lo);
      i += 2;
    } else {
      out += plus_is_space && s[i] == '+' ? ' ' : s[i];
    }
  }
  return out;
}

std::optional<int> parse_port(std::string_view text) noexcept {
  int n = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), n);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size() || n < 1 || n > 65535) return std::nullopt;
  return n;
}

}  // namespace deviceshadow
