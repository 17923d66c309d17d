#include "notify/feed.hpp"

#include "deviceshadow/engine.hpp"
#include "deviceshadow/error.hpp"

namespace deviceshadow::notify {

OutboxFeed::OutboxFeed(Engine& engine) : store_(engine.store()) {}

bool OutboxFeed::available(Store& store) {
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
