// The MQTT target (docs/notifications.md): PUBLISH through libmosquitto, one connection per
// broker (and credentials) shared by every registration that uses it, reconnecting with
// backoff. At QoS 1 an event is delivered when the broker's PUBACK arrives, at QoS 0 when it
// is written to the socket; one that gets neither within kAnswerTimeout, or that finds no
// connection (a new one is given kConnectWait to come up), is retried (libmosquitto also resends
// unacknowledged QoS 1 messages after a reconnect: receivers deduplicate by id).
#include "deviceshadow/json.hpp"
#include "notify/target.hpp"

#include <mosquitto.h>

#include <atomic>
#include <condition_variable>
#include <map>
#include <mutex>
#include <random>
#include <unordered_map>

namespace deviceshadow::notify {
namespace {

using Outcome = DeliveryResult::Outcome;
using Clock = std::chrono::steady_clock;

constexpr auto kAnswerTimeout = std::chrono::seconds(10);
constexpr int kKeepAliveSeconds = 30;
constexpr auto kConnectWait = std::chrono::seconds(1);  // for a new connection to come up

class Mqtt;

// One client connection to a broker, kept by the targets that share it. The network thread
// of libmosquitto calls back into it; `mutex_` guards the publishes awaiting their answer.
class Connection {
 public:
  Connection(const MqttTarget& target) {
    static std::once_flag initialized;
    std::call_once(initialized, [] { mosquitto_lib_init(); });
    std::random_device random;
    const std::string client_id = "shadowd-" + std::to_string(random()) + std::to_string(random());
    mosq_ = mosquitto_new(client_id.c_str(), true, this);
    if (!mosq_) throw std::runtime_error("mqtt: cannot create a client");
    mosquitto_int_option(mosq_, MOSQ_OPT_PROTOCOL_VERSION, MQTT_PROTOCOL_V311);
    if (!target.username.empty()) {
      mosquitto_username_pw_set(mosq_, target.username.c_str(), target.password.empty() ? nullptr : target.password.c_str());
    }
    mosquitto_reconnect_delay_set(mosq_, 1, 30, true);  // 1 s doubling up to 30 s
    mosquitto_connect_callback_set(mosq_, [](mosquitto*, void* self, int rc) {
      static_cast<Connection*>(self)->set_state(rc == 0, rc == 0 ? "" : mosquitto_connack_string(rc));
    });
    mosquitto_disconnect_callback_set(mosq_, [](mosquitto*, void* self, int rc) {
      static_cast<Connection*>(self)->set_state(false, rc == 0 ? "disconnected" : mosquitto_strerror(rc));
    });
    mosquitto_publish_callback_set(mosq_, [](mosquitto*, void* self, int mid) { static_cast<Connection*>(self)->answered(mid); });
    auto [host, port] = host_and_port(target.broker);
    // Asynchronous: the network thread connects, and reconnects whenever the link drops.
    if (const int rc = mosquitto_connect_async(mosq_, host.c_str(), port, kKeepAliveSeconds); rc != MOSQ_ERR_SUCCESS) {
      set_state(false, rc == MOSQ_ERR_ERRNO ? "cannot connect" : mosquitto_strerror(rc));
    }
    if (const int rc = mosquitto_loop_start(mosq_); rc != MOSQ_ERR_SUCCESS) {
      mosquitto_destroy(mosq_);
      throw std::runtime_error(std::string("mqtt: ") + mosquitto_strerror(rc));
    }
  }

  ~Connection() {
    // The network thread ends by itself once disconnecting (not cancelled: it may hold
    // libmosquitto's locks).
    mosquitto_disconnect(mosq_);
    mosquitto_loop_stop(mosq_, false);
    mosquitto_destroy(mosq_);
  }

  // Publishes; the answer (or a failure to send) reaches `target` with `tag`. Returns the
  // message id, or nullopt with `error` set when it could not be queued.
  std::optional<int> publish(Mqtt* target, std::uint64_t tag, const std::string& topic, std::string_view payload, int qos,
                             std::string& error);
  // Waits until a new connection is up, at most until kConnectWait after it was made (a
  // dropped connection is not waited for: the publish fails and is retried with backoff).
  void wait_until_first_connected() {
    std::unique_lock lock(mutex_);
    connected_cv_.wait_until(lock, created_ + kConnectWait, [&] { return connected_; });
  }
  // Forgets a publish whose answer is no longer awaited.
  void forget(int mid) {
    std::lock_guard lock(mutex_);
    awaiting_.erase(mid);
  }
  std::string state() {
    std::lock_guard lock(mutex_);
    return connected_ ? "connected" : "not connected" + (last_error_.empty() ? "" : " (" + last_error_ + ")");
  }

  // The shared connection for the target's broker and credentials.
  static std::shared_ptr<Connection> to(const MqttTarget& target) {
    static std::mutex mutex;
    static std::map<std::string, std::weak_ptr<Connection>> connections;
    const std::string key = target.broker + '\n' + target.username + '\n' + target.password;
    std::lock_guard lock(mutex);
    std::erase_if(connections, [](const auto& entry) { return entry.second.expired(); });
    if (auto existing = connections[key].lock()) return existing;
    auto made = std::make_shared<Connection>(target);
    connections[key] = made;
    return made;
  }

 private:
  static std::pair<std::string, int> host_and_port(const std::string& broker) {
    std::string_view rest = std::string_view(broker).substr(broker.find("://") + 3);
    rest = rest.substr(0, rest.find_first_of("/?#"));
    if (std::size_t at = rest.rfind('@'); at != std::string_view::npos) rest.remove_prefix(at + 1);
    std::string_view host = rest;
    int port = 1883;
    if (!rest.empty() && rest.front() == '[') {  // [v6 address]:port
      const std::size_t close = rest.find(']');
      host = rest.substr(1, close - 1);
      rest.remove_prefix(close + 1);
      if (!rest.empty() && rest.front() == ':') port = std::atoi(std::string(rest.substr(1)).c_str());
    } else if (std::size_t colon = rest.rfind(':'); colon != std::string_view::npos) {
      host = rest.substr(0, colon);
      port = std::atoi(std::string(rest.substr(colon + 1)).c_str());
    }
    return {std::string(host), port > 0 && port < 65536 ? port : 1883};
  }

  void set_state(bool connected, std::string error) {
    std::lock_guard lock(mutex_);
    connected_ = connected;
    if (!connected) last_error_ = std::move(error);
    connected_cv_.notify_all();
  }
  void answered(int mid);

  mosquitto* mosq_ = nullptr;
  std::mutex mutex_;  // guards awaiting_, connected_, last_error_; taken before a target's
  std::unordered_map<int, std::pair<Mqtt*, std::uint64_t>> awaiting_;  // message id → target, tag
  std::condition_variable connected_cv_;
  const Clock::time_point created_ = Clock::now();
  bool connected_ = false;
  std::string last_error_ = "connecting";
};

// "{thing}" etc. of the topic template, with '/', '+', '#', '%' and NUL of the names
// percent-encoded so that a name never adds a topic level or a wildcard.
std::string escape_topic_name(std::string_view name) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : name) {
    if (c == '/' || c == '+' || c == '#' || c == '%' || c == '\0') {
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 15];
    } else {
      out += static_cast<char>(c);
    }
  }
  return out;
}

class Mqtt final : public Target {
 public:
  explicit Mqtt(const MqttTarget& target)
      : target_(target),
        connection_(Connection::to(target)),
        needs_section_(target.topic.find("{section}") != std::string::npos) {}

  ~Mqtt() override {
    std::vector<int> mids;
    {
      std::lock_guard lock(mutex_);
      for (const auto& [tag, flight] : in_flight_) mids.push_back(flight.mid);
      in_flight_.clear();
    }
    for (int mid : mids) connection_->forget(mid);
  }

  void start(std::uint64_t tag, const Delivery& d) override {
    connection_->wait_until_first_connected();
    std::string error;
    {
      std::lock_guard lock(mutex_);
      in_flight_[tag] = {-1, Clock::now() + kAnswerTimeout};
    }
    std::optional<int> mid = connection_->publish(this, tag, topic_for(d), d.body, target_.qos, error);
    std::lock_guard lock(mutex_);
    if (!mid) {
      if (in_flight_.erase(tag)) finished_.emplace_back(tag, DeliveryResult{Outcome::retry, "mqtt: " + error});
    } else if (auto it = in_flight_.find(tag); it != in_flight_.end()) {
      it->second.mid = *mid;
    }
  }

  void run(std::chrono::milliseconds timeout, const Done& done) override {
    std::vector<std::pair<std::uint64_t, DeliveryResult>> finished;
    std::vector<std::pair<std::uint64_t, int>> expired;
    {
      std::unique_lock lock(mutex_);
      auto until = Clock::now() + timeout;
      for (const auto& [tag, flight] : in_flight_) until = std::min(until, flight.deadline);
      cv_.wait_until(lock, until, [&] { return !finished_.empty() || woken_; });
      woken_ = false;
      const auto now = Clock::now();
      for (const auto& [tag, flight] : in_flight_) {
        if (flight.deadline <= now) expired.emplace_back(tag, flight.mid);
      }
    }
    if (!expired.empty()) {
      const std::string why = "mqtt: no answer from the broker in time, " + connection_->state();
      for (const auto& [tag, mid] : expired) {
        connection_->forget(mid);
        finish(tag, {Outcome::retry, why});
      }
    }
    {
      std::lock_guard lock(mutex_);
      finished.swap(finished_);
    }
    for (auto& [tag, result] : finished) done(tag, std::move(result));
  }

  void wake() override {
    std::lock_guard lock(mutex_);
    woken_ = true;
    cv_.notify_all();
  }

  // Reports a publish's outcome once (a second report of the same tag is dropped).
  void finish(std::uint64_t tag, DeliveryResult result) {
    std::lock_guard lock(mutex_);
    if (in_flight_.erase(tag)) {
      finished_.emplace_back(tag, std::move(result));
      cv_.notify_all();
    }
  }

 private:
  struct Flight {
    int mid;
    Clock::time_point deadline;
  };

  std::string topic_for(const Delivery& d) const {
    std::string topic;
    const std::string& t = target_.topic;
    for (std::size_t i = 0; i < t.size();) {
      const std::size_t close = t[i] == '{' ? t.find('}', i) : std::string::npos;
      const std::string_view field = close == std::string::npos ? std::string_view() : std::string_view(t).substr(i + 1, close - i - 1);
      if (field == "thing") {
        topic += escape_topic_name(d.thing);
      } else if (field == "name") {
        topic += escape_topic_name(d.name);
      } else if (field == "type") {
        topic += d.type.substr(d.type.rfind('.') + 1);  // "updated" or "deleted"
      } else if (field == "section" && needs_section_) {
        topic += section_of(d.body);
      } else {
        topic += t[i++];
        continue;
      }
      i = close + 1;
    }
    return topic;
  }

  // "reported", "desired" or "both": the sections the event carries.
  static std::string section_of(std::string_view body) {
    try {
      const json::value event = parse_json(body);
      const json::object& data = event.at("data").as_object();
      const bool reported = data.contains("reported");
      const bool desired = data.contains("desired");
      return reported && desired ? "both" : desired ? "desired" : "reported";
    } catch (const std::exception&) {
      return "both";
    }
  }

  const MqttTarget target_;
  const std::shared_ptr<Connection> connection_;
  const bool needs_section_;  // the template has {section}: each event is parsed for it
  std::mutex mutex_;  // guards what follows
  std::condition_variable cv_;
  std::unordered_map<std::uint64_t, Flight> in_flight_;
  std::vector<std::pair<std::uint64_t, DeliveryResult>> finished_;
  bool woken_ = false;
};

std::optional<int> Connection::publish(Mqtt* target, std::uint64_t tag, const std::string& topic,
                                       std::string_view payload, int qos, std::string& error) {
  // Held across the call so that the answer, which the network thread may receive before
  // mosquitto_publish returns, finds its message id registered.
  std::lock_guard lock(mutex_);
  int mid = 0;
  const int rc = mosquitto_publish(mosq_, &mid, topic.c_str(), static_cast<int>(payload.size()), payload.data(), qos, false);
  if (rc != MOSQ_ERR_SUCCESS) {
    error = std::string(mosquitto_strerror(rc)) + (connected_ ? "" : " (" + last_error_ + ")");
    return std::nullopt;
  }
  awaiting_[mid] = {target, tag};
  return mid;
}

void Connection::answered(int mid) {
  std::lock_guard lock(mutex_);
  auto it = awaiting_.find(mid);
  if (it == awaiting_.end()) return;  // forgotten: its target gave up on it or is gone
  auto [target, tag] = it->second;
  awaiting_.erase(it);
  target->finish(tag, {});
}

}  // namespace

std::unique_ptr<Target> make_mqtt_target(const MqttTarget& target) { return std::make_unique<Mqtt>(target); }

}  // namespace deviceshadow::notify
