// The MQTT target (docs/notifications.md): PUBLISH through libmosquitto, one connection per
// broker (and credentials) shared by every registration that uses it, reconnecting with
// backoff. At QoS 1 an event is delivered when the broker's PUBACK arrives, at QoS 0 when it
// is written to the socket; one that gets neither within kAnswerTimeout, or that finds no
// connection (a new one is given kConnectWait to come up), is retried (libmosquitto also resends
// unacknowledged QoS 1 messages after a reconnect: receivers deduplicate by id). What a
// connection holds unacknowledged is bounded (kMaxUnsentBytes).
#include "deviceshadow/json.hpp"
#include "notify/mqtt_session.hpp"
#include "notify/target.hpp"

#include <algorithm>
#include <map>
#include <mutex>
#include <vector>

namespace deviceshadow::notify {
namespace {

using Outcome = DeliveryResult::Outcome;
using Clock = std::chrono::steady_clock;

constexpr auto kAnswerTimeout = std::chrono::seconds(10);
constexpr auto kConnectWait = std::chrono::seconds(1);  // for a new connection to come up
// The bytes of QoS 1 messages a connection holds unacknowledged (MqttSession::unsent_bytes),
// past which a publish is retried later instead of queued: libmosquitto keeps each message until
// its PUBACK, a retry after kAnswerTimeout adds a copy, and a broker that stops acknowledging
// would otherwise make them pile up without bound.
constexpr std::size_t kMaxUnsentBytes = std::size_t{64} << 20;

class Mqtt;

// One client connection to a broker, kept by the targets that share it: a MqttSession whose
// answers (on the network thread) find their target here; `mutex_` guards the publishes
// awaiting their answer.
class Connection {
 public:
  explicit Connection(const MqttTarget& target)
      : session_(MqttSessionOptions{.broker = target.broker,
                                    .username = target.username,
                                    .password = target.password,
                                    .on_published = [this](int mid) { answered(mid); },
                                    .max_unsent_bytes = kMaxUnsentBytes}) {
    session_.start();
  }

  // Publishes; the answer (or a failure to send) reaches `target` with `tag`. Returns the
  // message id, or nullopt with `error` set when it could not be queued.
  std::optional<int> publish(Mqtt* target, std::uint64_t tag, const std::string& topic, std::string_view payload, int qos,
                             std::string& error);
  // Waits until a new connection is up, at most until kConnectWait after it was made (a
  // dropped connection is not waited for: the publish fails and is retried with backoff).
  void wait_until_first_connected() { session_.wait_until_first_connected(kConnectWait); }
  // Forgets a publish whose answer is no longer awaited.
  void forget(int mid) {
    std::lock_guard lock(mutex_);
    std::erase_if(awaiting_, [mid](const Awaiting& a) { return a.mid == mid; });
  }
  // Forgets the target's publishes; once it returns, no answer reaches the target (answers are
  // handed over under the lock).
  void forget(const Mqtt* target) {
    std::lock_guard lock(mutex_);
    std::erase_if(awaiting_, [target](const Awaiting& a) { return a.target == target; });
  }
  std::string state() { return session_.state(); }

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
  void answered(int mid);

  struct Awaiting {
    int mid;
    Mqtt* target;
    std::uint64_t tag;
  };
  std::mutex mutex_;  // guards what follows; taken before a target's
  // Publishes awaiting their answer, in the order published (the broker answers in that order):
  // as many as the targets sharing the connection keep in flight, so a vector searched from
  // the front is cheaper than a map.
  std::vector<Awaiting> awaiting_;
  // The lock is not held while libmosquitto publishes (the network thread would wait on it for
  // every answer meanwhile): an answer that comes before its publish has registered its message
  // id is kept in early_ while a publish is under way, and found there by it.
  int publishing_ = 0;      // publishes under way
  std::vector<int> early_;  // message ids answered before they were registered
  MqttSession session_;  // last: its network thread stops before the members above go
};

class Mqtt final : public Target {
 public:
  explicit Mqtt(const MqttTarget& target)
      : target_(target),
        connection_(Connection::to(target)),
        needs_section_(target.topic.find("{section}") != std::string::npos) {}

  ~Mqtt() override { connection_->forget(this); }

  void start(std::uint64_t tag, const Delivery& d) override {
    if (!waited_for_connection_) {  // later calls would not wait: the connection is up, or the wait is over
      connection_->wait_until_first_connected();
      waited_for_connection_ = true;
    }
    std::string error;
    {
      std::lock_guard lock(mutex_);
      in_flight_.push_back({tag, -1, Clock::now() + kAnswerTimeout});
    }
    std::optional<int> mid = connection_->publish(this, tag, topic_for(d), d.body, target_.qos, error);
    std::lock_guard lock(mutex_);
    auto flight = find_flight(tag);
    if (!mid) {
      if (flight != in_flight_.end()) {
        erase_flight(flight);
        finished_.emplace_back(tag, DeliveryResult{Outcome::retry, "mqtt: " + error});
      }
    } else if (flight != in_flight_.end()) {
      flight->mid = *mid;
    }
  }

  void run(std::chrono::milliseconds timeout, const Done& done) override {
    std::vector<std::pair<std::uint64_t, DeliveryResult>> finished;
    std::vector<std::pair<std::uint64_t, int>> expired;
    if (timeout.count() > 0) {
      auto until = Clock::now() + timeout;
      {
        std::lock_guard lock(mutex_);
        for (const Flight& flight : in_flight_) until = std::min(until, flight.deadline);
      }
      ready_.wait(std::chrono::ceil<std::chrono::milliseconds>(until - Clock::now()));
    }
    ready_.drain();
    {
      std::lock_guard lock(mutex_);
      const auto now = Clock::now();
      for (const Flight& flight : in_flight_) {
        if (flight.deadline <= now) expired.emplace_back(flight.tag, flight.mid);
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

  int ready_fd() const override { return ready_.fd(); }

  std::optional<Clock::time_point> next_deadline() const override {
    std::lock_guard lock(mutex_);
    std::optional<Clock::time_point> next;
    for (const Flight& flight : in_flight_) next = next ? std::min(*next, flight.deadline) : flight.deadline;
    return next;
  }

  void wake() override { ready_.signal(); }

  // Reports a publish's outcome once (a second report of the same tag is dropped). Signals
  // ready_ only for the first outcome run() has not collected yet: it takes every outcome there
  // is. Called by the thread that calls start(), or for an answer under the connection's lock,
  // which the destructor takes before ready_ goes.
  void finish(std::uint64_t tag, DeliveryResult result) {
    {
      std::lock_guard lock(mutex_);
      auto flight = find_flight(tag);
      if (flight == in_flight_.end()) return;
      erase_flight(flight);
      finished_.emplace_back(tag, std::move(result));
      if (finished_.size() != 1) return;
    }
    ready_.signal();
  }

 private:
  struct Flight {
    std::uint64_t tag;
    int mid;  // -1 until published
    Clock::time_point deadline;
  };
  using Flights = std::vector<Flight>;  // at most the registration's concurrency

  Flights::iterator find_flight(std::uint64_t tag) {
    return std::find_if(in_flight_.begin(), in_flight_.end(), [tag](const Flight& f) { return f.tag == tag; });
  }
  void erase_flight(Flights::iterator flight) {
    *flight = in_flight_.back();
    in_flight_.pop_back();
  }

  std::string topic_for(const Delivery& d) const {
    std::string topic;
    const std::string& t = target_.topic;
    topic.reserve(t.size() + d.thing.size() + d.name.size());
    for (std::size_t i = 0; i < t.size();) {
      const std::size_t close = t[i] == '{' ? t.find('}', i) : std::string::npos;
      const std::string_view field = close == std::string::npos ? std::string_view() : std::string_view(t).substr(i + 1, close - i - 1);
      if (field == "thing") {
        append_topic_name(topic, d.thing);
      } else if (field == "name") {
        append_topic_name(topic, d.name);
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
  bool waited_for_connection_ = false;  // by start()
  ReadySignal ready_;  // an outcome to report, or a wake()
  mutable std::mutex mutex_;  // guards what follows
  Flights in_flight_;
  std::vector<std::pair<std::uint64_t, DeliveryResult>> finished_;
};

std::optional<int> Connection::publish(Mqtt* target, std::uint64_t tag, const std::string& topic,
                                       std::string_view payload, int qos, std::string& error) {
  if (qos > 0 && !session_.wait_for_room(MqttSession::unsent_cost(topic.size(), payload.size()), Clock::now())) {
    error = "the broker has not acknowledged " + std::to_string(session_.unsent_bytes()) + " bytes of messages, " +
            session_.state();
    return std::nullopt;
  }
  {
    std::lock_guard lock(mutex_);
    ++publishing_;
  }
  const std::optional<int> mid = session_.publish(topic, payload, qos, error);
  bool answered_early = false;
  {
    std::lock_guard lock(mutex_);
    if (mid) {
      answered_early = std::erase(early_, *mid) > 0;
      if (!answered_early) awaiting_.push_back({*mid, target, tag});
    }
    if (--publishing_ == 0) early_.clear();  // answers to forgotten publishes
  }
  if (answered_early) target->finish(tag, {});
  return mid;
}

void Connection::answered(int mid) {
  std::lock_guard lock(mutex_);
  auto it = std::find_if(awaiting_.begin(), awaiting_.end(), [mid](const Awaiting& a) { return a.mid == mid; });
  if (it == awaiting_.end()) {  // forgotten (its target gave up on it or is gone), or not registered yet
    if (publishing_ > 0) early_.push_back(mid);
    return;
  }
  const Awaiting answered = *it;
  awaiting_.erase(it);  // keeps the order: the oldest stay in front
  answered.target->finish(answered.tag, {});
}

}  // namespace

std::unique_ptr<Target> make_mqtt_target(const MqttTarget& target) { return std::make_unique<Mqtt>(target); }

}  // namespace deviceshadow::notify
