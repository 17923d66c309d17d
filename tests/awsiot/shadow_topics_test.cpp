// What the MQTT bridge publishes after writes made elsewhere (ShadowTopics::announce), without a
// broker: the notices come from an engine's write observer on the memory store.
#include "awsiot/mqtt_bridge.hpp"

#include "deviceshadow/json.hpp"
#include "deviceshadow/memory_store.hpp"

#include <gtest/gtest.h>

#include <map>

namespace {

namespace ds = deviceshadow;
namespace awsiot = deviceshadow::awsiot;

class ShadowTopicsTest : public ::testing::Test, private ds::WriteListener {
 protected:
  ShadowTopicsTest() : store_(ds::make_memory_store()), engine_(*store_), topics_(engine_, "main", false) {
    engine_.add_write_listener(*this);
  }
  void on_write(const ds::WriteNotice& w) noexcept override { announced_ = topics_.announce(w); }
  // The last write's announcement, by topic.
  std::map<std::string, ds::json::value> last() const {
    std::map<std::string, ds::json::value> out;
    for (const awsiot::MqttMessage& m : announced_) out[m.topic] = ds::parse_json(m.payload);
    return out;
  }
  ds::UpdateResult write(std::string name, ds::Section section, std::string_view state, std::string token = "") {
    ds::UpdateRequest r;
    r.key = {"lamp", std::move(name)};
    r.section = section;
    r.state = ds::parse_json(state).as_object();
    r.client_token = std::move(token);
    return engine_.update(r);
  }

  std::unique_ptr<ds::StoreBackend> store_;
  ds::Engine engine_;
  awsiot::ShadowTopics topics_;
  std::vector<awsiot::MqttMessage> announced_;
};

TEST_F(ShadowTopicsTest, ADesiredValueIsAcceptedWithItsDeltaAndDocuments) {
  write("main", ds::Section::desired, R"({"color":"red"})", "app-1");
  auto m = last();
  ASSERT_EQ(m.size(), 3u);
  const ds::json::value& accepted = m.at("$aws/things/lamp/shadow/update/accepted");
  EXPECT_EQ(ds::to_json(accepted.at("state")), R"({"desired":{"color":"red"}})");
  EXPECT_EQ(accepted.at("version").as_int64(), 1);
  EXPECT_EQ(accepted.at("clientToken").as_string(), "app-1");
  EXPECT_TRUE(accepted.at("metadata").at("desired").at("color").at("timestamp").is_int64());
  EXPECT_EQ(ds::to_json(m.at("$aws/things/lamp/shadow/update/delta").at("state")), R"({"color":"red"})");
  const ds::json::value& documents = m.at("$aws/things/lamp/shadow/update/documents");
  EXPECT_FALSE(documents.as_object().contains("previous"));
  EXPECT_EQ(ds::to_json(documents.at("current").at("state")), R"({"desired":{"color":"red"}})");
}

TEST_F(ShadowTopicsTest, AReportOfAnotherLeafAnnouncesNoDelta) {
  write("cfg", ds::Section::desired, R"({"a":1})");
  write("cfg", ds::Section::reported, R"({"b":2})");
  auto m = last();
  EXPECT_EQ(m.size(), 2u);  // accepted and documents, on the named shadow's topics
  EXPECT_EQ(ds::to_json(m.at("$aws/things/lamp/shadow/name/cfg/update/accepted").at("state")), R"({"reported":{"b":2}})");
  EXPECT_EQ(m.at("$aws/things/lamp/shadow/name/cfg/update/documents").at("previous").at("version").as_int64(), 1);
  write("cfg", ds::Section::reported, R"({"a":0})");  // a leaf desired holds: the delta is announced
  EXPECT_EQ(ds::to_json(last().at("$aws/things/lamp/shadow/name/cfg/update/delta").at("state")), R"({"a":1})");
}

TEST_F(ShadowTopicsTest, ASectionChangedOnlyByAcknowledgementIsLeftOutOfTheAcceptedState) {
  write("main", ds::Section::desired, R"({"on":true})");
  write("main", ds::Section::reported, R"({"on":true})");  // acknowledges desired.on: both sections stored
  auto m = last();
  EXPECT_EQ(ds::to_json(m.at("$aws/things/lamp/shadow/update/accepted").at("state")), R"({"reported":{"on":true}})");
  EXPECT_FALSE(m.contains("$aws/things/lamp/shadow/update/delta"));
  EXPECT_EQ(ds::to_json(m.at("$aws/things/lamp/shadow/update/documents").at("current").at("state")),
            R"({"reported":{"on":true}})");
}

TEST_F(ShadowTopicsTest, DeletesAreANullSectionOrDeleteAccepted) {
  write("main", ds::Section::desired, R"({"a":1})");
  write("main", ds::Section::reported, R"({"b":1})");
  engine_.remove({"lamp", "main"}, ds::Section::desired);
  EXPECT_EQ(ds::to_json(last().at("$aws/things/lamp/shadow/update/accepted").at("state")), R"({"desired":null})");
  engine_.remove({"lamp", "main"});
  auto m = last();
  ASSERT_EQ(m.size(), 1u);
  EXPECT_EQ(m.at("$aws/things/lamp/shadow/delete/accepted").at("version").as_int64(), 4);
}

TEST_F(ShadowTopicsTest, NamesArePercentEncodedInTopicLevels) {
  ds::UpdateRequest r;
  r.key = {"a/b+c#d%", "cfg"};
  r.state = ds::parse_json(R"({"n":1})").as_object();
  engine_.update(r);
  EXPECT_TRUE(last().contains("$aws/things/a%2Fb%2Bc%23d%25/shadow/name/cfg/update/accepted"));
}

}  // namespace
