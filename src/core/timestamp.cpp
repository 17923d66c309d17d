#include "deviceshadow/timestamp.hpp"

#include <bit>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <cmath>
#include <limits>
#include <stdexcept>

namespace deviceshadow {
namespace {

constexpr std::int64_t kNanosPerSecond = 1'000'000'000;

// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's algorithm).
std::int64_t days_from_civil(std::int64_t y, unsigned m, unsigned d) noexcept {
  y -= m <= 2;
  const std::int64_t era = (y >= 0 ? y : y - 399) / 400;
  const auto yoe = static_cast<unsigned>(y - era * 400);
  const unsigned doy = (153 * (m > 2 ? m - 3 : m + 9) + 2) / 5 + d - 1;
  const unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + static_cast<std::int64_t>(doe) - 719468;
}

void civil_from_days(std::int64_t z, std::int64_t& y, unsigned& m, unsigned& d) noexcept {
  z += 719468;
  const std::int64_t era = (z >= 0 ? z : z - 146096) / 146097;
  const auto doe = static_cast<unsigned>(z - era * 146097);
  const unsigned yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
  y = static_cast<std::int64_t>(yoe) + era * 400;
  const unsigned doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
  const unsigned mp = (5 * doy + 2) / 153;
  d = doy - (153 * mp + 2) / 5 + 1;
  m = mp < 10 ? mp + 3 : mp - 9;
  y += m <= 2;
}

bool is_leap(std::int64_t y) noexcept { return (y % 4 == 0 && y % 100 != 0) || y % 400 == 0; }

unsigned days_in_month(std::int64_t y, unsigned m) noexcept {
  static constexpr unsigned days[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  return m == 2 && is_leap(y) ? 29 : days[m - 1];
}

// Eight bytes at p as a little-endian integer: byte k of the text is bits 8k..8k+7.
std::uint64_t load_le64(const char* p) noexcept {
  std::uint64_t v;
  std::memcpy(&v, p, sizeof v);
  if constexpr (std::endian::native == std::endian::big) v = __builtin_bswap64(v);
  return v;
}

constexpr std::uint64_t kEachByte = 0x0101010101010101;

// Whether each of the eight bytes of v is an ASCII digit.
bool all_digits(std::uint64_t v) noexcept {
  return ((v & (kEachByte * 0xF0)) | (((v + kEachByte * 0x06) & (kEachByte * 0xF0)) >> 4)) == kEachByte * 0x33;
}

// The digit values of the bytes of v under `mask` (every other byte zero), or nullopt when one
// of those bytes is not a digit.
std::optional<std::uint64_t> digits_under(std::uint64_t v, std::uint64_t mask) noexcept {
  v = (v & mask) | (kEachByte * '0' & ~mask);
  if (!all_digits(v)) return std::nullopt;
  return v - kEachByte * '0';
}

// Byte k of the result: the two-digit number of digit values k and k+1.
std::uint64_t pairs(std::uint64_t digits) noexcept { return digits * 10 + (digits >> 8); }

unsigned byte_at(std::uint64_t v, int k) noexcept { return static_cast<unsigned>(v >> (8 * k)) & 0xFF; }

// The value of two ASCII digits at p, or -1.
int two_digits(const char* p) noexcept {
  const unsigned hi = static_cast<unsigned char>(p[0]) - '0', lo = static_cast<unsigned char>(p[1]) - '0';
  return hi > 9 || lo > 9 ? -1 : static_cast<int>(hi * 10 + lo);
}

// Cold, so that the compiler treats every path to it as unlikely and optimizes the accepting
// path for speed (GCC otherwise divided by constants there with div, as for rare code).
[[gnu::cold]] std::optional<Timestamp> fail(std::string* why, const char* message) {
  if (why) *why = message;
  return std::nullopt;
}

// Splits a count of `unit`-long ticks into seconds and nanoseconds, flooring.
Timestamp from_ticks(std::int64_t ticks, std::int64_t ticks_per_second) noexcept {
  std::int64_t s = ticks / ticks_per_second;
  std::int64_t rem = ticks % ticks_per_second;
  if (rem < 0) {
    rem += ticks_per_second;
    --s;
  }
  return Timestamp{s, static_cast<std::uint32_t>(rem * (kNanosPerSecond / ticks_per_second))};
}

std::int64_t ticks_per_second_for(long double magnitude) noexcept {
  if (magnitude < 1e11L) return 1;
  if (magnitude < 1e14L) return 1'000;
  if (magnitude < 1e17L) return 1'000'000;
  return kNanosPerSecond;
}

}  // namespace

Timestamp Timestamp::from_unix_nanos(std::int64_t ns) noexcept { return from_ticks(ns, kNanosPerSecond); }

std::int64_t Timestamp::unix_nanos() const noexcept {
  constexpr std::int64_t max_s = std::numeric_limits<std::int64_t>::max() / kNanosPerSecond;
  if (seconds > max_s - 1) return std::numeric_limits<std::int64_t>::max();
  if (seconds < -max_s) return std::numeric_limits<std::int64_t>::min();
  return seconds * kNanosPerSecond + nanos;
}

Timestamp now() noexcept {
  auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                std::chrono::system_clock::now().time_since_epoch())
                .count();
  return Timestamp::from_unix_nanos(ns);
}

std::optional<Timestamp> parse_rfc3339(std::string_view s, std::string* why) {
  // YYYY-MM-DDTHH:MM:SS[.fraction](Z|±HH:MM); 'T' may be 't' or ' ', 'Z' may be 'z'. The
  // fields up to the seconds have fixed positions and are read eight bytes at a time: the
  // date from bytes 0–7 and 8–9, the time from bytes 11–18. A shorter text is read from a
  // zero-padded copy, where the padding fails the checks as a missing field.
  const char* p = s.data();
  const std::size_t n = s.size();
  char padded[19] = {};
  if (n < sizeof padded) {
    s.copy(padded, n);
    p = padded;
  }
  const std::uint64_t head = load_le64(p), middle = load_le64(p + 8), tail = load_le64(p + 11);
  constexpr std::uint64_t kDateSeparators = 0xFF0000FF00000000, kTimeSeparators = 0x0000FF0000FF0000;
  const auto date = (head & kDateSeparators) == (std::uint64_t{'-'} << 56 | std::uint64_t{'-'} << 32)
                        ? digits_under(head, ~kDateSeparators) : std::nullopt;
  const auto day = date ? digits_under(middle, 0xFFFF) : std::nullopt;
  if (!day) return fail(why, "expected an RFC 3339 date-time such as 2025-01-22T13:22:26.5+01:00");
  if (p[10] != 'T' && p[10] != 't' && p[10] != ' ') return fail(why, "expected 'T' between date and time");
  const auto time = (tail & kTimeSeparators) == (std::uint64_t{':'} << 40 | std::uint64_t{':'} << 16)
                        ? digits_under(tail, ~kTimeSeparators) : std::nullopt;
  if (!time) return fail(why, "expected a time HH:MM:SS");
  const std::uint64_t date_pairs = pairs(*date), time_pairs = pairs(*time);
  const int year = static_cast<int>(byte_at(date_pairs, 0) * 100 + byte_at(date_pairs, 2));
  const unsigned month = byte_at(date_pairs, 5), day_of_month = byte_at(pairs(*day), 0);
  const unsigned hour = byte_at(time_pairs, 0), minute = byte_at(time_pairs, 3), second = byte_at(time_pairs, 6);
  if (month < 1 || month > 12 || day_of_month < 1 || day_of_month > days_in_month(year, month)) {
    return fail(why, "date out of range");
  }
  if (hour > 23 || minute > 59 || second > 60) return fail(why, "time out of range");
  std::size_t i = 19;
  std::uint32_t nanos = 0;
  if (i < s.size() && s[i] == '.') {
    ++i;
    std::size_t start = i;
    while (i < s.size() && s[i] >= '0' && s[i] <= '9') {
      if (i - start == 9) return fail(why, "fraction finer than nanoseconds");
      nanos = nanos * 10 + static_cast<std::uint32_t>(s[i] - '0');
      ++i;
    }
    if (i == start) return fail(why, "expected digits after '.'");
    static constexpr std::uint32_t kScale[] = {1, 100'000'000, 10'000'000, 1'000'000, 100'000, 10'000, 1'000, 100, 10, 1};
    nanos *= kScale[i - start];
  }
  std::int64_t offset_seconds = 0;
  if (i < s.size() && (s[i] == 'Z' || s[i] == 'z')) {
    ++i;
  } else if (i < n && (p[i] == '+' || p[i] == '-')) {
    const int sign = p[i] == '-' ? -1 : 1;
    const int oh = i + 6 <= n && p[i + 3] == ':' ? two_digits(p + i + 1) : -1;
    const int om = oh >= 0 ? two_digits(p + i + 4) : -1;
    if (om < 0 || oh > 23 || om > 59) return fail(why, "expected a UTC offset ±HH:MM");
    offset_seconds = sign * static_cast<std::int64_t>(oh * 3600 + om * 60);
    i += 6;
  } else {
    return fail(why, "missing UTC offset (Z or ±HH:MM)");
  }
  if (i != s.size()) return fail(why, "unexpected characters after the offset");
  const std::int64_t secs = days_from_civil(year, month, day_of_month) * 86400 + hour * 3600 + minute * 60 + second;
  return Timestamp{secs - offset_seconds, nanos};
}

std::optional<Timestamp> parse_timestamp(const json::value& v, std::string* why) {
  switch (v.kind()) {
    case json::kind::string: {
      const json::string& s = v.get_string();
      return parse_rfc3339(std::string_view(s.data(), s.size()), why);
    }
    case json::kind::int64: {
      std::int64_t n = v.get_int64();
      long double magnitude = std::fabs(static_cast<long double>(n));
      return from_ticks(n, ticks_per_second_for(magnitude));
    }
    case json::kind::uint64: {
      std::uint64_t n = v.get_uint64();  // > INT64_MAX, so nanoseconds
      return Timestamp{static_cast<std::int64_t>(n / kNanosPerSecond),
                       static_cast<std::uint32_t>(n % kNanosPerSecond)};
    }
    case json::kind::double_: {
      double d = v.get_double();
      if (!std::isfinite(d) || std::fabs(d) >= 9.2e18) return fail(why, "number out of range");
      double whole = std::floor(d);
      auto nanos = static_cast<std::int64_t>(std::llround((d - whole) * 1e9));
      auto secs = static_cast<std::int64_t>(whole);
      if (nanos >= kNanosPerSecond) {
        nanos -= kNanosPerSecond;
        ++secs;
      }
      return Timestamp{secs, static_cast<std::uint32_t>(nanos)};
    }
    default:
      return fail(why, "must be an RFC 3339 string or a number");
  }
}

std::string format_rfc3339(Timestamp t) {
  std::int64_t days = t.seconds / 86400;
  std::int64_t rem = t.seconds % 86400;
  if (rem < 0) {
    rem += 86400;
    --days;
  }
  std::int64_t y;
  unsigned m, d;
  civil_from_days(days, y, m, d);
  if (y < 0 || y > 9999) {  // outside RFC 3339's four-digit years: as wide as it takes
    char buf[48];
    std::snprintf(buf, sizeof buf, "%04lld-%02u-%02uT%02lld:%02lld:%02lld.%09uZ", static_cast<long long>(y), m, d,
                  static_cast<long long>(rem / 3600), static_cast<long long>(rem / 60 % 60),
                  static_cast<long long>(rem % 60), t.nanos);
    return buf;
  }
  // Digits written in place: this runs for every timestamp a response shows.
  char buf[] = "0000-00-00T00:00:00.000000000Z";
  auto put = [&](std::size_t at, std::uint64_t v, std::size_t width) {
    for (std::size_t i = width; i-- > 0; v /= 10) buf[at + i] = static_cast<char>('0' + v % 10);
  };
  put(0, static_cast<std::uint64_t>(y), 4);
  put(5, m, 2);
  put(8, d, 2);
  put(11, static_cast<std::uint64_t>(rem / 3600), 2);
  put(14, static_cast<std::uint64_t>(rem / 60 % 60), 2);
  put(17, static_cast<std::uint64_t>(rem % 60), 2);
  put(20, t.nanos, 9);
  return std::string(buf, sizeof buf - 1);
}

TimestampKeys::TimestampKeys() : TimestampKeys(std::vector<std::string>{"ts", "timestamp"}) {}

TimestampKeys::TimestampKeys(std::vector<std::string> keys) : keys_(std::move(keys)) {
  if (keys_.empty()) throw std::invalid_argument("TimestampKeys: at least one key is required");
  for (const std::string& k : keys_) {
    if (k.empty()) {
      has_empty_key_ = true;
    } else {
      const auto c = static_cast<unsigned char>(k[0]);
      first_bytes_[c / 64] |= std::uint64_t{1} << (c % 64);
    }
  }
}

namespace {

// a[1..] == b[1..] for strings of equal length, compared inline: timestamp keys are short.
bool same_tail(std::string_view a, std::string_view b) noexcept {
  for (std::size_t i = 1; i < a.size(); ++i) {
    if (a[i] != b[i]) return false;
  }
  return true;
}

}  // namespace

// One pass over the members. Most keys are not timestamp keys and this runs for every object
// a write touches, so a key's first byte is tested against the set of the keys' first bytes
// before any comparison.
const json::key_value_pair* TimestampKeys::first_key_member(const json::object& o) const noexcept {
  const json::key_value_pair* found = nullptr;
  std::size_t rank = keys_.size();
  for (const json::key_value_pair& m : o) {
    const std::string_view key(m.key().data(), m.key().size());
    if (key.empty() ? !has_empty_key_ : !starts_a_key(static_cast<unsigned char>(key[0]))) continue;
    for (std::size_t i = 0; i < rank; ++i) {
      const std::string& k = keys_[i];
      if (key.size() == k.size() && (k.empty() || (key[0] == k[0] && same_tail(key, k)))) {
        found = &m;
        rank = i;
        break;
      }
    }
    if (rank == 0) break;
  }
  return found;
}

const json::value* TimestampKeys::find(const json::object& o) const noexcept {
  const json::key_value_pair* m = first_key_member(o);
  return m ? &m->value() : nullptr;
}

std::string_view TimestampKeys::key_in(const json::object& o) const noexcept {
  const json::key_value_pair* m = first_key_member(o);
  return m ? std::string_view(m->key().data(), m->key().size()) : std::string_view();
}

}  // namespace deviceshadow
