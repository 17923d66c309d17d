// Registrations: validation of every field, defaults, matching of shadows and paths.
#include "deviceshadow/error.hpp"
#include "deviceshadow/json.hpp"
#include "notify/registration.hpp"

#include <gtest/gtest.h>

namespace ds = deviceshadow;
namespace notify = deviceshadow::notify;

namespace {

constexpr const char* kWebhook = R"({"target":{"type":"webhook","url":"http://127.0.0.1:9000/hook"}})";

// The field an invalid registration is rejected for ("accepted" when it is not).
std::string rejected_field(std::string_view id, std::string_view json) {
  try {
    notify::parse_registration(id, json);
  } catch (const ds::Error& e) {
    EXPECT_EQ(e.code(), ds::ErrorCode::invalid_request) << e.what();
    return e.details().field;
  }
  return "accepted";
}

TEST(Registration, FillsInTheDefaults) {
  notify::Registration r = notify::parse_registration("ops-alerts", kWebhook);
  EXPECT_EQ(r.id, "ops-alerts");
  EXPECT_EQ(r.sections, notify::SectionFilter::both);
  EXPECT_EQ(r.match, ".*");
  EXPECT_TRUE(r.include_old && r.include_new && r.include_diff);
  EXPECT_TRUE(r.paths.empty());
  EXPECT_TRUE(r.enabled);
  EXPECT_EQ(r.max_attempts, 10);
  EXPECT_EQ(r.max_age.count(), 3600);
  const auto& w = std::get<notify::WebhookTarget>(r.target);
  EXPECT_EQ(w.timeout.count(), 5000);
  EXPECT_EQ(notify::render_registration(r),
            R"({"id":"ops-alerts","sections":"both","match":".*","include":["old","new","diff"],)"
            R"("target":{"type":"webhook","url":"http://127.0.0.1:9000/hook","timeoutMs":5000},"enabled":true,"maxAttempts":10,"maxAgeSeconds":3600})");
}

TEST(Registration, ReadsEveryFieldAndRendersItBack) {
  const std::string doc =
      R"({"id":"r.1","sections":"desired","match":"^My House#.*#main$","include":["diff","old"],)"
      R"("paths":["/climate","/a~1b"],"target":{"type":"webhook","url":"https://example.test/x?y=1","secret":"s3cret",)"
      R"("headers":{"X-Team":"ops"},"timeoutMs":250},"enabled":false,"maxAttempts":3})";
  notify::Registration r = notify::parse_registration("r.1", doc);
  EXPECT_EQ(r.sections, notify::SectionFilter::desired);
  EXPECT_TRUE(r.include_old && !r.include_new && r.include_diff);
  EXPECT_EQ(r.paths, (std::vector<std::string>{"/climate", "/a~1b"}));
  EXPECT_FALSE(r.enabled);
  EXPECT_EQ(r.max_attempts, 3);
  const std::string rendered = notify::render_registration(r);
  // What is rendered parses to the same registration.
  EXPECT_EQ(notify::render_registration(notify::parse_registration("r.1", rendered)), rendered);
  EXPECT_NE(rendered.find(R"("secret":"s3cret")"), std::string::npos);
  const std::string shown = notify::render_registration_public(r);
  EXPECT_EQ(shown.find("s3cret"), std::string::npos);
  EXPECT_NE(shown.find(R"("secret":"***")"), std::string::npos);
  EXPECT_NE(shown.find(R"("url":"https://example.test/x?y=***")"), std::string::npos) << shown;
  EXPECT_NE(shown.find(R"("headers":{"X-Team":"***"})"), std::string::npos) << shown;
}

// What may be a credential in a webhook's URL is hidden by the API: the user part's password and
// each query value, whatever else the URL holds.
TEST(Registration, TheApiHidesAUrlsPasswordAndQueryValues) {
  auto shown_url = [](const std::string& url) {
    const std::string doc = R"({"target":{"type":"webhook","url":")" + url + R"("}})";
    const ds::json::value v = ds::parse_json(notify::render_registration_public(notify::parse_registration("w", doc)));
    return std::string(v.at("target").at("url").as_string());
  };
  EXPECT_EQ(shown_url("https://u:pw@h.test:8443/p?token=abc&x=1&flag#frag"), "https://u:***@h.test:8443/p?token=***&x=***&flag#frag");
  EXPECT_EQ(shown_url("https://u@h.test/p"), "https://u@h.test/p");
  EXPECT_EQ(shown_url("http://h.test/a@b?c=d@e"), "http://h.test/a@b?c=***");
  EXPECT_EQ(shown_url("http://127.0.0.1:9000/hook"), "http://127.0.0.1:9000/hook");
}

TEST(Registration, ReadsEveryTargetType) {
  auto sqs = notify::parse_registration(
      "q", R"({"target":{"type":"sqs","queueUrl":"http://127.0.0.1:5000/123/q","region":"eu-north-1","endpoint":"http://127.0.0.1:5000"}})");
  EXPECT_EQ(std::get<notify::SqsTarget>(sqs.target).region, "eu-north-1");
  auto sns = notify::parse_registration("t", R"({"target":{"type":"sns","topicArn":"arn:aws:sns:us-east-1:123456789012:t"}})");
  EXPECT_EQ(std::get<notify::SnsTarget>(sns.target).topic_arn, "arn:aws:sns:us-east-1:123456789012:t");
  auto mqtt = notify::parse_registration(
      "m", R"({"target":{"type":"mqtt","broker":"mqtt://127.0.0.1:1883","qos":0,"username":"u","password":"p"}})");
  const auto& m = std::get<notify::MqttTarget>(mqtt.target);
  EXPECT_EQ(m.topic, "shadows/{thing}/{name}");
  EXPECT_EQ(m.qos, 0);
  EXPECT_EQ(notify::render_registration_public(mqtt).find(R"("password":"p")"), std::string::npos);
}

TEST(Registration, RejectsEachInvalidFieldNamingIt) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {R"({"id":"other","target":{"type":"webhook","url":"http://h/"}})", "id"},
      {R"({"sections":"all","target":{"type":"webhook","url":"http://h/"}})", "sections"},
      {R"({"sections":1,"target":{"type":"webhook","url":"http://h/"}})", "sections"},
      {R"({"match":"(unclosed","target":{"type":"webhook","url":"http://h/"}})", "match"},
      {R"({"include":[],"target":{"type":"webhook","url":"http://h/"}})", "include"},
      {R"({"include":["old","everything"],"target":{"type":"webhook","url":"http://h/"}})", "include"},
      {R"({"paths":"/a","target":{"type":"webhook","url":"http://h/"}})", "paths"},
      {R"({"paths":["a"],"target":{"type":"webhook","url":"http://h/"}})", "paths"},
      {R"({"paths":["/a~2"],"target":{"type":"webhook","url":"http://h/"}})", "paths"},
      {R"({"enabled":"yes","target":{"type":"webhook","url":"http://h/"}})", "enabled"},
      {R"({"maxAttempts":0,"target":{"type":"webhook","url":"http://h/"}})", "maxAttempts"},
      {R"({"maxAttempts":1.5,"target":{"type":"webhook","url":"http://h/"}})", "maxAttempts"},
      {R"({"extra":1,"target":{"type":"webhook","url":"http://h/"}})", "extra"},
      {R"({})", "target"},
      {R"({"target":[]})", "target"},
      {R"({"target":{}})", "target.type"},
      {R"({"target":{"type":"carrier-pigeon"}})", "target.type"},
      {R"({"target":{"type":"webhook"}})", "target.url"},
      {R"({"target":{"type":"webhook","url":"ftp://h/"}})", "target.url"},
      {R"({"target":{"type":"webhook","url":"file:///etc/passwd"}})", "target.url"},
      {R"({"target":{"type":"webhook","url":"http://"}})", "target.url"},
      {R"({"target":{"type":"webhook","url":"http://u:pw@"}})", "target.url"},
      {R"({"target":{"type":"webhook","url":"http://u@:80/x"}})", "target.url"},
      {R"({"target":{"type":"webhook","url":"http://h/ x"}})", "target.url"},
      {R"({"target":{"type":"webhook","url":"http://h/","timeoutMs":0}})", "target.timeoutMs"},
      {R"({"target":{"type":"webhook","url":"http://h/","headers":{"Bad Name":"x"}}})", "target.headers.Bad Name"},
      {R"({"target":{"type":"webhook","url":"http://h/","headers":{"X-A":"a\r\nX-Injected: 1"}}})", "target.headers.X-A"},
      {R"({"target":{"type":"webhook","url":"http://h/","headers":{"X-A":1}}})", "target.headers.X-A"},
      {R"({"target":{"type":"webhook","url":"http://h/","queueUrl":"x"}})", "target.queueUrl"},
      {R"({"target":{"type":"sqs"}})", "target.queueUrl"},
      {R"({"target":{"type":"sqs","queueUrl":"not a url"}})", "target.queueUrl"},
      {R"({"target":{"type":"sns","topicArn":"topic"}})", "target.topicArn"},
      {R"({"target":{"type":"mqtt","broker":"http://h:1883"}})", "target.broker"},
      {R"({"target":{"type":"mqtt","broker":"mqtt://h:1883","topic":"a/#"}})", "target.topic"},
      {R"({"target":{"type":"mqtt","broker":"mqtt://h:1883","qos":2}})", "target.qos"},
      // A port out of range is refused, not wrapped or replaced by a default (events would go
      // to whatever listens there).
      {R"({"target":{"type":"mqtt","broker":"mqtt://h:99999"}})", "target.broker"},
      {R"({"target":{"type":"mqtt","broker":"mqtt://h:0"}})", "target.broker"},
      {R"({"target":{"type":"mqtt","broker":"mqtt://h:x"}})", "target.broker"},
      {R"({"target":{"type":"mqtt","broker":"mqtt://[::1:1883"}})", "target.broker"},
      {R"({"target":{"type":"webhook","url":"http://h:70000/"}})", "target.url"},
      {R"({"target":{"type":"webhook","url":"http://h:-1/"}})", "target.url"},
      {R"({"target":{"type":"sqs","queueUrl":"http://h:65536/q"}})", "target.queueUrl"},
  };
  for (const auto& [doc, field] : cases) EXPECT_EQ(rejected_field("r", doc), field) << doc;
  EXPECT_EQ(rejected_field("", kWebhook), "id");
  EXPECT_EQ(rejected_field(std::string(65, 'a'), kWebhook), "id");
  EXPECT_EQ(rejected_field("a/b", kWebhook), "id");
  EXPECT_EQ(rejected_field(std::string(64, 'a'), kWebhook), "accepted");
  EXPECT_THROW(notify::parse_registration("r", "[1"), ds::Error);
  EXPECT_EQ(rejected_field("r", "[]"), "");
}

// A broker URL's credentials or path were dropped: a registration given now is refused them,
// one stored by an earlier version still loads.
TEST(Registration, ANewBrokerUrlCarriesNoCredentialsOrPath) {
  for (const char* broker : {"mqtt://user:pw@h:1883", "mqtt://user@h", "mqtt://h:1883/topic", "mqtt://h?x=1"}) {
    const std::string doc = std::string(R"({"target":{"type":"mqtt","broker":")") + broker + R"("}})";
    const notify::Registration stored = notify::parse_registration("r", doc);
    try {
      notify::check_new_registration(stored);
      ADD_FAILURE() << broker << " was accepted";
    } catch (const ds::Error& e) {
      EXPECT_EQ(e.details().field, "target.broker") << broker;
    }
  }
  for (const char* broker : {"mqtt://h:1883", "mqtt://h:1883/", "mqtt://[::1]:1883"}) {
    const std::string doc = std::string(R"({"target":{"type":"mqtt","broker":")") + broker + R"("}})";
    EXPECT_NO_THROW(notify::check_new_registration(notify::parse_registration("r", doc))) << broker;
  }
  EXPECT_NO_THROW(notify::check_new_registration(notify::parse_registration("r", kWebhook)));
}

// Also checked of a new registration only: topic templates and AWS regions.
TEST(Registration, ANewTopicTemplateHasKnownPlaceholdersAndARegionIsARegionName) {
  auto refused_field = [](const std::string& target) -> std::string {
    try {
      notify::check_new_registration(notify::parse_registration("r", R"({"target":)" + target + "}"));
      return "accepted";
    } catch (const ds::Error& e) {
      return e.details().field;
    }
  };
  EXPECT_EQ(refused_field(R"({"type":"mqtt","broker":"mqtt://h","topic":"x/{thing}/{name}/{section}/{type}"})"), "accepted");
  EXPECT_EQ(refused_field(R"({"type":"mqtt","broker":"mqtt://h","topic":"x/{thing}/{bogus}"})"), "target.topic");
  EXPECT_EQ(refused_field(R"({"type":"mqtt","broker":"mqtt://h","topic":"x/{thing"})"), "target.topic");
  EXPECT_EQ(refused_field(R"({"type":"mqtt","broker":"mqtt://h","topic":")" + std::string(65536, 'a') + R"("})"), "target.topic");
  std::string many_things;  // short, but its topics could pass 65,535 bytes
  for (int i = 0; i < 43; ++i) many_things += "{thing}/";
  EXPECT_EQ(refused_field(R"({"type":"mqtt","broker":"mqtt://h","topic":")" + many_things + R"("})"), "target.topic");
  EXPECT_EQ(refused_field(R"({"type":"sns","topicArn":"arn:aws:sns:eu-north-1:1:t","region":"eu-north-1"})"), "accepted");
  EXPECT_EQ(refused_field(R"({"type":"sns","topicArn":"arn:aws:sns:eu-north-1:1:t","region":"../x"})"), "target.region");
  EXPECT_EQ(refused_field(R"({"type":"sqs","queueUrl":"http://h/1/q","region":"EU North"})"), "target.region");
}

TEST(Registration, MatchesTheWholeThingAndNameWithRe2) {
  auto r = notify::parse_registration(
      "r", R"({"match":"My House#.*#main","target":{"type":"webhook","url":"http://h/"}})");
  EXPECT_TRUE(r.matches_shadow("My House#Basement", "main"));
  EXPECT_FALSE(r.matches_shadow("My House#Basement", "mainx"));  // a whole match, not a search
  EXPECT_FALSE(r.matches_shadow("Your My House#x", "main"));
  auto all = notify::parse_registration("r", kWebhook);
  EXPECT_TRUE(all.matches_shadow("anything at all", "n"));
}

TEST(Registration, MatchesChangesAtBelowOrAboveItsPaths) {
  auto r = notify::parse_registration(
      "r", R"({"paths":["/climate/indoor"],"target":{"type":"webhook","url":"http://h/"}})");
  using V = std::vector<std::string>;
  EXPECT_TRUE(r.matches_paths(V{"/climate/indoor"}));
  EXPECT_TRUE(r.matches_paths(V{"/other", "/climate/indoor/temp"}));
  EXPECT_TRUE(r.matches_paths(V{"/climate"}));  // the whole object was replaced
  EXPECT_FALSE(r.matches_paths(V{"/climate/indoorx"}));
  EXPECT_FALSE(r.matches_paths(V{"/climate/outdoor", "/x"}));
  EXPECT_FALSE(r.matches_paths(V{}));
  EXPECT_TRUE(notify::parse_registration("r", kWebhook).matches_paths(V{}));
}

TEST(Registration, SelectsSections) {
  auto reported = notify::parse_registration("r", R"({"sections":"reported","target":{"type":"webhook","url":"http://h/"}})");
  EXPECT_TRUE(reported.selects(ds::Section::reported));
  EXPECT_FALSE(reported.selects(ds::Section::desired));
  auto desired = notify::parse_registration("r", R"({"sections":"desired","target":{"type":"webhook","url":"http://h/"}})");
  EXPECT_FALSE(desired.selects(ds::Section::reported));
  EXPECT_TRUE(desired.selects(ds::Section::desired));
  auto both = notify::parse_registration("r", kWebhook);
  EXPECT_TRUE(both.selects(ds::Section::reported) && both.selects(ds::Section::desired));
}

}  // namespace

namespace {

TEST(Registration, ReadsAFilterAndRefusesOneThatDoesNotParse) {
  const std::string doc =
      R"x({"filter":"and(gt(reported/temp,30),like(thing,\"plant-*\"))","target":{"type":"webhook","url":"http://h/"}})x";
  const notify::Registration r = notify::parse_registration("hot", doc);
  EXPECT_EQ(r.filter, R"x(and(gt(reported/temp,30),like(thing,"plant-*")))x");
  const std::string rendered = notify::render_registration(r);
  EXPECT_NE(rendered.find(R"x("filter":"and(gt(reported/temp,30),like(thing,\"plant-*\"))")x"), std::string::npos);
  EXPECT_EQ(notify::render_registration(notify::parse_registration("hot", rendered)), rendered);
  // Without one, none is rendered.
  EXPECT_EQ(notify::render_registration(notify::parse_registration("x", kWebhook)).find("filter"), std::string::npos);

  try {
    notify::parse_registration("bad", R"x({"filter":"gt(reported/temp)","target":{"type":"webhook","url":"http://h/"}})x");
    ADD_FAILURE() << "accepted";
  } catch (const ds::Error& e) {
    EXPECT_EQ(e.code(), ds::ErrorCode::invalid_filter);
    EXPECT_EQ(e.details().offset, 16u);
    EXPECT_FALSE(e.details().expected.empty());
  }
  EXPECT_EQ(rejected_field("bad", R"({"filter":7,"target":{"type":"webhook","url":"http://h/"}})"), "filter");
}

ds::ShadowRecord shadow_with(const std::string& reported, std::int64_t ts_ns) {
  ds::ShadowRecord record;
  record.reported.version = 3;
  record.reported.timestamp_ns = ts_ns;
  record.reported.state_json = reported;
  return record;
}

TEST(Registration, AFilterDecidesOnTheShadowAfterTheWriteWithTimeNowTheWritesTime) {
  auto with = [](const std::string& filter) {
    return notify::parse_registration("r", R"({"filter":")" + filter + R"(","target":{"type":"webhook","url":"http://h/"}})");
  };
  const ds::ShadowKey key{"plant-7", "main"};
  const ds::TimestampKeys keys;
  constexpr std::int64_t kHour = 3600'000'000'000;
  constexpr std::int64_t kWrite = 1'700'000'000'000'000'000;
  const ds::ShadowRecord hot = shadow_with(R"({"temp":35})", kWrite);
  const ds::ShadowRecord cool = shadow_with(R"({"temp":20})", kWrite);
  EXPECT_TRUE(with("").matches_filter(key, cool, kWrite, keys));
  EXPECT_TRUE(with("gt(reported/temp,30)").matches_filter(key, hot, kWrite, keys));
  EXPECT_FALSE(with("gt(reported/temp,30)").matches_filter(key, cool, kWrite, keys));
  EXPECT_FALSE(with("exists(desired/fw)").matches_filter(key, hot, kWrite, keys));
  EXPECT_TRUE(with("eq(_reportedVersion,3)").matches_filter(key, hot, kWrite, keys));
  // time:now is when the write was stored, not when the filter was parsed or evaluated.
  const notify::Registration recent = with("ge(_modified,time:now-PT1H)");
  EXPECT_TRUE(recent.matches_filter(key, hot, kWrite + kHour, keys));
  EXPECT_FALSE(recent.matches_filter(key, hot, kWrite + 2 * kHour, keys));
}

}  // namespace
