#include "deviceshadow/error.hpp"
#include "deviceshadow/json.hpp"
#include "support/sanitized.hpp"

#include <gtest/gtest.h>

#include <charconv>
#include <cmath>
#include <cstring>
#include <random>

namespace ds = deviceshadow;
namespace json = boost::json;

namespace {

ds::Error parse_error(std::string_view text, std::size_t max_depth = 64) {
  try {
    ds::parse_json(text, max_depth);
  } catch (const ds::Error& e) {
    return e;
  }
  ADD_FAILURE() << "no error for " << text;
  return ds::Error(ds::ErrorCode::internal, "none");
}

TEST(Json, WritesDoublesInShortestRoundTripForm) {
  EXPECT_EQ(ds::to_json(ds::parse_json("22.5")), "22.5");
  EXPECT_EQ(ds::to_json(ds::parse_json("0.1")), "0.1");
  EXPECT_EQ(ds::to_json(ds::parse_json("2.25E1")), "22.5");
  EXPECT_EQ(ds::to_json(ds::parse_json("1.0")), "1.0");
  EXPECT_EQ(ds::to_json(ds::parse_json("-0.0")), "-0.0");
  EXPECT_EQ(ds::to_json(ds::parse_json("1e21")), "1e+21");
  EXPECT_EQ(ds::to_json(ds::parse_json("1e-7")), "1e-07");
  EXPECT_EQ(ds::to_json(ds::parse_json("123456789.125")), "123456789.125");
}

TEST(Json, KeepsIntegersExact) {
  EXPECT_EQ(ds::to_json(ds::parse_json("9223372036854775807")), "9223372036854775807");
  EXPECT_EQ(ds::to_json(ds::parse_json("-9223372036854775808")), "-9223372036854775808");
  EXPECT_EQ(ds::to_json(ds::parse_json("18446744073709551615")), "18446744073709551615");
  EXPECT_EQ(ds::to_json(ds::parse_json("9007199254740993")), "9007199254740993");
  // Beyond uint64 an integer is a double.
  EXPECT_EQ(ds::to_json(ds::parse_json("18446744073709551616")), "1.8446744073709552e+19");
  EXPECT_EQ(ds::to_json(ds::parse_json("12345678901234568")), "12345678901234568");  // int64: exact
  EXPECT_EQ(ds::to_json(json::value(12345678901234568.0)), "1.2345678901234568e+16");
  EXPECT_EQ(ds::to_json(json::value(9999999999999998.0)), "9999999999999998.0");
  EXPECT_EQ(ds::to_json(json::value(-1e16)), "-1e+16");
  EXPECT_EQ(ds::to_json(ds::parse_json("100000000000000000000")), "1e+20");
}

TEST(Json, EveryRandomDoubleRoundTripsBitExactly) {
  std::mt19937_64 rng(42);
  for (int i = 0; i < 100000; ++i) {
    std::uint64_t bits = rng();
    double d;
    std::memcpy(&d, &bits, sizeof d);
    if (!std::isfinite(d)) continue;
    std::string text = ds::to_json(json::value(d));
    json::value back = ds::parse_json(text);
    ASSERT_TRUE(back.is_double()) << text;
    double e = back.get_double();
    ASSERT_EQ(std::memcmp(&d, &e, sizeof d), 0) << text;
  }
}

// The serializer's fast path for short decimals must write exactly what std::to_chars
// (shortest round-trip) writes, plus ".0" for integral values below 1e16.
TEST(Json, ShortDecimalsAreWrittenExactlyAsToChars) {
  auto reference = [](double d) {
    char buf[32];
    auto [end, err] = std::to_chars(buf, buf + sizeof buf, d);
    std::string text(buf, end);
    if (text.find_first_of(".e") != std::string::npos) return text;
    if (std::fabs(d) < 1e16) return text + ".0";
    end = std::to_chars(buf, buf + sizeof buf, d, std::chars_format::scientific).ptr;
    return std::string(buf, end);
  };
  std::mt19937_64 rng(7);
  static constexpr double kPow10[] = {1, 10, 100, 1e3, 1e4, 1e5, 1e6};
  for (int i = 0; i < scaled_for_sanitizers(1'000'000); ++i) {
    std::int64_t m = static_cast<std::int64_t>(rng() % 2'000'000'000'000'000ULL) >> (rng() % 60);
    double d = static_cast<double>(m) / kPow10[rng() % 7];
    if (rng() % 2) d = -d;
    ASSERT_EQ(ds::to_json(json::value(d)), reference(d)) << m;
  }
  for (double d : {0.01, 0.001, 0.0099, 9999.0, 10000.0, 100000.0, 1e14, 999999999999999.9, 0.5, -0.0, 0.0, 1e15, 123.4567}) {
    EXPECT_EQ(ds::to_json(json::value(d)), reference(d)) << d;
  }
}

// Decimals of up to 15 digits without an exponent take the parser's fast path; every one must
// read exactly as std::from_chars (correct rounding) reads it, and so must the longer ones.
TEST(Json, ShortDecimalsAreReadExactlyAsFromChars) {
  std::mt19937_64 rng(11);
  for (int i = 0; i < scaled_for_sanitizers(1'000'000); ++i) {
    const int digits = 1 + static_cast<int>(rng() % 17);
    std::string text = rng() % 4 ? "" : "-";
    std::string all;
    for (int k = 0; k < digits; ++k) all += static_cast<char>('0' + rng() % 10);
    const std::size_t point = rng() % static_cast<std::size_t>(digits);  // digits before the point
    if (point > 1 && all[0] == '0') all[0] = '1';                        // no leading zero
    text += point == 0 ? "0" : all.substr(0, point);
    text += '.';
    text += point == all.size() ? "0" : all.substr(point);
    double expected = 0;
    std::from_chars(text.data(), text.data() + text.size(), expected);
    json::value parsed = ds::parse_json(text);
    ASSERT_TRUE(parsed.is_double()) << text;
    const double got = parsed.get_double();
    ASSERT_EQ(std::memcmp(&got, &expected, sizeof got), 0) << text;
  }
  EXPECT_TRUE(std::signbit(ds::parse_json("-0.0").get_double()));
  EXPECT_EQ(ds::parse_json("0.1").get_double(), 0.1);
  EXPECT_EQ(ds::parse_json("999999999999999.9").get_double(), 999999999999999.9);  // 16 digits
}

TEST(Json, RejectsNumbersOutsideTheDoubleRange) {
  EXPECT_EQ(parse_error("{\"a\":1e400}").code(), ds::ErrorCode::invalid_json);
  EXPECT_EQ(parse_error("-1e400").code(), ds::ErrorCode::invalid_json);
  EXPECT_EQ(ds::parse_json("1e-400").get_double(), 0.0);  // underflow reads as zero
  EXPECT_EQ(ds::parse_json("4.9e-324").get_double(), 4.9e-324);  // the smallest subnormal
}

TEST(Json, ReportsLineAndColumnOfMalformedJson) {
  ds::Error e = parse_error("{\n  \"a\": 1,\n  \"b\": tru\n}");
  EXPECT_EQ(e.code(), ds::ErrorCode::invalid_json);
  EXPECT_EQ(*e.details().line, 3u);
  EXPECT_GE(*e.details().column, 8u);
  EXPECT_NE(std::string(e.what()).find("line 3"), std::string::npos);
}

TEST(Json, RejectsTruncatedEmptyAndTrailingInput) {
  EXPECT_EQ(parse_error("").code(), ds::ErrorCode::invalid_json);
  EXPECT_EQ(parse_error("{\"a\":[1,2").code(), ds::ErrorCode::invalid_json);
  ds::Error trailing = parse_error("{} {}");
  EXPECT_EQ(trailing.code(), ds::ErrorCode::invalid_json);
  EXPECT_EQ(*trailing.details().column, 4u);
  EXPECT_EQ(parse_error("{\"a\":1,}").code(), ds::ErrorCode::invalid_json);
  EXPECT_EQ(parse_error("{'a':1}").code(), ds::ErrorCode::invalid_json);
  EXPECT_EQ(parse_error("NaN").code(), ds::ErrorCode::invalid_json);
}

TEST(Json, RejectsInvalidUtf8) {
  ds::Error e = parse_error("{\"a\":\"\xff\"}");
  EXPECT_EQ(e.code(), ds::ErrorCode::invalid_json);
  EXPECT_NE(std::string(e.what()).find("UTF-8"), std::string::npos);
  EXPECT_EQ(parse_error("\"\xc0\xaf\"").code(), ds::ErrorCode::invalid_json);      // overlong '/'
  EXPECT_EQ(parse_error("\"\xed\xa0\x80\"").code(), ds::ErrorCode::invalid_json);  // surrogate
}

TEST(Json, LimitsNestingWithoutRecursing) {
  std::string deep(100000, '[');
  EXPECT_EQ(parse_error(deep, 40).code(), ds::ErrorCode::too_deep);
  std::string ok = std::string(40, '[') + std::string(40, ']');
  EXPECT_NO_THROW(ds::parse_json(ok, 40));
}

TEST(Json, EscapesStringsAndKeepsUnicode) {
  json::value v = ds::parse_json(R"({"k\"ey":"a\\b\n\u0001\u00e9\u2603\ud83d\ude00"})");
  EXPECT_EQ(ds::to_json(v), "{\"k\\\"ey\":\"a\\\\b\\n\\u0001é☃😀\"}");
  EXPECT_EQ(ds::to_json(ds::parse_json(ds::to_json(v))), ds::to_json(v));
}

TEST(Json, ComparesNumbersExactlyAcrossKinds) {
  auto eq = [](const char* a, const char* b) { return ds::numbers_equal(ds::parse_json(a), ds::parse_json(b)); };
  EXPECT_TRUE(eq("1", "1.0"));
  EXPECT_TRUE(eq("1", "1e0"));
  EXPECT_TRUE(eq("18446744073709551615", "18446744073709551615"));
  EXPECT_TRUE(eq("9223372036854775807", "9223372036854775807"));
  EXPECT_FALSE(eq("-1", "18446744073709551615"));
  EXPECT_FALSE(eq("9007199254740993", "9007199254740992.0"));
  EXPECT_TRUE(eq("9007199254740992", "9007199254740992.0"));
  EXPECT_FALSE(eq("9223372036854775807", "9223372036854775807.0"));  // the double is 2^63
  EXPECT_TRUE(eq("0", "-0.0"));
  EXPECT_FALSE(eq("1", "1.5"));
}

TEST(Json, EscapesPointerTokens) {
  std::string p;
  ds::append_pointer_token(p, "a/b~c");
  ds::append_pointer_index(p, 12);
  EXPECT_EQ(p, "/a~1b~0c/12");
}

}  // namespace
