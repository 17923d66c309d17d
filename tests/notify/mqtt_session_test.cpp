// MqttSession's count of unsent bytes (notify/mqtt_session.hpp) against a scripted broker on
// loopback that acknowledges publishes only when the test lets it: a QoS 1 message counts from
// publish() to its PUBACK, also one published while the connection is down (libmosquitto sends
// it after reconnecting), and message ids that repeat after 65,535 are told apart.
#include "notify/mqtt_session.hpp"
#include "support/scripted_broker.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <optional>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

namespace {

namespace notify = deviceshadow::notify;
using Clock = std::chrono::steady_clock;

// Polls `done` until it holds, at most 30 s (a bound on liveness, not a timing check).
template <typename Done>
bool eventually(Done done) {
  for (const auto deadline = Clock::now() + std::chrono::seconds(30); Clock::now() < deadline;) {
    if (done()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return done();
}

notify::MqttSessionOptions session_options(const ScriptedBroker& broker, std::size_t max_unsent_bytes) {
  notify::MqttSessionOptions o;
  o.broker = broker.url();
  o.max_unsent_bytes = max_unsent_bytes;
  return o;
}

const std::string kTopic = "unsent/test";

std::size_t cost(const std::string& payload) { return notify::MqttSession::unsent_cost(kTopic.size(), payload.size()); }

TEST(MqttSessionUnsentBytes, CountFromPublishToAcknowledgementAndPublishersWaitForRoom) {
  ScriptedBroker broker;
  const std::string payload(100'000, 'x');
  notify::MqttSession session(session_options(broker, 5 * cost(payload)));
  session.start();
  ASSERT_TRUE(session.wait_until_first_connected(std::chrono::seconds(30)));
  EXPECT_EQ(session.unsent_bytes(), 0u);
  EXPECT_TRUE(session.wait_for_room(cost(payload), Clock::now()));

  std::string error;
  for (int i = 0; i < 5; ++i) {
    ASSERT_TRUE(session.wait_for_room(cost(payload), Clock::now())) << i;
    ASSERT_TRUE(session.publish(kTopic, payload, 1, error)) << error;
  }
  EXPECT_EQ(session.unsent_bytes(), 5 * cost(payload));
  EXPECT_FALSE(session.wait_for_room(1, Clock::now()));  // full: no wait past a deadline already gone
  EXPECT_FALSE(session.wait_for_room(1, Clock::now() + std::chrono::milliseconds(50)));
  ASSERT_TRUE(eventually([&] { return broker.payloads().size() == 5; }));  // sent, not acknowledged
  EXPECT_EQ(session.unsent_bytes(), 5 * cost(payload));

  // A publisher waiting for room goes on once the broker acknowledges one message.
  bool fit = false;
  std::thread waiter([&] { fit = session.wait_for_room(cost(payload), Clock::now() + std::chrono::seconds(30)); });
  broker.allow_acks(1);
  waiter.join();
  EXPECT_TRUE(fit);
  EXPECT_EQ(session.unsent_bytes(), 4 * cost(payload));

  // QoS 0 is not counted.
  ASSERT_TRUE(session.publish(kTopic, "qos 0", 0, error)) << error;
  EXPECT_EQ(session.unsent_bytes(), 4 * cost(payload));

  broker.allow_acks(5);
  EXPECT_TRUE(eventually([&] { return session.unsent_bytes() == 0; }));
}

TEST(MqttSessionUnsentBytes, WithoutALimitOrWithNothingUnsentEverythingFits) {
  ScriptedBroker broker;
  notify::MqttSession unlimited(session_options(broker, 0));
  EXPECT_TRUE(unlimited.wait_for_room(std::size_t{1} << 40, Clock::now()));
  notify::MqttSession small(session_options(broker, 10));
  EXPECT_TRUE(small.wait_for_room(1000, Clock::now()));  // a message larger than the limit goes alone
}

// One unacknowledged when the connection drops is sent again after the reconnect and counts until
// acknowledged; one published while the connection is down is refused and never sent (the caller
// publishes it again: libmosquitto keeping it too made a copy per try, sent after the reconnect),
// unless the caller asks for it to be kept.
TEST(MqttSessionUnsentBytes, AMessageInFlightIsSentAgainAfterTheReconnectOnePublishedWhileAwayIsRefusedOrKept) {
  ScriptedBroker broker;
  notify::MqttSession session(session_options(broker, 1 << 20));
  session.start();
  ASSERT_TRUE(session.wait_until_first_connected(std::chrono::seconds(30)));
  std::string error;
  ASSERT_TRUE(session.publish(kTopic, "in flight", 1, error)) << error;
  ASSERT_TRUE(eventually([&] { return broker.payloads().size() == 1; }));  // sent, not acknowledged
  broker.drop_connection();
  ASSERT_TRUE(eventually([&] { return !session.connected(); }));
  for (int i = 0; i < 3; ++i) {
    EXPECT_FALSE(session.publish(kTopic, "while away", 1, error));
    EXPECT_NE(error.find("not connected"), std::string::npos) << error;
  }
  EXPECT_EQ(session.unsent_bytes(), cost("in flight"));
  // A caller that does not try again has it kept (WhileDown::keep).
  ASSERT_TRUE(session.publish(kTopic, "kept", 1, error, notify::MqttSession::WhileDown::keep)) << error;
  EXPECT_EQ(session.unsent_bytes(), cost("in flight") + cost("kept"));
  // libmosquitto reconnects after 1 s and sends the message in flight again and the one kept;
  // their acknowledgements end the count.
  broker.allow_acks(1'000);
  ASSERT_TRUE(eventually([&] { return session.unsent_bytes() == 0; }));
  EXPECT_EQ(broker.connects(), 2u);
  EXPECT_EQ(broker.payloads(), (std::vector<std::string>{"in flight", "in flight", "kept"}));
  ASSERT_TRUE(session.publish(kTopic, "back", 1, error)) << error;
  ASSERT_TRUE(eventually([&] { return broker.payloads().size() == 4; }));
  EXPECT_EQ(broker.payloads().back(), "back");
}

TEST(MqttSessionUnsentBytes, MessageIdsThatRepeatAreAcknowledgedOldestFirst) {
  ScriptedBroker broker;
  notify::MqttSession session(session_options(broker, 0));
  session.start();
  ASSERT_TRUE(session.wait_until_first_connected(std::chrono::seconds(30)));
  // The first message and the 65,536th get the same id (ids run from 1 to 65,535); they differ
  // in size, so the count tells which one an acknowledgement took.
  const std::string first(1000, 'f');
  std::string error;
  const std::optional<int> first_id = session.publish(kTopic, first, 1, error);
  ASSERT_TRUE(first_id) << error;
  std::size_t total = cost(first);
  std::optional<int> last_id;
  for (int i = 1; i <= 65'535; ++i) {
    last_id = session.publish(kTopic, "m", 1, error);
    ASSERT_TRUE(last_id) << error;
    total += cost("m");
  }
  ASSERT_EQ(*last_id, *first_id);
  EXPECT_EQ(session.unsent_bytes(), total);
  broker.allow_acks(1);  // the first message's id: the big one goes
  ASSERT_TRUE(eventually([&] { return session.unsent_bytes() != total; }));
  EXPECT_EQ(session.unsent_bytes(), total - cost(first));
  broker.allow_acks(65'536);
  EXPECT_TRUE(eventually([&] { return session.unsent_bytes() == 0; }));
  EXPECT_EQ(broker.acknowledged(), 65'536u);
}

}  // namespace
