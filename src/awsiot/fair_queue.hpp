// The requests the MQTT bridge holds for its workers (awsiot/mqtt_bridge.hpp), bounded in bytes
// and shared fairly between shadows, so that one device flooding its shadow neither exhausts
// memory nor starves the other shadows:
// - Every waiting request counts its topic, its payload and kRequestOverhead bytes against one
//   budget that all the bridge's queues share (QueueBudget; shadowd's --mqtt-max-queued-bytes).
// - A shadow may add a request only while its own waiting bytes, with the request, stay within
//   the room still free in the whole budget (a dynamic threshold): one flooding shadow holds at
//   most half of the budget (and one request), n flooding shadows about 1/(n+1) of it each, and
//   the room they leave free takes the request of any shadow with nothing waiting that fits in
//   it.
// - Each queue (one per worker) keeps the requests of each of its shadows in a lane of their own,
//   in order of arrival, and serves the lanes in turn: a request waits behind at most one
//   request of each other shadow of its queue, never behind a whole flood.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <deque>
#include <functional>
#include <string>
#include <string_view>
#include <unordered_map>

namespace deviceshadow::awsiot {

// The byte budget shared by the queues. Thread-safe.
class QueueBudget {
 public:
  explicit QueueBudget(std::size_t max_bytes) noexcept : max_bytes_(max_bytes) {}
  QueueBudget(const QueueBudget&) = delete;
  QueueBudget& operator=(const QueueBudget&) = delete;

  // Takes `bytes` for a shadow that already holds `held` of them when held + bytes fit in the
  // room left (max_bytes() - used()); otherwise takes nothing and returns false.
  bool take(std::size_t bytes, std::size_t held) noexcept;
  void give_back(std::size_t bytes) noexcept;
  std::size_t used() const noexcept { return used_.load(std::memory_order_relaxed); }
  std::size_t max_bytes() const noexcept { return max_bytes_; }

 private:
  const std::size_t max_bytes_;
  std::atomic<std::size_t> used_{0};
};

struct QueuedRequest {
  std::string topic;
  std::string payload;
  std::chrono::steady_clock::time_point received;
};

// One worker's queue. Not thread-safe: its owner locks it.
class FairQueue {
 public:
  // What a request costs beyond its topic and payload: its entry, its lane's share, allocations.
  static constexpr std::size_t kRequestOverhead = 256;
  static std::size_t cost(std::size_t topic_bytes, std::size_t payload_bytes) noexcept {
    return topic_bytes + payload_bytes + kRequestOverhead;
  }

  explicit FairQueue(QueueBudget& budget) noexcept : budget_(budget) {}
  ~FairQueue();  // gives back what still waits
  FairQueue(const FairQueue&) = delete;
  FairQueue& operator=(const FairQueue&) = delete;

  // Appends a copy of the request to `shadow`'s lane when the budget takes it (see above);
  // false, copying nothing, when it does not. Throws only std::bad_alloc (nothing taken then).
  bool push(std::string_view shadow, std::string_view topic, std::string_view payload,
            std::chrono::steady_clock::time_point received);
  // The oldest request of the lane whose turn it is; that lane's turn comes again after every
  // other lane's. Its bytes go back to the budget. The queue must not be empty. Throws only
  // std::bad_alloc, leaving the queue as it was.
  QueuedRequest pop();

  bool empty() const noexcept { return turns_.empty(); }
  std::size_t lanes() const noexcept { return turns_.size(); }
  // The bytes `shadow` holds here (0 when it has nothing waiting).
  std::size_t held(std::string_view shadow) const;

 private:
  struct Lane {
    std::deque<QueuedRequest> requests;
    std::size_t bytes = 0;
  };
  struct Hash {
    using is_transparent = void;
    std::size_t operator()(std::string_view s) const noexcept { return std::hash<std::string_view>{}(s); }
  };

  QueueBudget& budget_;
  std::unordered_map<std::string, Lane, Hash, std::equal_to<>> lanes_;  // only lanes with requests
  std::deque<std::string> turns_;  // the shadows of lanes_, the next one to serve in front
};

}  // namespace deviceshadow::awsiot
