// One libmosquitto client connection, shared by the MQTT notification target
// (notify/targets/mqtt.cpp) and the AWS IoT MQTT bridge (awsiot/mqtt_bridge.cpp): MQTT 3.1.1,
// connected and reconnected (1 s doubling up to 30 s) by libmosquitto's network thread, which
// calls the handlers. Also the percent-encoding of names inside topic levels.
//
// Unsent bytes: libmosquitto holds every QoS 1 or 2 message it is handed until the broker
// acknowledges it (also across reconnects, when it sends them again), with no bound of its own:
// a broker that reads slower than messages are published lets them pile up in memory. The
// session counts them (unsent_bytes()) from publish() to their acknowledgement, so that
// publishers can wait for room (wait_for_room()) under a limit of their choosing. QoS 0
// messages are not counted (libmosquitto forgets them once written, or at a disconnect).
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

struct mosquitto;

namespace deviceshadow::notify {

struct MqttBroker;

struct MqttSessionOptions {
  std::string broker;  // mqtt://[user@]HOST[:PORT] (1883 when absent; [v6 address] allowed)
  std::string username;
  std::string password;
  std::string client_id;  // empty: "shadowd-" and a random number
  bool clean_session = true;
  // TCP_NODELAY: each packet goes out at once, for request/response traffic (Nagle's algorithm
  // would hold a small answer until the broker's delayed ACK of the previous one, ~40 ms).
  // Without it, a stream of publishes is coalesced into fewer segments.
  bool no_delay = false;
  // Called on the network thread. on_connect after every successful connect and reconnect
  // (subscribe there, as a clean session forgets subscriptions); on_disconnect with why;
  // on_message for each message received; on_published when a publish is answered (QoS 1) or
  // sent (QoS 0). Handlers must not block long: the connection waits for them.
  std::function<void()> on_connect;
  std::function<void(const std::string& why)> on_disconnect;
  std::function<void(std::string_view topic, std::string_view payload)> on_message;
  std::function<void(int mid)> on_published;
  // The unsent bytes at which wait_for_room() has publishers wait; 0: no limit.
  std::size_t max_unsent_bytes = 0;
};

class MqttSession {
 public:
  // Throws only when no client can be made.
  explicit MqttSession(MqttSessionOptions options);
  // Starts connecting (asynchronously, on the network thread, which calls the handlers from
  // now on; a broker that cannot be reached yet is tried again until it can).
  void start();
  ~MqttSession();
  MqttSession(const MqttSession&) = delete;
  MqttSession& operator=(const MqttSession&) = delete;

  // What publish() does with a QoS 1 or 2 message while the connection is down: refuse it (for
  // a caller that publishes it again once connected) or keep it, to be sent once connected (for
  // one that does not try again). libmosquitto keeps every such message it is given.
  enum class WhileDown { refuse, keep };
  // Queues a message. Returns the message id, or nullopt with `error` set (the error text names
  // the connection's state when it is down). A message kept while the connection is down, or
  // published as it drops (kept even when refused), counts as unsent until acknowledged, as do
  // those sent and not yet acknowledged, which libmosquitto sends again after a reconnect.
  std::optional<int> publish(const std::string& topic, std::string_view payload, int qos, std::string& error,
                             WhileDown while_down = WhileDown::refuse);
  // What a QoS 1 or 2 message counts in unsent_bytes(): its topic, its payload and
  // kUnsentOverhead (libmosquitto's record of it and its allocations).
  static constexpr std::size_t kUnsentOverhead = 128;
  static std::size_t unsent_cost(std::size_t topic_bytes, std::size_t payload_bytes) noexcept {
    return topic_bytes + payload_bytes + kUnsentOverhead;
  }
  // The bytes of the QoS 1 and 2 messages published and not yet acknowledged by the broker.
  std::size_t unsent_bytes();
  // Waits until `bytes` more fit under max_unsent_bytes, at most until `deadline` (a deadline
  // already past: no wait). True when they fit; they always do without a limit, and when nothing
  // is unsent (a message larger than the limit goes alone). Several publishers that are let
  // through at once may together pass the limit by what they publish.
  bool wait_for_room(std::size_t bytes, std::chrono::steady_clock::time_point deadline);
  // Subscribes (call it from on_connect). Returns libmosquitto's error text, empty on success.
  std::string subscribe(const std::string& filter, int qos);

  // Waits until connected, at most `limit` after the session was made.
  bool wait_until_first_connected(std::chrono::steady_clock::duration limit);
  bool connected();
  // "connected", or "not connected (why)".
  std::string state();
  // Successful connects so far (1 after the first, +1 per reconnect).
  std::uint64_t connects();

 private:
  void set_state(bool connected, std::string error);
  // Begins a connect (mosquitto_connect_async); false, with the state saying why, when it fails
  // at once.
  bool begin_connect(const MqttBroker& broker);
  // Starts libmosquitto's network thread; what went wrong, or "".
  std::string start_network_thread();
  void acknowledged(int mid);

  MqttSessionOptions options_;
  mosquitto* mosq_ = nullptr;
  std::mutex mutex_;  // guards what follows
  std::condition_variable connected_cv_;
  const std::chrono::steady_clock::time_point created_ = std::chrono::steady_clock::now();
  bool connected_ = false;
  bool stopping_ = false;
  std::condition_variable stop_cv_;
  std::thread connector_;  // tries a first connect again while one fails at once, then starts the network thread
  std::uint64_t connects_ = 0;
  std::string last_error_ = "connecting";
  // Held across mosquitto_publish, so that an acknowledgement (on the network thread) never
  // comes before its message is counted; guards what follows.
  std::mutex unsent_mutex_;
  std::condition_variable room_cv_;
  std::size_t unsent_bytes_ = 0;
  std::size_t room_waiters_ = 0;
  // The cost of each unacknowledged message by message id, oldest first: ids repeat after 65,535
  // messages, and libmosquitto takes an acknowledged id's oldest message.
  std::unordered_map<int, std::vector<std::size_t>> unsent_;
};

// A broker's address from mqtt://[user@]HOST[:PORT] (1883 when absent; [v6 address] allowed).
// Throws std::invalid_argument saying what is wrong (another scheme, no host, a port that is
// not a number from 1 to 65535).
struct MqttBroker {
  std::string host;
  int port = 1883;
};
MqttBroker parse_mqtt_broker(std::string_view url);
// For a URL a user gives now (not one stored by an earlier version, which parse_mqtt_broker
// reads as it always did): parse_mqtt_broker's checks, and also refuses the parts it would
// drop, a user name or password (`credentials` says where they go instead) and a path.
void check_plain_mqtt_broker(std::string_view url, std::string_view credentials);

// A name as one topic level: '/', '+', '#', '%' and NUL percent-encoded (%2F, %2B, %23, %25,
// %00), so that a name never adds a level or a wildcard. The second form appends it to `out`.
std::string escape_topic_name(std::string_view name);
void append_topic_name(std::string& out, std::string_view name);
// The reverse: every %XX decoded. Throws Error::invalid_name for a malformed escape.
std::string unescape_topic_name(std::string_view level);

}  // namespace deviceshadow::notify
