// One libmosquitto client connection, shared by the MQTT notification target
// (notify/targets/mqtt.cpp) and the AWS IoT MQTT bridge (awsiot/mqtt_bridge.cpp): MQTT 3.1.1,
// connected and reconnected (1 s doubling up to 30 s) by libmosquitto's network thread, which
// calls the handlers. Also the percent-encoding of names inside topic levels.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

struct mosquitto;

namespace deviceshadow::notify {

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
};

class MqttSession {
 public:
  // Throws only when no client can be made.
  explicit MqttSession(MqttSessionOptions options);
  // Starts connecting (asynchronously, on the network thread, which calls the handlers from
  // now on).
  void start();
  ~MqttSession();
  MqttSession(const MqttSession&) = delete;
  MqttSession& operator=(const MqttSession&) = delete;

  // Queues a message. Returns the message id, or nullopt with `error` set (the error text names
  // the connection's state when it is down).
  std::optional<int> publish(const std::string& topic, std::string_view payload, int qos, std::string& error);
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

  MqttSessionOptions options_;
  mosquitto* mosq_ = nullptr;
  std::mutex mutex_;  // guards what follows
  std::condition_variable connected_cv_;
  const std::chrono::steady_clock::time_point created_ = std::chrono::steady_clock::now();
  bool connected_ = false;
  std::uint64_t connects_ = 0;
  std::string last_error_ = "connecting";
};

// A broker's address from mqtt://[user@]HOST[:PORT] (1883 when absent; [v6 address] allowed).
// Throws std::invalid_argument saying what is wrong (another scheme, no host, a port that is
// not a number from 1 to 65535).
struct MqttBroker {
  std::string host;
  int port = 1883;
};
MqttBroker parse_mqtt_broker(std::string_view url);

// A name as one topic level: '/', '+', '#', '%' and NUL percent-encoded (%2F, %2B, %23, %25,
// %00), so that a name never adds a level or a wildcard. The second form appends it to `out`.
std::string escape_topic_name(std::string_view name);
void append_topic_name(std::string& out, std::string_view name);
// The reverse: every %XX decoded. Throws Error::invalid_name for a malformed escape.
std::string unescape_topic_name(std::string_view level);

}  // namespace deviceshadow::notify
