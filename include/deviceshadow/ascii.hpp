// ASCII text of protocol fields (HTTP header names and values, list elements).
#pragma once

#include <algorithm>
#include <cctype>
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

}  // namespace deviceshadow
