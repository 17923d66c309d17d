// The AWS IoT Device Shadow MQTT API (docs/aws-iot.md, "MQTT"): shadowd connects to a broker as
// a client, takes the requests devices publish on
//   $aws/things/{thing}/shadow[/name/{name}]/{get|update|delete}
// serves them through the engine with the documents and errors of the HTTP facade, and publishes
// AWS's answers: …/accepted or …/rejected (the request's clientToken echoed), and after an
// accepted update …/update/documents and, when there is one to announce, …/update/delta. Writes
// made through REST are announced the same way (update/accepted, delta, documents, or
// delete/accepted), as the engine's write listener. With several shadowd on one store, each
// request is served by the one that claims it first (Store::claim).
// Names are percent-encoded in topic levels ('/', '+', '#', '%', NUL), as the MQTT notification
// target writes them.
#pragma once

#include "deviceshadow/engine.hpp"
#include "http/log.hpp"

#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

namespace deviceshadow::notify {
class MqttSession;
}

namespace deviceshadow::awsiot {

struct MqttMessage {
  std::string topic;
  std::string payload;
  friend bool operator==(const MqttMessage&, const MqttMessage&) = default;
};

// The request side, without a broker: the messages that answer one request. Never throws;
// safe to call concurrently.
class ShadowTopics {
 public:
  ShadowTopics(Engine& engine, std::string classic_shadow, bool acknowledge);

  // The subscriptions that bring every request (and every unknown action) of every shadow.
  static const std::vector<std::string>& filters();
  // What to publish for a message received on `topic`; empty when the topic is none of the
  // shadow request topics (the caller logs it).
  std::vector<MqttMessage> serve(std::string_view topic, std::string_view payload);
  // The answer to a request refused before it is served (e.g. a full queue), or nothing when
  // the topic is not a request topic.
  static std::vector<MqttMessage> refuse(std::string_view topic, std::string_view payload, const Error& error);
  // The same value for every request of one shadow (its topic up to the action).
  static std::size_t shard_of(std::string_view topic) noexcept;
  // What AWS IoT publishes after a write made elsewhere (REST): update/accepted with the state
  // the write asked for, update/delta and update/documents; delete/accepted after the delete of
  // a whole shadow. Never throws.
  std::vector<MqttMessage> announce(const WriteNotice& write) const;

 private:
  // update/delta (when there is one to announce) and update/documents after an accepted update.
  void append_update_followups(std::vector<MqttMessage>& out, std::string_view prefix, const ShadowRecord& before,
                               const ShadowView& after, bool desired_named, const json::object* reported_requested,
                               std::string_view client_token) const;

  Engine& engine_;
  std::string classic_shadow_;
  bool acknowledge_;
};

struct MqttBridgeOptions {
  std::string broker;  // mqtt://HOST[:PORT]
  std::string username;
  std::string password;
  std::string client_id;  // empty: a random one
  std::string classic_shadow = "main";
  bool acknowledge = false;
  std::size_t workers = 16;       // threads serving requests, off the network thread
  std::size_t max_queued = 10000; // requests waiting for a worker; more are rejected with 429
  // REST writes waiting to be announced (while the broker is away); beyond it the oldest are
  // dropped and counted.
  std::size_t max_announcements = 10000;
  // A request is served by the shadowd that claims it (Store::claim of its topic and payload)
  // for this long; 0 serves every request without claiming (one shadowd per broker).
  std::chrono::milliseconds claim_window{0};
};

struct MqttBridgeStats {
  std::atomic<std::uint64_t> requests{0};          // request messages received
  std::atomic<std::uint64_t> rejected{0};          // answered on …/rejected
  std::atomic<std::uint64_t> ignored{0};           // messages on topics that are no request
  std::atomic<std::uint64_t> overloaded{0};        // refused with 429: the queue was full
  std::atomic<std::uint64_t> publish_failures{0};  // answers that could not be queued for the broker
  std::atomic<std::uint64_t> connects{0};          // successful connects, the first included
  std::atomic<std::uint64_t> disconnects{0};
  std::atomic<std::uint64_t> connected{0};         // 1 while connected
  std::atomic<std::uint64_t> claimed_elsewhere{0};  // requests another shadowd claimed first
  std::atomic<std::uint64_t> unclaimed{0};  // requests not served: waited past the claim window, or the claim failed
  std::atomic<std::uint64_t> announced{0};          // REST writes announced
  std::atomic<std::uint64_t> announcements_dropped{0};  // REST writes not announced: the queue was full
  std::atomic<std::uint64_t> announcements_waiting{0};
};

// The bridge: one client connection (reconnecting and resubscribing by itself), a pool of
// workers (the requests of one shadow go to one worker, in order) and a thread announcing REST
// writes in the order they were stored. It is a listener of the engine's writes: make it before
// writes begin, and destroy it after they end.
class MqttBridge final : private WriteListener {
 public:
  MqttBridge(Engine& engine, http::Logger& logger, MqttBridgeOptions options);
  ~MqttBridge();
  MqttBridge(const MqttBridge&) = delete;
  MqttBridge& operator=(const MqttBridge&) = delete;

  const MqttBridgeStats& stats() const noexcept { return stats_; }
  // Appends the bridge's Prometheus metrics.
  void render_metrics(std::string& out) const;

 private:
  struct Request {
    MqttMessage message;
    std::chrono::steady_clock::time_point received;
  };
  struct Shard {
    std::mutex mutex;
    std::condition_variable cv;
    std::deque<Request> queue;
    std::thread thread;
  };
  // A REST write to announce, owned (the WriteNotice it came as points into the engine).
  struct Announcement {
    ShadowKey key;
    ShadowRecord before;
    ShadowRecord after;
    std::array<std::optional<json::object>, 2> requested;
    bool shadow_deleted = false;
    std::string client_token;
  };
  void received(std::string_view topic, std::string_view payload);
  void work(Shard& shard);
  bool claim(const Request& request);
  void publish(const std::vector<MqttMessage>& messages);
  void on_write(const WriteNotice& write) noexcept override;
  void announce_writes();

  Engine& engine_;
  ShadowTopics topics_;
  http::Logger& logger_;
  MqttBridgeOptions options_;
  MqttBridgeStats stats_;
  std::atomic<std::size_t> queued_{0};
  std::atomic<bool> stopping_{false};
  std::vector<std::unique_ptr<Shard>> shards_;
  const std::string owner_;  // this bridge's name in its claims
  std::mutex announce_mutex_;
  std::condition_variable announce_cv_;
  std::deque<Announcement> announcements_;
  bool dropping_ = false;  // since the last announcement published (logged once)
  std::thread announcer_;
  std::unique_ptr<notify::MqttSession> session_;
};

}  // namespace deviceshadow::awsiot
