#include "notify/feed.hpp"

#include "deviceshadow/error.hpp"

namespace deviceshadow::notify {

bool OutboxFeed::available(DeliveryStore& store) {
  try {
    store.feed_end();
    return true;
  } catch (const Error& e) {
    if (e.code() != ErrorCode::unavailable) throw;
    return false;
  }
}

void OutboxFeed::set_listener(std::function<void()> listener) { store_.set_feed_listener(std::move(listener)); }

}  // namespace deviceshadow::notify
