// Events: which registrations a stored write reaches, the CloudEvent they get, the signature.
// The feed entries come from the engine itself, on a memory store with the change feed on.
#include "deviceshadow/engine.hpp"
#include "deviceshadow/json.hpp"
#include "deviceshadow/memory_store.hpp"
#include "notify/event.hpp"

#include <gtest/gtest.h>

namespace ds = deviceshadow;
namespace notify = deviceshadow::notify;
namespace json = boost::json;

namespace {

class Events : public ::testing::Test {
 protected:
  void SetUp() override {
    ds::EngineOptions options;
    options.clock = [] { return std::int64_t{1'700'000'000'000'000'000}; };
    engine_ = std::make_unique<ds::Engine>(*store_, options);
    engine_->set_change_feed(true);
  }
  void write(const std::string& thing, ds::Section section, const std::string& state, std::string token = "") {
    ds::UpdateRequest r;
    r.key = {thing, "main"};
    r.section = section;
    r.state = ds::parse_json(state).as_object();
    r.client_token = std::move(token);
    engine_->update(r);
  }
  // The entries written since the last call.
  std::vector<std::string> entries() {
    std::vector<std::string> out;
    for (const ds::FeedEntry& e : store_->read_feed(seen_, 100)) {
      out.push_back(e.json);
      seen_ = e.seq;
    }
    return out;
  }
  static notify::Registration registration(const std::string& fields) {
    return notify::parse_registration("reg", "{" + fields + (fields.empty() ? "" : ",") +
                                                 R"("target":{"type":"webhook","url":"http://127.0.0.1:1/"}})");
  }

  std::unique_ptr<ds::Store> store_ = ds::make_memory_store();
  std::unique_ptr<ds::Engine> engine_;
  std::uint64_t seen_ = 0;
};

TEST_F(Events, AReportBecomesACloudEventWithOldNewAndDiff) {
  write("My House#Basement", ds::Section::reported, R"({"temp":21})");
  entries();
  write("My House#Basement", ds::Section::reported, R"({"temp":22,"hum":40})", "c-17");
  const json::value entry = ds::parse_json(entries().at(0));
  const json::value e = ds::parse_json(notify::build_event(registration(""), entry));
  EXPECT_EQ(e.at("specversion"), "1.0");
  EXPECT_EQ(e.at("source"), "deviceshadow");
  EXPECT_EQ(e.at("type"), "deviceshadow.shadow.updated");
  EXPECT_EQ(e.at("subject"), "My House#Basement#main");
  EXPECT_EQ(e.at("datacontenttype"), "application/json");
  EXPECT_EQ(e.at("id"), entry.at("event").at("id"));
  EXPECT_EQ(e.at("time"), entry.at("event").at("timestamp"));
  const json::value& data = e.at("data");
  EXPECT_EQ(data.at("thing"), "My House#Basement");
  EXPECT_EQ(data.at("op"), "report");
  EXPECT_EQ(data.at("clientToken"), "c-17");
  EXPECT_EQ(data.at("registration"), "reg");
  EXPECT_EQ(ds::to_json(data.at("reported")),
            R"({"version":2,"old":{"temp":21},"new":{"temp":22,"hum":40},)"
            R"("diff":[{"op":"update","path":"/temp","old":21,"new":22},{"op":"add","path":"/hum","new":40}]})");
  EXPECT_FALSE(data.as_object().contains("desired"));
  EXPECT_FALSE(data.as_object().contains("truncated"));
}

TEST_F(Events, IncludeAndSectionsShapeTheData) {
  write("t", ds::Section::desired, R"({"sp":22})");
  entries();
  write("t", ds::Section::reported, R"({"sp":22})");  // acknowledges: both sections change
  const json::value entry = ds::parse_json(entries().at(0));
  const json::value diff_only = ds::parse_json(notify::build_event(registration(R"("include":["diff"])"), entry));
  EXPECT_EQ(ds::to_json(diff_only.at("data").at("desired")),
            R"({"version":2,"diff":[{"op":"remove","path":"/sp","old":22}]})");
  EXPECT_EQ(ds::to_json(diff_only.at("data").at("acknowledged")), R"([{"path":"/sp","value":22}])");
  const json::value reported_only =
      ds::parse_json(notify::build_event(registration(R"("sections":"reported","include":["new"])"), entry));
  EXPECT_EQ(ds::to_json(reported_only.at("data").at("reported")), R"({"version":1,"new":{"sp":22}})");
  EXPECT_FALSE(reported_only.at("data").as_object().contains("desired"));
  EXPECT_FALSE(reported_only.at("data").as_object().contains("acknowledged"));
}

TEST_F(Events, ADeleteIsADeletedEvent) {
  write("t", ds::Section::reported, R"({"a":1})");
  entries();
  engine_->remove({"t", "main"});
  const json::value e = ds::parse_json(notify::build_event(registration(""), ds::parse_json(entries().at(0))));
  EXPECT_EQ(e.at("type"), "deviceshadow.shadow.deleted");
  EXPECT_EQ(e.at("data").at("op"), "delete");
  EXPECT_EQ(ds::to_json(e.at("data").at("reported").at("new")), "{}");
  EXPECT_EQ(ds::to_json(e.at("data").at("reported").at("old")), R"({"a":1})");
}

TEST_F(Events, ALargeEventIsSentWithoutItsStates) {
  write("t", ds::Section::reported, R"({"big":")" + std::string(5000, 'x') + R"("})");
  const json::value entry = ds::parse_json(entries().at(0));
  const std::string full = notify::build_event(registration(""), entry);
  const json::value small = ds::parse_json(notify::build_event(registration(""), entry, 2000));
  EXPECT_GT(full.size(), 5000u);
  EXPECT_EQ(small.at("data").at("truncated"), true);
  EXPECT_FALSE(small.at("data").at("reported").as_object().contains("new"));
  EXPECT_FALSE(small.at("data").at("reported").as_object().contains("old"));
  EXPECT_TRUE(small.at("data").at("reported").as_object().contains("diff"));
  EXPECT_EQ(notify::build_event(registration(""), entry, full.size()), full);
}

TEST_F(Events, RegistrationsGetOnlyTheWritesTheySelect) {
  write("house-1", ds::Section::reported, R"({"climate":{"indoor":20},"light":true})");
  write("house-1", ds::Section::desired, R"({"light":false})");
  write("garage", ds::Section::reported, R"({"door":"open"})");
  const std::vector<std::string> all = entries();
  ASSERT_EQ(all.size(), 3u);
  auto reached = [&](const notify::Registration& r) {
    std::string out;
    for (const std::string& e : all) out += notify::wants(r, notify::read_feed_write(ds::parse_json(e))) ? '1' : '0';
    return out;
  };
  EXPECT_EQ(reached(registration("")), "111");
  EXPECT_EQ(reached(registration(R"("sections":"desired")")), "010");
  EXPECT_EQ(reached(registration(R"("sections":"reported")")), "101");
  EXPECT_EQ(reached(registration(R"("match":"house-.*#main")")), "110");
  EXPECT_EQ(reached(registration(R"("match":"house-")")), "000");  // matched whole, not searched
  EXPECT_EQ(reached(registration(R"("paths":["/climate"])")), "100");
  EXPECT_EQ(reached(registration(R"("paths":["/light"],"sections":"desired")")), "010");
  EXPECT_EQ(reached(registration(R"("enabled":false)")), "000");
}

TEST(WebhookSignature, IsTheHmacOfTimeDotBody) {
  // Checked with Python: hmac.new(b"whsec", b'1700000000.{"a":1}', hashlib.sha256).hexdigest()
  EXPECT_EQ(notify::webhook_signature("whsec", 1700000000, R"({"a":1})"),
            "t=1700000000,v1=8ad37ba156048ae0e0a5533c75cdf26fee88b07f93cb57ee4c80adb053012032");
}

}  // namespace
