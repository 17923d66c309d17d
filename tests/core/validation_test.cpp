#include "deviceshadow/error.hpp"
#include "deviceshadow/json.hpp"
#include "deviceshadow/render.hpp"
#include "deviceshadow/validation.hpp"

#include <gtest/gtest.h>

namespace ds = deviceshadow;

namespace {

template <class F>
std::string rejected_field(F&& f) {
  try {
    f();
  } catch (const ds::Error& e) {
    return std::string(ds::code_name(e.code())) + ":" + e.details().field;
  }
  return "accepted";
}

TEST(Names, AcceptsAnyPrintableUtf8Thing) {
  for (const char* thing : {"t1", "My House#Basement#Lightning Controller", "a/b/c", "x y", "température ☃", "#", "%2F"}) {
    EXPECT_NO_THROW(ds::validate_thing(thing)) << thing;
  }
  EXPECT_NO_THROW(ds::validate_thing(std::string(512, 'a')));
}

TEST(Names, RejectsBadThings) {
  EXPECT_EQ(rejected_field([] { ds::validate_thing(""); }), "invalid_name:thing");
  EXPECT_EQ(rejected_field([] { ds::validate_thing(std::string(513, 'a')); }), "invalid_name:thing");
  EXPECT_EQ(rejected_field([] { ds::validate_thing("a\nb"); }), "invalid_name:thing");
  EXPECT_EQ(rejected_field([] { ds::validate_thing(std::string("a\0b", 3)); }), "invalid_name:thing");
  EXPECT_EQ(rejected_field([] { ds::validate_thing("a\x7f"); }), "invalid_name:thing");
  EXPECT_EQ(rejected_field([] { ds::validate_thing("\xff"); }), "invalid_name:thing");
  EXPECT_EQ(rejected_field([] { ds::validate_thing("\xe2\x98"); }), "invalid_name:thing");  // truncated
}

TEST(Names, ShadowNames) {
  for (const char* name : {"main", "a", "A-Z_0.9:$", "x"}) EXPECT_NO_THROW(ds::validate_shadow_name(name)) << name;
  EXPECT_NO_THROW(ds::validate_shadow_name(std::string(64, 'n')));
  for (std::string bad : {std::string(), std::string(65, 'n'), std::string("a b"), std::string("a/b"), std::string("a#b"),
                          std::string("é")}) {
    EXPECT_EQ(rejected_field([&] { ds::validate_shadow_name(bad); }), "invalid_name:name") << bad;
  }
}

TEST(Names, ClientTokenAtMost64Bytes) {
  EXPECT_NO_THROW(ds::validate_client_token(std::string(64, 'c')));
  EXPECT_NO_THROW(ds::validate_client_token(""));
  EXPECT_EQ(rejected_field([] { ds::validate_client_token(std::string(65, 'c')); }), "invalid_request:clientToken");
}

TEST(Names, TimeZones) {
  for (const char* tz : {"UTC", "Europe/Stockholm", "America/Argentina/Buenos_Aires", "Etc/GMT+5", "EST5EDT", "America/Port-au-Prince"}) {
    EXPECT_NO_THROW(ds::validate_tz(tz)) << tz;
  }
  for (const char* tz : {"", "Europe/", "/UTC", "Europe//Stockholm", "a/b/c/d", "Europe/Stock holm", "1UTC", "Europe/../etc",
                         "+01:00"}) {
    EXPECT_EQ(rejected_field([&] { ds::validate_tz(tz); }), "invalid_request:tz") << tz;
  }
}

TEST(Utf8, Validation) {
  EXPECT_TRUE(ds::is_valid_utf8("plain"));
  EXPECT_TRUE(ds::is_valid_utf8("\xf0\x9f\x98\x80"));
  EXPECT_FALSE(ds::is_valid_utf8("\xf4\x90\x80\x80"));  // past U+10FFFF
  EXPECT_FALSE(ds::is_valid_utf8("\xe0\x80\xaf"));      // overlong
  EXPECT_FALSE(ds::is_valid_utf8("\x80"));
}

TEST(Errors, MapToTheHttpStatusesOfTheSpec) {
  EXPECT_EQ(ds::http_status(ds::ErrorCode::invalid_json), 400);
  EXPECT_EQ(ds::http_status(ds::ErrorCode::too_deep), 400);
  EXPECT_EQ(ds::http_status(ds::ErrorCode::unauthorized), 401);
  EXPECT_EQ(ds::http_status(ds::ErrorCode::forbidden), 403);
  EXPECT_EQ(ds::http_status(ds::ErrorCode::not_found), 404);
  EXPECT_EQ(ds::http_status(ds::ErrorCode::version_conflict), 409);
  EXPECT_EQ(ds::http_status(ds::ErrorCode::document_too_large), 413);
  EXPECT_EQ(ds::http_status(ds::ErrorCode::throttled), 429);
  EXPECT_EQ(ds::http_status(ds::ErrorCode::unavailable), 503);
  EXPECT_EQ(ds::http_status(ds::ErrorCode::internal), 500);
  EXPECT_EQ(ds::Error::version_conflict(7).details().current_version, 7u);
}

// Bytes a client sent are echoed in error messages; whatever they were, the body stays UTF-8 JSON.
TEST(Errors, RenderAsValidUtf8WhateverTheClientSent) {
  EXPECT_EQ(ds::to_valid_utf8("plain \xC3\xA9"), "plain \xC3\xA9");
  EXPECT_EQ(ds::to_valid_utf8("/\xFF\xFE"), "/\xEF\xBF\xBD\xEF\xBF\xBD");
  EXPECT_EQ(ds::to_valid_utf8("\xC3"), "\xEF\xBF\xBD");                      // truncated
  EXPECT_EQ(ds::to_valid_utf8("\xED\xA0\x80x"), "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBDx");  // surrogate
  EXPECT_EQ(ds::to_valid_utf8("\xC0\xAF"), "\xEF\xBF\xBD\xEF\xBF\xBD");  // overlong '/'
  const ds::Error e = ds::Error::invalid_request("unknown query parameter '\xFF'", "\xFF\x80");
  const std::string body = ds::render_error(e);
  EXPECT_TRUE(ds::is_valid_utf8(body)) << body;
  const auto parsed = ds::parse_json(body);  // throws on invalid UTF-8
  EXPECT_EQ(parsed.at("error").at("field").as_string(), "\xEF\xBF\xBD\xEF\xBF\xBD");
}

}  // namespace
