// MqttSession's count of unsent bytes (notify/mqtt_session.hpp) against a scripted broker on
// loopback that acknowledges publishes only when the test lets it: a QoS 1 message counts from
// publish() to its PUBACK, also one published while the connection is down (libmosquitto sends
// it after reconnecting), and message ids that repeat after 65,535 are told apart.
#include "notify/mqtt_session.hpp"

#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <optional>
#include <cstdint>
#include <mutex>
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

// An MQTT 3.1.1 broker for one client at a time: it answers CONNECT and PINGREQ, records each
// PUBLISH and acknowledges QoS 1 ones, in order, as far as allow_acks() lets it.
// drop_connection() closes the current connection; the next one is accepted.
class ScriptedBroker {
 public:
  ScriptedBroker() {
    listener_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t length = sizeof address;
    if (::bind(listener_, reinterpret_cast<sockaddr*>(&address), length) != 0 || ::listen(listener_, 4) != 0 ||
        ::getsockname(listener_, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
      ADD_FAILURE() << "cannot listen on loopback";
    }
    port_ = ntohs(address.sin_port);
    thread_ = std::thread([this] { serve(); });
  }
  ~ScriptedBroker() {
    {
      std::lock_guard lock(mutex_);
      stopping_ = true;
    }
    ::shutdown(listener_, SHUT_RDWR);
    drop_connection();
    thread_.join();
    ::close(listener_);
  }

  std::string url() const { return "mqtt://127.0.0.1:" + std::to_string(port_); }
  // Lets the broker acknowledge publishes until `n` have been acknowledged in all.
  void allow_acks(std::size_t n) {
    std::lock_guard lock(mutex_);
    acks_allowed_ = n;
  }
  void drop_connection() {
    std::lock_guard lock(mutex_);
    if (connection_ >= 0) ::shutdown(connection_, SHUT_RDWR);
  }
  std::size_t connects() {
    std::lock_guard lock(mutex_);
    return connects_;
  }
  std::vector<std::string> payloads() {
    std::lock_guard lock(mutex_);
    return payloads_;
  }
  std::size_t acknowledged() {
    std::lock_guard lock(mutex_);
    return acked_;
  }

 private:
  void serve() {
    for (;;) {
      const int c = ::accept(listener_, nullptr, nullptr);
      if (c < 0) return;
      {
        std::lock_guard lock(mutex_);
        if (stopping_) {
          ::close(c);
          return;
        }
        connection_ = c;
      }
      converse(c);
      std::lock_guard lock(mutex_);
      connection_ = -1;
      ::close(c);
      pending_acks_.clear();  // a client sends again what it has not seen acknowledged
    }
  }

  // One connection, until it ends: reads packets, answers them and sends the acks allowed.
  void converse(int c) {
    timeval tick{0, 10'000};
    ::setsockopt(c, SOL_SOCKET, SO_RCVTIMEO, &tick, sizeof tick);
    std::string in;
    for (;;) {
      send_allowed_acks(c);
      char buffer[65536];
      const ssize_t n = ::recv(c, buffer, sizeof buffer, 0);
      if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) return;
      if (n > 0) in.append(buffer, static_cast<std::size_t>(n));
      for (std::size_t header = 0, whole; (whole = whole_packet(in, header)) > 0;) {
        const auto type = static_cast<unsigned char>(in[0]);
        const std::string body = in.substr(header, whole - header);
        in.erase(0, whole);
        if ((type >> 4) == 1) {  // CONNECT → CONNACK, accepted
          send(c, std::string("\x20\x02\x00\x00", 4));
          std::lock_guard lock(mutex_);
          ++connects_;
        } else if ((type >> 4) == 3) {  // PUBLISH
          const int qos = (type >> 1) & 3;
          const std::size_t topic_length = (static_cast<unsigned char>(body[0]) << 8) | static_cast<unsigned char>(body[1]);
          const std::size_t id_at = 2 + topic_length;
          std::lock_guard lock(mutex_);
          payloads_.push_back(body.substr(id_at + (qos > 0 ? 2 : 0)));
          if (qos > 0) pending_acks_.push_back(body.substr(id_at, 2));
        } else if ((type >> 4) == 12) {  // PINGREQ → PINGRESP
          send(c, std::string("\xd0\x00", 2));
        } else if ((type >> 4) == 14) {  // DISCONNECT
          return;
        }
      }
    }
  }

  // The size of the packet in front of `in`, fixed header included (`header` set to its size),
  // or 0 while it is not all there.
  static std::size_t whole_packet(const std::string& in, std::size_t& header) {
    std::size_t length = 0;
    for (std::size_t i = 1; i < in.size() && i <= 4; ++i) {
      const auto byte = static_cast<unsigned char>(in[i]);
      length |= static_cast<std::size_t>(byte & 127) << (7 * (i - 1));
      if (!(byte & 128)) {
        header = i + 1;
        return in.size() >= header + length ? header + length : 0;
      }
    }
    return 0;
  }

  void send_allowed_acks(int c) {
    std::string out;
    {
      std::lock_guard lock(mutex_);
      while (!pending_acks_.empty() && acked_ < acks_allowed_) {
        out += std::string("\x40\x02", 2) + pending_acks_.front();
        pending_acks_.erase(pending_acks_.begin());
        ++acked_;
      }
    }
    if (!out.empty()) send(c, out);
  }

  static void send(int c, const std::string& bytes) {
    for (std::size_t sent = 0; sent < bytes.size();) {
      const ssize_t n = ::send(c, bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL);
      if (n <= 0) return;
      sent += static_cast<std::size_t>(n);
    }
  }

  int listener_ = -1;
  int port_ = 0;
  std::thread thread_;
  std::mutex mutex_;  // guards what follows
  bool stopping_ = false;
  int connection_ = -1;
  std::size_t connects_ = 0;
  std::size_t acks_allowed_ = 0;
  std::size_t acked_ = 0;
  std::vector<std::string> pending_acks_;  // packet ids of publishes read and not acknowledged, in order
  std::vector<std::string> payloads_;
};

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
