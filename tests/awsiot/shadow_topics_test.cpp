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

// The clientToken is echoed on a refusal whatever the payload's nesting, as long as it is a
// string member of the object the payload holds.
TEST(ShadowTopicsRequests, ARefusalEchoesTheTokenOfAPayloadOfAnyDepth) {
  const ds::Error too_deep = ds::Error::too_deep("", 32);
  auto token_of_refusal = [&](const std::string& payload) {
    const std::vector<awsiot::MqttMessage> answer = awsiot::ShadowTopics::refuse("$aws/things/t/shadow/update", payload, too_deep);
    EXPECT_EQ(answer.size(), 1u);
    const ds::json::object o = ds::parse_json(answer.at(0).payload).as_object();
    return o.contains("clientToken") ? std::string(o.at("clientToken").as_string()) : std::string("(none)");
  };
  for (std::size_t depth : {1u, 100u, 200000u}) {
    const std::string nested = std::string(depth, '[') + std::string(depth, ']');
    EXPECT_EQ(token_of_refusal(R"({"state":{"a":)" + nested + R"(},"clientToken":"t1"})"), "t1") << depth;
    EXPECT_EQ(token_of_refusal(R"( { "clientToken" : "t\u0032" , "state":)" + nested + "}"), "t2") << depth;
  }
  EXPECT_EQ(token_of_refusal(R"({"state":{"clientToken":"inner"},"x":["clientToken","a"]})"), "(none)");
  EXPECT_EQ(token_of_refusal(R"({"state":"a\"clientToken\":\"no\"","clientToken":"yes"})"), "yes");
  EXPECT_EQ(token_of_refusal(R"({"clientToken":7})"), "(none)");
  EXPECT_EQ(token_of_refusal(R"(["clientToken","x"])"), "(none)");
  EXPECT_EQ(token_of_refusal(R"({"clientToken":"unterminated)"), "(none)");
  EXPECT_EQ(token_of_refusal("not json"), "(none)");
}

class ShadowTopicsServeTest : public ::testing::Test {
 protected:
  ShadowTopicsServeTest() : store_(ds::make_memory_store()), engine_(*store_), topics_(engine_, "main", false) {}
  ds::json::object answer(std::string_view topic, std::string_view payload, std::string_view outcome) {
    const std::vector<awsiot::MqttMessage> out = topics_.serve(topic, payload);
    EXPECT_FALSE(out.empty());
    EXPECT_EQ(out.at(0).topic, std::string(topic) + "/" + std::string(outcome)) << out.at(0).payload;
    return ds::parse_json(out.at(0).payload).as_object();
  }
  std::unique_ptr<ds::StoreBackend> store_;
  ds::Engine engine_;
  awsiot::ShadowTopics topics_;
};

TEST_F(ShadowTopicsServeTest, AnEmptyShadowNameIsRefusedNotTakenForTheClassicShadow) {
  const auto o = answer("$aws/things/t/shadow/name//update", R"({"state":{"reported":{"x":1}},"clientToken":"c"})", "rejected");
  EXPECT_EQ(o.at("code").as_int64(), 400);
  EXPECT_EQ(o.at("clientToken").as_string(), "c");
  EXPECT_THROW(engine_.get({"t", "main"}), ds::Error);
}

TEST_F(ShadowTopicsServeTest, AClientTokenOver64BytesIsRefusedByEveryAction) {
  answer("$aws/things/t/shadow/update", R"({"state":{"reported":{"x":1}}})", "accepted");
  const std::string token(65, 'k');
  for (const char* action : {"get", "delete", "update"}) {
    const std::string payload = std::string(R"({"state":{"reported":{"x":2}},"clientToken":")") + token + "\"}";
    const auto o = answer(std::string("$aws/things/t/shadow/") + action, payload, "rejected");
    EXPECT_EQ(o.at("code").as_int64(), 400) << action;
  }
  EXPECT_EQ(engine_.get({"t", "main"}).record.reported.version, 1u);  // the delete did not happen
  answer("$aws/things/t/shadow/get", R"({"clientToken":")" + std::string(64, 'k') + "\"}", "accepted");
}

}  // namespace
