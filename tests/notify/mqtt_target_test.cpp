// The MQTT target against a Mosquitto broker (scripts/with-services.sh starts one and sets
// DS_MQTT_URL), read back by a libmosquitto subscriber.
#include "notify/target.hpp"
#include "support/scripted_broker.hpp"
#include "support/targets.hpp"

#include <gtest/gtest.h>
#include <mosquitto.h>

#include <chrono>
#include <cstdlib>
#include <mutex>
#include <thread>

namespace notify = deviceshadow::notify;
using Outcome = notify::DeliveryResult::Outcome;

namespace {

std::string broker_url() {
  const char* url = std::getenv("DS_MQTT_URL");
  return url ? url : "";
}

#define REQUIRE_BROKER()                                                                               \
  do {                                                                                                 \
    if (broker_url().empty()) {                                                                        \
      if (std::getenv("DS_REQUIRE_MQTT")) FAIL() << "DS_REQUIRE_MQTT is set without DS_MQTT_URL";     \
      GTEST_SKIP() << "no MQTT broker (scripts/with-services.sh starts one)";                        \
    }                                                                                                  \
  } while (0)

// Subscribes to `filter` and records (topic, payload) pairs.
class Subscriber {
 public:
  explicit Subscriber(const std::string& filter) {
    mosquitto_lib_init();
    mosq_ = mosquitto_new(nullptr, true, this);
    mosquitto_message_callback_set(mosq_, [](mosquitto*, void* self, const mosquitto_message* m) {
      auto* s = static_cast<Subscriber*>(self);
      std::lock_guard lock(s->mutex_);
      s->messages_.emplace_back(m->topic, std::string(static_cast<const char*>(m->payload), m->payloadlen));
    });
    mosquitto_subscribe_callback_set(mosq_, [](mosquitto*, void* self, int, int, const int*) {
      auto* s = static_cast<Subscriber*>(self);
      std::lock_guard lock(s->mutex_);
      s->subscribed_ = true;
    });
    const std::string url = broker_url();
    const std::size_t colon = url.rfind(':');
    EXPECT_EQ(mosquitto_connect(mosq_, "127.0.0.1", std::atoi(url.c_str() + colon + 1), 30), MOSQ_ERR_SUCCESS);
    EXPECT_EQ(mosquitto_subscribe(mosq_, nullptr, filter.c_str(), 1), MOSQ_ERR_SUCCESS);
    mosquitto_loop_start(mosq_);
    wait_for([&] { return subscribed_; });
  }
  ~Subscriber() {
    mosquitto_disconnect(mosq_);
    mosquitto_loop_stop(mosq_, false);
    mosquitto_destroy(mosq_);
  }
  std::vector<std::pair<std::string, std::string>> messages(std::size_t expected) {
    wait_for([&] { return messages_.size() >= expected; });
    std::lock_guard lock(mutex_);
    return messages_;
  }

 private:
  template <typename Done>
  void wait_for(Done done) {
    for (int i = 0; i < 500; ++i) {
      {
        std::lock_guard lock(mutex_);
        if (done()) return;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }
  mosquitto* mosq_ = nullptr;
  std::mutex mutex_;
  std::vector<std::pair<std::string, std::string>> messages_;
  bool subscribed_ = false;
};

constexpr std::string_view kReported = R"({"data":{"reported":{"version":1}}})";
constexpr std::string_view kBoth = R"({"data":{"reported":{"version":2},"desired":{"version":1}}})";

TEST(MqttTarget, PublishesToTheTopicTemplateWithNamesPercentEncoded) {
  REQUIRE_BROKER();
  Subscriber subscriber("unit/#");
  for (int qos : {0, 1}) {
    notify::MqttTarget config{broker_url(), "unit/" + std::to_string(qos) + "/{thing}/{name}/{section}/{type}", qos};
    auto target = notify::make_mqtt_target(config);
    EXPECT_EQ(notify::deliver_now(*target, {"e1", "deviceshadow.shadow.updated", "a/b+c#d%e", "main", kReported}).outcome,
              Outcome::delivered);
    EXPECT_EQ(notify::deliver_now(*target, {"e2", "deviceshadow.shadow.deleted", "t", "aux", kBoth}).outcome,
              Outcome::delivered);
  }
  auto messages = subscriber.messages(4);
  ASSERT_EQ(messages.size(), 4u);
  EXPECT_EQ(messages[0].first, "unit/0/a%2Fb%2Bc%23d%25e/main/reported/updated");
  EXPECT_EQ(messages[0].second, kReported);
  EXPECT_EQ(messages[1].first, "unit/0/t/aux/both/deleted");
  EXPECT_EQ(messages[1].second, kBoth);
  EXPECT_EQ(messages[2].first, "unit/1/a%2Fb%2Bc%23d%25e/main/reported/updated");
  EXPECT_EQ(messages[3].first, "unit/1/t/aux/both/deleted");
}

TEST(MqttTarget, ManyDeliveriesInFlightEachReportedOnce) {
  REQUIRE_BROKER();
  Subscriber subscriber("many/#");
  auto first = notify::make_mqtt_target({broker_url(), "many/{thing}", 1});
  auto second = notify::make_mqtt_target({broker_url(), "many/{thing}", 1});  // shares the connection
  constexpr int kCount = 200;
  std::vector<std::string> things;
  for (int i = 0; i < kCount; ++i) things.push_back("t" + std::to_string(i));
  std::vector<int> outcomes(kCount, 0);
  for (int i = 0; i < kCount; ++i) {
    (i % 2 ? *second : *first).start(i, {things[i], "deviceshadow.shadow.updated", things[i], "main", kReported});
  }
  int reported = 0;
  for (int round = 0; round < 200 && reported < kCount; ++round) {
    for (notify::Target* t : {first.get(), second.get()}) {
      t->run(std::chrono::milliseconds(20), [&](std::uint64_t tag, notify::DeliveryResult r) {
        EXPECT_EQ(r.outcome, Outcome::delivered) << r.error;
        ++outcomes.at(tag);
        ++reported;
      });
    }
  }
  EXPECT_EQ(reported, kCount);
  for (int n : outcomes) EXPECT_EQ(n, 1);
  EXPECT_EQ(subscriber.messages(kCount).size(), static_cast<std::size_t>(kCount));
}

// A broker that stops acknowledging (a scripted one: a real broker cannot be held to that while
// it stays connected) makes the connection hold at most 64 MiB of messages: past that a delivery
// is retried, not queued; once the broker acknowledges again, deliveries go through.
TEST(MqttTarget, ABrokerThatStopsAcknowledgingIsHandedABoundedBacklog) {
  ScriptedBroker broker;
  auto target = notify::make_mqtt_target({broker.url(), "held/{thing}", 1});
  const std::string body(std::size_t{1} << 20, 'x');
  std::string refused;
  int started = 0;
  for (; started < 100 && refused.empty(); ++started) {
    target->start(started, {"e", "deviceshadow.shadow.updated", "t", "main", body});
    target->run(std::chrono::milliseconds(0), [&](std::uint64_t, notify::DeliveryResult r) {
      ASSERT_EQ(r.outcome, Outcome::retry);
      refused = r.error;
    });
  }
  EXPECT_NE(refused.find("has not acknowledged"), std::string::npos) << refused;
  EXPECT_GE(started, 60);
  EXPECT_LE(started, 66);
  broker.allow_acks(1000);
  EXPECT_EQ(notify::deliver_now(*target, {"e", "deviceshadow.shadow.updated", "t", "main", "{}"}).outcome,
            Outcome::delivered);
}

TEST(MqttTarget, AnUnreachableBrokerIsRetried) {
  auto target = notify::make_mqtt_target({"mqtt://127.0.0.1:9", "x/{thing}", 1});
  auto r = notify::deliver_now(*target, {"e1", "deviceshadow.shadow.updated", "t", "main", kReported});
  EXPECT_EQ(r.outcome, Outcome::retry);
  EXPECT_NE(r.error.find("mqtt:"), std::string::npos) << r.error;
}

TEST(MqttTarget, WakeEndsAWaitingRun) {
  auto target = notify::make_mqtt_target({"mqtt://127.0.0.1:9", "x", 1});
  expect_wake_ends_a_waiting_run(*target);
}

}  // namespace
