#include "awsiot/fair_queue.hpp"

#include <utility>

namespace deviceshadow::awsiot {

bool QueueBudget::take(std::size_t bytes, std::size_t held) noexcept {
  std::size_t used = used_.load(std::memory_order_relaxed);
  do {
    if (used > max_bytes_ || held > max_bytes_ - used || bytes > max_bytes_ - used - held) return false;
  } while (!used_.compare_exchange_weak(used, used + bytes, std::memory_order_relaxed));
  return true;
}

void QueueBudget::give_back(std::size_t bytes) noexcept { used_.fetch_sub(bytes, std::memory_order_relaxed); }

FairQueue::~FairQueue() {
  for (const auto& [shadow, lane] : lanes_) budget_.give_back(lane.bytes);
}

bool FairQueue::push(std::string_view shadow, std::string_view topic, std::string_view payload,
                     std::chrono::steady_clock::time_point received) {
  const std::size_t bytes = cost(topic.size(), payload.size());
  auto lane = lanes_.find(shadow);
  if (!budget_.take(bytes, lane == lanes_.end() ? 0 : lane->second.bytes)) return false;
  try {
    if (lane == lanes_.end()) {
      turns_.emplace_back(shadow);
      try {
        lane = lanes_.try_emplace(std::string(shadow)).first;
      } catch (...) {
        turns_.pop_back();
        throw;
      }
    }
    lane->second.requests.push_back({std::string(topic), std::string(payload), received});
  } catch (...) {
    if (lane != lanes_.end() && lane->second.requests.empty()) {
      lanes_.erase(lane);
      turns_.pop_back();
    }
    budget_.give_back(bytes);
    throw;
  }
  lane->second.bytes += bytes;
  return true;
}

QueuedRequest FairQueue::pop() {
  const auto lane = lanes_.find(turns_.front());
  if (lane->second.requests.size() > 1) turns_.push_back(turns_.front());  // its next turn (first: it may throw)
  turns_.pop_front();
  QueuedRequest request = std::move(lane->second.requests.front());
  lane->second.requests.pop_front();
  const std::size_t bytes = cost(request.topic.size(), request.payload.size());
  lane->second.bytes -= bytes;
  budget_.give_back(bytes);
  if (lane->second.requests.empty()) lanes_.erase(lane);
  return request;
}

std::size_t FairQueue::held(std::string_view shadow) const {
  const auto lane = lanes_.find(shadow);
  return lane == lanes_.end() ? 0 : lane->second.bytes;
}

}  // namespace deviceshadow::awsiot
