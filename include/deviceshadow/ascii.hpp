// ASCII text of protocol fields (HTTP header names and values, list elements).
#pragma once

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>

namespace deviceshadow {

// a == b, ASCII letters compared ignoring case (header names, tokens).
inline bool equals_ignoring_case(std::string_view a, std::string_view b) {
  return std::ranges::equal(a, b, [](unsigned char x, unsigned char y) { return std::tolower(x) == std::tolower(y); });
}

// s without the spaces and tabs at its ends (HTTP's optional whitespace).
inline std::string_view trim_spaces_and_tabs(std::string_view s) {
  const std::size_t first = s.find_first_not_of(" \t");
  if (first == std::string_view::npos) return {};
  return s.substr(first, s.find_last_not_of(" \t") - first + 1);
}

// s as it may be shown on a terminal or in a text log line: control characters (C0, DEL, and
// the C1 range U+0080-U+009F, which some terminals obey as escape sequences) escaped as \xNN
// or \u00NN, so that text from a client can neither forge lines nor drive the terminal.
// keep_newlines leaves '\n' (for JSON laid out on several lines, whose strings are escaped).
inline std::string escape_controls(std::string_view s, bool keep_newlines = false) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(s.size());
  for (std::size_t i = 0; i < s.size(); ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    if ((c < 0x20 && !(keep_newlines && c == '\n')) || c == 0x7f) {
      out += "\\x";
      out += kHex[c >> 4];
      out += kHex[c & 15];
    } else if (c == 0xc2 && i + 1 < s.size() && static_cast<unsigned char>(s[i + 1]) >= 0x80 &&
               static_cast<unsigned char>(s[i + 1]) <= 0x9f) {
      const auto c1 = static_cast<unsigned char>(s[++i]);
      out += "\\u00";
      out += kHex[c1 >> 4];
      out += kHex[c1 & 15];
    } else {
      out += static_cast<char>(c);
    }
  }
  return out;
}

// A whole number written in decimal digits only (no sign, spaces or leading zero: a command-line
// parser may read "010" as octal) in [min, max]; throws std::invalid_argument saying which.
inline std::uint64_t parse_whole_number(std::string_view text, std::uint64_t min, std::uint64_t max) {
  std::uint64_t n = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), n);
  const std::string range = "(" + std::to_string(min) + "-" + std::to_string(max) + ")";
  if (text.empty() || text.front() == '-' || text.front() == '+' || (text.size() > 1 && text.front() == '0') ||
      (ec != std::errc() && ec != std::errc::result_out_of_range) || end != text.data() + text.size()) {
    throw std::invalid_argument("'" + std::string(text) + "' is not a whole number " + range);
  }
  if (ec == std::errc::result_out_of_range || n < min || n > max) {
    throw std::invalid_argument(std::string(text) + " is out of range " + range);
  }
  return n;
}

}  // namespace deviceshadow
