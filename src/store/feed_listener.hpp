#pragma once

#include <functional>
#include <mutex>

namespace deviceshadow {

// A listener told of new change-feed entries (DeliveryStore::set_feed_listener, the stream feed's):
// replaced and called under a mutex, so that replacing it waits for a call in progress.
class FeedListener {
 public:
  void set(std::function<void()> listener) {
    std::lock_guard lock(mutex_);
    listener_ = std::move(listener);
  }
  void call() noexcept {
    std::lock_guard lock(mutex_);
    if (listener_) listener_();
  }

 private:
  std::mutex mutex_;
  std::function<void()> listener_;
};

}  // namespace deviceshadow
