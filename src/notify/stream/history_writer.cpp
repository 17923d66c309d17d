#include "notify/stream/history_writer.hpp"

#include "deviceshadow/engine.hpp"

#include <vector>

namespace deviceshadow::notify::stream {

std::function<void(std::span<const AssembledEntry>)> history_writer(Store& store, std::chrono::seconds retention) {
  return [&store, retention](std::span<const AssembledEntry> entries) {
    std::vector<ShadowHistoryEvent> events;
    events.reserve(entries.size());
    for (const AssembledEntry& entry : entries) events.push_back({entry.key, history_event_of(entry.event(), retention)});
    store.append_history(events);
  };
}

}  // namespace deviceshadow::notify::stream
