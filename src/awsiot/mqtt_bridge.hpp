// The AWS IoT Device Shadow MQTT API (docs/aws-iot.md, "MQTT"): shadowd connects to a broker as
// a client, takes the requests devices publish on
//   $aws/things/{thing}/shadow[/name/{name}]/{get|update|delete}
// serves them through the engine with the documents and errors of the HTTP facade, and publishes
// AWS's answers: …/accepted or …/rejected (the request's clientToken echoed), and after an
// accepted update …/update/documents and, when there is one to announce, …/update/delta. Writes
// made through REST are announced the same way (update/accepted, delta, documents, or
// delete/accepted), as the engine's write listener. With several shadowd on one store, each
// request is served by the one that claims it first (DeliveryStore::claim).
// Names are percent-encoded in topic levels ('/', '+', '#', '%', NUL), as the MQTT notification
// target writes them.
//
// What devices can make the bridge hold is bounded in bytes, and one shadow's flood does not
// starve the others (docs/aws-iot.md, "Flow control"):
// - A request whose payload is over the engine's --max-body-bytes is answered 413 at once, on the
//   network thread, without being copied or queued.
// - Requests waiting for a worker are held in FairQueues (awsiot/fair_queue.hpp) under one byte
//   budget, max_queued_bytes: a shadow may take only as much as the room left free, so one
//   flooding shadow holds at most half, and each worker serves the shadows of its queue in turn.
//   A request that does not fit is answered 429 (ThrottlingException) at once.
// - Answers go to the broker connection only while the bytes it holds unsent (handed to
//   libmosquitto, not yet acknowledged by the broker) leave room for them under
//   max_unsent_bytes: a worker waits up to answer_wait for that room, then drops the request's
//   answers (counted, logged at most once a second); the device's request times out. Refusals
//   made on the network thread never wait: they are dropped when there is no room. Announcements
//   of REST writes wait for room as long as it takes (their own queue bounds them).
#pragma once

#include "awsiot/fair_queue.hpp"
#include "deviceshadow/delivery_store.hpp"
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
  // The part of `topic` that names its shadow, the same for every request of one shadow (the
  // topic up to the action); the whole topic when it is no request topic.
  static std::string_view shadow_of(std::string_view topic) noexcept;
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
  std::size_t workers = 16;  // threads serving requests, off the network thread
  // Bytes of the requests waiting for a worker (each its topic, its payload and
  // FairQueue::kRequestOverhead), shared between shadows as awsiot/fair_queue.hpp says; a
  // request that does not fit is answered 429.
  std::size_t max_queued_bytes = std::size_t{64} << 20;
  // Bytes of the messages handed to the broker connection and not yet acknowledged by the broker
  // (notify::MqttSession::unsent_bytes) under which answers and announcements are published;
  // past it a worker waits up to answer_wait for room, then drops the request's answers.
  std::size_t max_unsent_bytes = std::size_t{64} << 20;
  std::chrono::milliseconds answer_wait{2000};
  // REST writes waiting to be announced (while the broker is away); beyond it the oldest are
  // dropped and counted.
  std::size_t max_announcements = 10000;
  // A request is served by the shadowd that claims it (DeliveryStore::claim of its topic and
  // payload) for this long; 0 serves every request without claiming (one shadowd per broker).
  std::chrono::milliseconds claim_window{0};
};

struct MqttBridgeStats {
  std::atomic<std::uint64_t> requests{0};          // request messages received
  std::atomic<std::uint64_t> rejected{0};          // answered on …/rejected
  std::atomic<std::uint64_t> ignored{0};           // messages on topics that are no request
  std::atomic<std::uint64_t> overloaded{0};        // refused with 429: no room in the queue for them
  std::atomic<std::uint64_t> shadow_throttled{0};  // of those, refused while their shadow had requests waiting
  std::atomic<std::uint64_t> too_large{0};         // refused with 413 at once: over --max-body-bytes
  std::atomic<std::uint64_t> answers_dropped{0};   // answers not published: no room under max_unsent_bytes in time
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
// workers (the requests of one shadow go to one worker, in order; a worker serves its shadows
// in turn) and a thread announcing REST writes in the order they were stored. It is a listener
// of the engine's writes: make it before writes begin, and destroy it after they end.
class MqttBridge final : private WriteListener {
 public:
  // `claims`: where requests are claimed (the delivery half of the engine's store).
  MqttBridge(Engine& engine, DeliveryStore& claims, http::Logger& logger, MqttBridgeOptions options);
  ~MqttBridge();
  MqttBridge(const MqttBridge&) = delete;
  MqttBridge& operator=(const MqttBridge&) = delete;

  const MqttBridgeStats& stats() const noexcept { return stats_; }
  // Appends the bridge's Prometheus metrics.
  void render_metrics(std::string& out) const;

 private:
  struct Shard {
    explicit Shard(QueueBudget& budget) : queue(budget) {}
    std::mutex mutex;  // guards queue
    std::condition_variable cv;
    FairQueue queue;
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
  // Answers a request refused on the network thread: published only if there is room now.
  void refuse_now(std::string_view topic, std::string_view payload, const Error& error);
  void work(Shard& shard);
  bool claim(const QueuedRequest& request);
  // Waits until `bytes` more fit under max_unsent_bytes, at most until `deadline`; false past
  // it, or once the bridge is stopping.
  bool wait_for_room(std::size_t bytes, std::chrono::steady_clock::time_point deadline);
  // Publishes the answers of one request once they fit, waiting until `deadline` at most;
  // drops them all otherwise.
  void answer(const std::vector<MqttMessage>& messages, std::chrono::steady_clock::time_point deadline);
  void publish(const std::vector<MqttMessage>& messages);
  void on_write(const WriteNotice& write) noexcept override;
  void announce_writes();

  Engine& engine_;
  DeliveryStore& claims_;
  ShadowTopics topics_;
  http::Logger& logger_;
  MqttBridgeOptions options_;
  MqttBridgeStats stats_;
  std::atomic<bool> stopping_{false};
  QueueBudget queue_budget_;  // before the shards, whose queues give their bytes back to it
  std::vector<std::unique_ptr<Shard>> shards_;
  http::LogRateLimit drop_log_{1};        // "answers dropped" lines
  http::LogRateLimit unclaimed_log_{10};  // "request not served" lines
  const std::string owner_;  // this bridge's name in its claims
  std::mutex announce_mutex_;
  std::condition_variable announce_cv_;
  std::deque<Announcement> announcements_;
  bool dropping_ = false;  // since the last announcement published (logged once)
  std::thread announcer_;
  std::unique_ptr<notify::MqttSession> session_;
};

}  // namespace deviceshadow::awsiot
