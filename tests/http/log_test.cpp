// Log lines stay bounded and single whatever a client sends.
#include "http/log.hpp"

#include <gtest/gtest.h>

#include <string>

namespace srv = deviceshadow::http;

namespace {

std::string logged(bool json, std::string value) {
  srv::Logger logger(srv::LogLevel::info, json);
  testing::internal::CaptureStderr();
  logger.log(srv::LogLevel::info, "request", {{"target", std::move(value)}});
  return testing::internal::GetCapturedStderr();
}

TEST(Logger, CutsLongValuesAndCountsTheRest) {
  for (bool json : {false, true}) {
    const std::string line = logged(json, std::string(11'000'000, 'a'));
    EXPECT_LT(line.size(), 2300u) << json;
    EXPECT_NE(line.find("…(+10997952 bytes)"), std::string::npos) << json;
  }
}

TEST(Logger, TextLinesEscapeControlCharacters) {
  const std::string line = logged(false, "a\nb\x1b[31m\x7f");
  EXPECT_EQ(line.substr(line.find("target=")), "target=\"a\\\\x0ab\\\\x1b[31m\\\\x7f\"\n");
  const std::string json = logged(true, "a\nb");
  EXPECT_NE(json.find(R"("target":"a\nb")"), std::string::npos) << json;
}

// A value that could read as more fields (logfmt) is quoted, its quotes and backslashes escaped.
TEST(Logger, TextValuesThatCouldReadAsMoreFieldsAreQuoted) {
  auto value = [](std::string v) {
    const std::string line = logged(false, std::move(v));
    return line.substr(line.find("target=") + 7, line.size() - line.find("target=") - 8);
  };
  EXPECT_EQ(value("/v1/things/t1"), "/v1/things/t1");
  EXPECT_EQ(value("lamp x=1 level=error"), R"("lamp x=1 level=error")");
  EXPECT_EQ(value(R"(a "q" \ b)"), R"("a \"q\" \\ b")");
  EXPECT_EQ(value(""), R"("")");
}

TEST(LogRateLimit, AdmitsPerSecondAndTellsWhatWasLeftOut) {
  srv::LogRateLimit limit(3);
  std::uint64_t suppressed = 99;
  for (int i = 0; i < 3; ++i) {
    EXPECT_TRUE(limit.admit(suppressed));
    EXPECT_EQ(suppressed, 0u);
  }
  for (int i = 0; i < 5; ++i) EXPECT_FALSE(limit.admit(suppressed));
}

}  // namespace
