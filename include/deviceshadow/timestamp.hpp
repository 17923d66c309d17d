// Timestamps and timestamped values (docs/semantics.md, "Documents and timestamped values").
#pragma once

#include "deviceshadow/json.hpp"

#include <compare>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace deviceshadow {

// An absolute instant: seconds since the Unix epoch (UTC) plus nanoseconds. Covers the
// RFC 3339 years 0000–9999, which int64 nanoseconds could not.
struct Timestamp {
  std::int64_t seconds = 0;
  std::uint32_t nanos = 0;  // 0 .. 999'999'999

  friend auto operator<=>(const Timestamp&, const Timestamp&) = default;

  static Timestamp from_unix_nanos(std::int64_t ns) noexcept;
  // Saturates outside the int64 nanosecond range (years 1677–2262).
  std::int64_t unix_nanos() const noexcept;
};

// The current server time.
Timestamp now() noexcept;

// Parses one of the accepted encodings: RFC 3339 string with offset; integer epoch (seconds
// if |n| < 1e11, ms if < 1e14, µs if < 1e17, else ns); non-integer number as fractional
// seconds. Returns nullopt (and an explanation in *why, if given) for anything else.
std::optional<Timestamp> parse_timestamp(const json::value& v, std::string* why = nullptr);
std::optional<Timestamp> parse_rfc3339(std::string_view text, std::string* why = nullptr);

// RFC 3339 in UTC with nine fraction digits: "2026-11-21T20:31:02.123456789Z".
std::string format_rfc3339(Timestamp t);

// The member names that make an object a timestamped value, in priority order
// (default "ts", "timestamp"). Immutable after construction; safe to share between threads.
class TimestampKeys {
 public:
  TimestampKeys();
  explicit TimestampKeys(std::vector<std::string> keys);  // must not be empty

  // The timestamp member of o if o is a timestamped value (the first configured key it
  // has), else nullptr. Callers decide whether o is a section root, which never is one.
  const json::value* find(const json::object& o) const noexcept;
  // Name of the timestamp member find() would return (empty if none).
  std::string_view key_in(const json::object& o) const noexcept;

 private:
  // The member of o whose key comes first in keys_, or nullptr.
  const json::key_value_pair* first_key_member(const json::object& o) const noexcept;
  bool starts_a_key(unsigned char c) const noexcept { return first_bytes_[c / 64] >> (c % 64) & 1; }

  std::vector<std::string> keys_;
  std::uint64_t first_bytes_[4] = {};  // the set of the keys' first bytes
  bool has_empty_key_ = false;
};

}  // namespace deviceshadow
