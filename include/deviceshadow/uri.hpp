// Percent-encoding of URI components (RFC 3986 §2.1).
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace deviceshadow {

// "%XX"-encodes every byte except the unreserved characters (A-Z a-z 0-9 - _ . ~) and those in
// `keep`.
std::string percent_encode(std::string_view s, std::string_view keep = "");
// A path segment: percent_encode(s), with "." and ".." (names like any other) encoded whole, so
// that no URL handling takes them for the current or the parent segment.
std::string percent_encode_segment(std::string_view s);
// Decodes "%XX" (and '+' as a space when plus_is_space, as in query strings). Throws
// Error(invalid_request) for a malformed escape.
std::string percent_decode(std::string_view s, bool plus_is_space);

// The port of a URL's authority: decimal digits only, 1 to 65535; nullopt otherwise.
std::optional<int> parse_port(std::string_view text) noexcept;

}  // namespace deviceshadow
