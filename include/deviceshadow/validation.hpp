// Identity rules and limits (docs/semantics.md, "Identity and names" and "Errors and limits").
// Each validate_* throws Error naming the field.
#pragma once

#include <cstddef>
#include <string_view>

namespace deviceshadow {

// Every limit is configurable (shadowd's --max-* options); these are the defaults.
struct Limits {
  std::size_t max_body_bytes = 1 << 20;    // one request body
  std::size_t max_state_bytes = 64 << 10;  // one section's state as compact JSON (413)
  std::size_t max_depth = 32;              // reference tokens in the deepest value's pointer
  std::size_t max_batch_items = 100;       // operations or shadows in one batch request
};

inline constexpr std::size_t kMaxThingBytes = 512;
inline constexpr std::size_t kMaxShadowNameChars = 64;
inline constexpr std::size_t kMaxClientTokenBytes = 64;
inline constexpr std::size_t kMaxTzBytes = 64;
inline constexpr std::string_view kDefaultShadowName = "main";

// True if s is well-formed UTF-8 (no overlongs, surrogates or code points past U+10FFFF).
bool is_valid_utf8(std::string_view s) noexcept;
// s with every byte that starts no well-formed UTF-8 sequence replaced by U+FFFD, for echoing
// what a client sent (e.g. in an error message) inside JSON.
std::string to_valid_utf8(std::string_view s);

// Whether s holds only characters a thing may: valid UTF-8 without control characters
// (U+0000–U+001F, U+007F).
bool is_thing_text(std::string_view s) noexcept;
// thing: 1–512 bytes of is_thing_text.
void validate_thing(std::string_view thing);
// shadow name: 1–64 characters from [A-Za-z0-9_.:$-].
void validate_shadow_name(std::string_view name);
// clientToken: at most 64 bytes (invalid_request).
void validate_client_token(std::string_view token);
// tz: looks like an IANA zone name: "UTC", "Area/Location[/Sub]" (invalid_request).
void validate_tz(std::string_view tz);

}  // namespace deviceshadow
