#include "notify/mqtt_session.hpp"

#include "deviceshadow/error.hpp"
#include "deviceshadow/uri.hpp"

#include <mosquitto.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <random>
#include <stdexcept>

namespace deviceshadow::notify {
namespace {

constexpr int kKeepAliveSeconds = 30;

MqttSession& self(void* p) { return *static_cast<MqttSession*>(p); }

}  // namespace

MqttSession::MqttSession(MqttSessionOptions options) : options_(std::move(options)) {
  static std::once_flag initialized;
  std::call_once(initialized, [] { mosquitto_lib_init(); });
  std::string client_id = options_.client_id;
  if (client_id.empty()) {
    std::random_device random;
    client_id = "shadowd-" + std::to_string(random()) + std::to_string(random());
  }
  mosq_ = mosquitto_new(client_id.c_str(), options_.clean_session, this);
  if (!mosq_) throw std::runtime_error("mqtt: cannot create a client");
  mosquitto_int_option(mosq_, MOSQ_OPT_PROTOCOL_VERSION, MQTT_PROTOCOL_V311);
  if (options_.no_delay) mosquitto_int_option(mosq_, MOSQ_OPT_TCP_NODELAY, 1);
  if (!options_.username.empty()) {
    mosquitto_username_pw_set(mosq_, options_.username.c_str(),
                              options_.password.empty() ? nullptr : options_.password.c_str());
  }
  mosquitto_reconnect_delay_set(mosq_, 1, 30, true);  // 1 s doubling up to 30 s
  mosquitto_connect_callback_set(mosq_, [](mosquitto*, void* p, int rc) {
    self(p).set_state(rc == 0, rc == 0 ? "" : mosquitto_connack_string(rc));
    if (rc == 0 && self(p).options_.on_connect) self(p).options_.on_connect();
  });
  mosquitto_disconnect_callback_set(mosq_, [](mosquitto*, void* p, int rc) {
    const std::string why = rc == 0 ? "disconnected" : mosquitto_strerror(rc);
    self(p).set_state(false, why);
    if (self(p).options_.on_disconnect) self(p).options_.on_disconnect(why);
  });
  mosquitto_publish_callback_set(mosq_, [](mosquitto*, void* p, int mid) {
    self(p).acknowledged(mid);
    if (self(p).options_.on_published) self(p).options_.on_published(mid);
  });
  mosquitto_message_callback_set(mosq_, [](mosquitto*, void* p, const mosquitto_message* m) {
    if (!self(p).options_.on_message || !m->topic) return;
    self(p).options_.on_message(m->topic, std::string_view(static_cast<const char*>(m->payload),
                                                           m->payload ? static_cast<std::size_t>(m->payloadlen) : 0));
  });
}

void MqttSession::start() {
  MqttBroker broker;
  try {
    broker = parse_mqtt_broker(options_.broker);
  } catch (const std::invalid_argument& e) {  // refused before it was stored; kept for safety
    set_state(false, e.what());
    return;
  }
  // libmosquitto (2.0) runs a connection once a first connect has begun: its network thread then
  // connects, and reconnects whenever the link drops. A network thread started after a connect
  // that failed at once (a broker not up yet, a name that does not resolve yet) never tries
  // again, so it starts only once a connect has begun: now, or in the connector thread, which
  // tries again 1 s doubling up to 30 s (before the network thread runs: never beside it).
  if (begin_connect(broker)) {
    if (const std::string error = start_network_thread(); !error.empty()) throw std::runtime_error(error);
    return;
  }
  connector_ = std::thread([this, broker] {
    std::unique_lock lock(mutex_);
    for (auto delay = std::chrono::seconds(1);; delay = std::min(2 * delay, std::chrono::seconds(30))) {
      if (stop_cv_.wait_for(lock, delay, [&] { return stopping_; })) return;
      lock.unlock();
      if (begin_connect(broker)) {
        if (std::string error = start_network_thread(); !error.empty()) set_state(false, std::move(error));
        return;
      }
      lock.lock();
    }
  });
}

std::string MqttSession::start_network_thread() {
  const int rc = mosquitto_loop_start(mosq_);
  return rc == MOSQ_ERR_SUCCESS ? std::string() : std::string("mqtt: ") + mosquitto_strerror(rc);
}

bool MqttSession::begin_connect(const MqttBroker& broker) {
  const int rc = mosquitto_connect_async(mosq_, broker.host.c_str(), broker.port, kKeepAliveSeconds);
  if (rc == MOSQ_ERR_SUCCESS) return true;
  set_state(false, rc == MOSQ_ERR_ERRNO ? std::string("cannot connect: ") + std::strerror(errno) : mosquitto_strerror(rc));
  return false;
}

MqttSession::~MqttSession() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  stop_cv_.notify_all();
  if (connector_.joinable()) connector_.join();
  // The network thread ends by itself once disconnecting (not cancelled: it may hold
  // libmosquitto's locks).
  mosquitto_disconnect(mosq_);
  mosquitto_loop_stop(mosq_, false);
  mosquitto_destroy(mosq_);
}

std::optional<int> MqttSession::publish(const std::string& topic, std::string_view payload, int qos, std::string& error,
                                       WhileDown while_down) {
  // libmosquitto would keep a QoS 1 or 2 message published while the connection is down and send
  // it after the reconnect, besides the copy a caller that tries again publishes: refuse it then.
  if ((qos == 0 || while_down == WhileDown::refuse) && !connected()) {
    error = std::string(mosquitto_strerror(MOSQ_ERR_NO_CONN)) + " (" + state() + ")";
    return std::nullopt;
  }
  int mid = 0;
  int rc = 0;
  if (qos == 0) {
    rc = mosquitto_publish(mosq_, &mid, topic.c_str(), static_cast<int>(payload.size()), payload.data(), qos, false);
  } else {
    const std::size_t cost = unsent_cost(topic.size(), payload.size());
    std::lock_guard lock(unsent_mutex_);
    rc = mosquitto_publish(mosq_, &mid, topic.c_str(), static_cast<int>(payload.size()), payload.data(), qos, false);
    // libmosquitto (2.0) queues a QoS 1 or 2 message before it tries to send it: one that found
    // no connection (MOSQ_ERR_NO_CONN) stays queued and goes out after the next connect. The
    // errors before the queue (invalid arguments, no memory for the copy) keep nothing.
    if (rc == MOSQ_ERR_SUCCESS || rc == MOSQ_ERR_NO_CONN) {
      std::vector<std::size_t>& costs = unsent_[mid];
      costs.push_back(cost);
      unsent_bytes_ += cost;
    }
  }
  if (rc == MOSQ_ERR_NO_CONN && qos > 0 && while_down == WhileDown::keep) return mid;
  if (rc != MOSQ_ERR_SUCCESS) {
    const std::string now = state();
    error = std::string(mosquitto_strerror(rc)) + (now == "connected" ? "" : " (" + now + ")");
    return std::nullopt;
  }
  return mid;
}

void MqttSession::acknowledged(int mid) {
  std::lock_guard lock(unsent_mutex_);
  const auto it = unsent_.find(mid);
  if (it == unsent_.end()) return;  // QoS 0, or a publish that failed before it was queued
  unsent_bytes_ -= it->second.front();
  it->second.erase(it->second.begin());
  if (it->second.empty()) unsent_.erase(it);
  if (room_waiters_ > 0) room_cv_.notify_all();
}

std::size_t MqttSession::unsent_bytes() {
  std::lock_guard lock(unsent_mutex_);
  return unsent_bytes_;
}

bool MqttSession::wait_for_room(std::size_t bytes, std::chrono::steady_clock::time_point deadline) {
  if (options_.max_unsent_bytes == 0) return true;
  std::unique_lock lock(unsent_mutex_);
  const std::size_t limit = options_.max_unsent_bytes;
  auto fits = [&] { return unsent_bytes_ == 0 || (unsent_bytes_ <= limit && bytes <= limit - unsent_bytes_); };
  if (fits()) return true;
  ++room_waiters_;
  const bool fit = room_cv_.wait_until(lock, deadline, fits);
  --room_waiters_;
  return fit;
}

std::string MqttSession::subscribe(const std::string& filter, int qos) {
  const int rc = mosquitto_subscribe(mosq_, nullptr, filter.c_str(), qos);
  return rc == MOSQ_ERR_SUCCESS ? std::string() : std::string(mosquitto_strerror(rc));
}

bool MqttSession::wait_until_first_connected(std::chrono::steady_clock::duration limit) {
  std::unique_lock lock(mutex_);
  return connected_cv_.wait_until(lock, created_ + limit, [&] { return connected_; });
}

bool MqttSession::connected() {
  std::lock_guard lock(mutex_);
  return connected_;
}

std::string MqttSession::state() {
  std::lock_guard lock(mutex_);
  return connected_ ? "connected" : "not connected" + (last_error_.empty() ? "" : " (" + last_error_ + ")");
}

std::uint64_t MqttSession::connects() {
  std::lock_guard lock(mutex_);
  return connects_;
}

void MqttSession::set_state(bool connected, std::string error) {
  std::lock_guard lock(mutex_);
  connected_ = connected;
  if (connected) ++connects_;
  if (!connected) last_error_ = std::move(error);
  connected_cv_.notify_all();
}

MqttBroker parse_mqtt_broker(std::string_view url) {
  if (!url.starts_with("mqtt://")) throw std::invalid_argument("expected mqtt://HOST[:PORT], not '" + std::string(url) + "'");
  std::string_view rest = url.substr(7);
  rest = rest.substr(0, rest.find_first_of("/?#"));
  if (std::size_t at = rest.rfind('@'); at != std::string_view::npos) rest.remove_prefix(at + 1);
  std::string_view host = rest;
  std::optional<std::string_view> port;
  if (!rest.empty() && rest.front() == '[') {  // [v6 address]:port
    const std::size_t close = rest.find(']');
    if (close == std::string_view::npos) throw std::invalid_argument("unclosed '[' in " + std::string(url));
    host = rest.substr(1, close - 1);
    rest.remove_prefix(close + 1);
    if (!rest.empty() && rest.front() != ':') throw std::invalid_argument("expected :PORT after ] in " + std::string(url));
    if (!rest.empty()) port = rest.substr(1);
  } else if (std::size_t colon = rest.rfind(':'); colon != std::string_view::npos) {
    host = rest.substr(0, colon);
    port = rest.substr(colon + 1);
  }
  if (host.empty()) throw std::invalid_argument("no host in " + std::string(url));
  MqttBroker broker{std::string(host), 1883};
  if (port) {
    const std::optional<int> n = parse_port(*port);
    if (!n) throw std::invalid_argument("port '" + std::string(*port) + "' is out of range (1-65535) in " + std::string(url));
    broker.port = *n;
  }
  return broker;
}

void check_plain_mqtt_broker(std::string_view url, std::string_view credentials) {
  parse_mqtt_broker(url);
  const std::string_view rest = url.substr(7);
  const std::size_t path = rest.find_first_of("/?#");
  if (rest.substr(0, path).find('@') != std::string_view::npos) {
    throw std::invalid_argument("a user name or password goes in " + std::string(credentials) + ", not in the URL");
  }
  if (path != std::string_view::npos && rest.substr(path) != "/") {
    throw std::invalid_argument("expected mqtt://HOST[:PORT], without a path: '" + std::string(url) + "'");
  }
}

std::string escape_topic_name(std::string_view name) {
  std::string out;
  append_topic_name(out, name);
  return out;
}

void append_topic_name(std::string& out, std::string_view name) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  for (unsigned char c : name) {
    if (c == '/' || c == '+' || c == '#' || c == '%' || c == '\0') {
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 15];
    } else {
      out += static_cast<char>(c);
    }
  }
}

std::string unescape_topic_name(std::string_view level) {
  try {
    return percent_decode(level, false);
  } catch (const Error&) {
    throw Error::invalid_name("topic", "malformed percent-encoding in the topic level '" + std::string(level) + "'");
  }
}

}  // namespace deviceshadow::notify
