#include "deviceshadow/json.hpp"
#include "deviceshadow/timestamp.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <optional>
#include <random>
#include <string>

namespace ds = deviceshadow;

namespace {

// Nanoseconds since the epoch of a JSON timestamp (text), or -1 when it is invalid.
std::int64_t ns(const char* json_text) {
  auto t = ds::parse_timestamp(ds::parse_json(json_text));
  return t ? t->unix_nanos() : -1;
}

constexpr std::int64_t k2025 = 1735689600LL * 1'000'000'000;  // 2025-01-01T00:00:00Z

TEST(Timestamp, ParsesEveryEncodingToTheSameInstant) {
  struct { const char* text; std::int64_t expected; } cases[] = {
      {R"("2025-01-01T00:00:00Z")", k2025},
      {R"("2025-01-01T01:00:00+01:00")", k2025},
      {R"("2024-12-31T19:00:00-05:00")", k2025},
      {R"("2025-01-01t00:00:00z")", k2025},
      {R"("2025-01-01 00:00:00Z")", k2025},
      {R"("2025-01-01T00:00:00.5Z")", k2025 + 500'000'000},
      {R"("2025-01-01T00:00:00.123456789Z")", k2025 + 123'456'789},
      {"1735689600", k2025},
      {"1735689600000", k2025},
      {"1735689600000000", k2025},
      {"1735689600000000000", k2025},
      {"1735689600.25", k2025 + 250'000'000},
      {"1735689600.0", k2025},
      {"0", 0},
      {"100000000000", 100'000'000'000LL * 1'000'000},     // 1e11: milliseconds
      {"100000000000000", 100'000'000'000'000LL * 1'000},  // 1e14: microseconds
      {"100000000000000000", 100'000'000'000'000'000LL},  // 1e17: nanoseconds
      {"-1", -1'000'000'000},
      {"-1.5", -1'500'000'000},
  };
  for (const auto& c : cases) EXPECT_EQ(ns(c.text), c.expected) << c.text;
}

TEST(Timestamp, MagnitudeBelow1e11IsSeconds) {
  auto t = ds::parse_timestamp(ds::parse_json("99999999999"));
  ASSERT_TRUE(t);
  EXPECT_EQ(t->seconds, 99'999'999'999LL);
  EXPECT_EQ(t->nanos, 0u);
}

TEST(Timestamp, UnsignedNanosecondsBeyondInt64) {
  auto t = ds::parse_timestamp(ds::parse_json("18446744073709551615"));
  ASSERT_TRUE(t);
  EXPECT_EQ(t->seconds, 18446744073LL);
  EXPECT_EQ(t->nanos, 709551615u);
}

TEST(Timestamp, RejectsMalformedTimes) {
  for (const char* text : {R"("")", R"("yesterday")", R"("2025-01-01")", R"("2025-01-01T00:00:00")",
                           R"("2025-13-01T00:00:00Z")", R"("2025-00-01T00:00:00Z")", R"("2025-04-31T00:00:00Z")",
                           R"("2025-01-01T24:00:00Z")", R"("2025-01-01T00:60:00Z")", R"("2025-01-01T00:00:61Z")",
                           R"("2025-01-01T00:00:00.Z")", R"("2025-01-01T00:00:00.1234567890Z")",
                           R"("2025-01-01T00:00:00+1:00")", R"("2025-01-01T00:00:00+24:00")",
                           R"("2025-01-01T00:00:00Zjunk")", R"("+2025-01-01T00:00:00Z")", R"("2025-01-01T00:00:00+0100")",
                           R"("2025-01-01T00:00:00+01:0")", R"("2025-01-01T00:00:00+01:00x")", R"("2025-1-01T00:00:00Z")",
                           R"("2025-01-01T0:00:00Z")", R"("2025-01-01T00:00:0")", R"("2025-01-01X00:00:00Z")", "true", "null",
                           "{}", "[]", "1e300"}) {
    std::string why;
    EXPECT_FALSE(ds::parse_timestamp(ds::parse_json(text), &why)) << text;
    EXPECT_FALSE(why.empty()) << text;
  }
}

TEST(Timestamp, AcceptsALeapSecond) {
  EXPECT_EQ(ns(R"("2016-12-31T23:59:60Z")"), 1483228800LL * 1'000'000'000);
}

TEST(Timestamp, FormatsUtcWithNanoseconds) {
  EXPECT_EQ(ds::format_rfc3339(ds::Timestamp::from_unix_nanos(k2025 + 123'456'789)), "2025-01-01T00:00:00.123456789Z");
  EXPECT_EQ(ds::format_rfc3339(ds::Timestamp{-1, 0}), "1969-12-31T23:59:59.000000000Z");
  EXPECT_EQ(ds::format_rfc3339(*ds::parse_rfc3339("9999-12-31T23:59:59.999999999Z")), "9999-12-31T23:59:59.999999999Z");
  EXPECT_EQ(ds::format_rfc3339(*ds::parse_rfc3339("0000-01-01T00:00:00Z")), "0000-01-01T00:00:00.000000000Z");
}

// Every time of the four-digit years is written so that it reads back exactly (the digits are
// written in place there), and years outside them are still written whole.
TEST(Timestamp, FormatsEveryFourDigitYearExactly) {
  std::mt19937_64 rng(7);
  constexpr std::int64_t kYear0 = -62167219200, kYear10000 = 253402300800;  // Unix seconds
  for (int i = 0; i < 20000; ++i) {
    const std::int64_t seconds = kYear0 + static_cast<std::int64_t>(rng() % static_cast<std::uint64_t>(kYear10000 - kYear0));
    const auto nanos = static_cast<std::uint32_t>(rng() % 1'000'000'000);
    const std::string text = ds::format_rfc3339(ds::Timestamp{seconds, nanos});
    const ds::Timestamp t{seconds, nanos};
    ASSERT_TRUE(*ds::parse_rfc3339(text) == t) << text;
    ASSERT_EQ(text.size(), 30u) << text;
  }
  EXPECT_EQ(ds::format_rfc3339(ds::Timestamp{kYear10000, 5}), "10000-01-01T00:00:00.000000005Z");
  EXPECT_EQ(ds::format_rfc3339(ds::Timestamp{kYear0 - 1, 0}), "-001-12-31T23:59:59.000000000Z");
}

TEST(Timestamp, FormatAndParseRoundTrip) {
  for (std::int64_t n : std::vector<std::int64_t>{0, 1, -1, k2025, 4102444800123456789LL, -2208988800000000001LL}) {
    auto t = ds::Timestamp::from_unix_nanos(n);
    EXPECT_EQ(ds::parse_rfc3339(ds::format_rfc3339(t)), t) << n;
  }
}

TEST(Timestamp, ComparesAsInstants) {
  EXPECT_LT(*ds::parse_rfc3339("2025-01-01T01:00:00+02:00"), *ds::parse_rfc3339("2025-01-01T00:00:00Z"));
  EXPECT_EQ(*ds::parse_rfc3339("2025-01-01T01:00:00+01:00"), *ds::parse_rfc3339("2025-01-01T00:00:00Z"));
}

// RFC 3339 as the grammar reads, one character at a time, with the calendar of std::chrono:
// the reference parse_rfc3339 (which reads eight bytes at a time) is checked against.
std::optional<ds::Timestamp> reference_rfc3339(std::string_view s) {
  auto digits = [&](std::size_t at, std::size_t count) -> int {
    if (at + count > s.size()) return -1;
    int v = 0;
    for (std::size_t i = at; i < at + count; ++i) {
      if (s[i] < '0' || s[i] > '9') return -1;
      v = v * 10 + (s[i] - '0');
    }
    return v;
  };
  auto is = [&](std::size_t at, std::string_view options) { return at < s.size() && options.find(s[at]) != options.npos; };
  const int year = digits(0, 4), month = digits(5, 2), day = digits(8, 2);
  const int hour = digits(11, 2), minute = digits(14, 2), second = digits(17, 2);
  if (year < 0 || month < 0 || day < 0 || hour < 0 || minute < 0 || second < 0) return std::nullopt;
  if (!is(4, "-") || !is(7, "-") || !is(10, "Tt ") || !is(13, ":") || !is(16, ":")) return std::nullopt;
  const std::chrono::year_month_day date{std::chrono::year(year), std::chrono::month(static_cast<unsigned>(month)),
                                         std::chrono::day(static_cast<unsigned>(day))};
  if (!date.ok() || hour > 23 || minute > 59 || second > 60) return std::nullopt;
  std::size_t i = 19;
  std::uint32_t nanos = 0;
  if (is(i, ".")) {
    std::size_t count = 0;
    for (++i; is(i, "0123456789"); ++i, ++count) {
      if (count < 9) nanos = nanos * 10 + static_cast<std::uint32_t>(s[i] - '0');
    }
    if (count == 0 || count > 9) return std::nullopt;
    for (; count < 9; ++count) nanos *= 10;
  }
  std::int64_t offset = 0;
  if (is(i, "Zz")) {
    ++i;
  } else if (is(i, "+-")) {
    const int oh = digits(i + 1, 2), om = digits(i + 4, 2);
    if (oh < 0 || om < 0 || !is(i + 3, ":") || oh > 23 || om > 59) return std::nullopt;
    offset = (s[i] == '-' ? -1 : 1) * (oh * 3600 + om * 60);
    i += 6;
  } else {
    return std::nullopt;
  }
  if (i != s.size()) return std::nullopt;
  const std::int64_t days = std::chrono::sys_days(date).time_since_epoch().count();
  return ds::Timestamp{days * 86400 + hour * 3600 + minute * 60 + second - offset, nanos};
}

void expect_as_reference(const std::string& text) {
  std::string why;
  const auto parsed = ds::parse_rfc3339(text, &why);
  ASSERT_EQ(parsed, reference_rfc3339(text)) << '"' << text << '"';
  if (!parsed) {
    ASSERT_FALSE(why.empty()) << '"' << text << '"';
  }
}

// Every byte value at every position, every truncation and one byte appended, around valid
// texts that cover each field's edges.
TEST(Timestamp, ReadsEveryNearMissAsTheGrammarDoes) {
  for (std::string valid : {"2025-01-22T13:22:26.5+01:00", "2024-02-29t23:59:60Z", "0000-01-01 00:00:00z",
                            "9999-12-31T23:59:59.123456789-23:59", "1900-02-28T00:00:00.000000001Z"}) {
    for (std::size_t at = 0; at < valid.size(); ++at) {
      for (int byte = 0; byte < 256; ++byte) {
        std::string text = valid;
        text[at] = static_cast<char>(byte);
        expect_as_reference(text);
      }
    }
    for (std::size_t length = 0; length <= valid.size(); ++length) expect_as_reference(valid.substr(0, length));
    for (char extra : {'0', 'Z', ' '}) expect_as_reference(valid + extra);
  }
}

TEST(TimestampKeys, FindsTheFirstConfiguredKey) {
  ds::TimestampKeys keys;
  auto o = ds::parse_json(R"({"timestamp":1,"ts":2})").as_object();
  EXPECT_EQ(keys.key_in(o), "ts");
  EXPECT_EQ(keys.find(o)->as_int64(), 2);
  EXPECT_EQ(keys.find(ds::parse_json(R"({"value":1})").as_object()), nullptr);
  ds::TimestampKeys custom({"at"});
  EXPECT_EQ(custom.find(o), nullptr);
  // Keys with different first bytes, and the empty key; priority is the configured order.
  ds::TimestampKeys several({"time", "at", ""});
  EXPECT_EQ(several.key_in(ds::parse_json(R"({"x":1,"":3,"at":2,"a":0,"tim":0})").as_object()), "at");
  EXPECT_EQ(several.key_in(ds::parse_json(R"({"x":1,"":3,"times":0})").as_object()), "");
  EXPECT_EQ(several.key_in(ds::parse_json(R"({"":3,"at":2,"time":1})").as_object()), "time");
  EXPECT_EQ(several.find(ds::parse_json(R"({"x":1,"At":2,"T":0})").as_object()), nullptr);
  EXPECT_THROW(ds::TimestampKeys(std::vector<std::string>{}), std::invalid_argument);
}

}  // namespace
