// `--history stream`: the history journal written from a DynamoDB table's stream instead of in
// each write's transaction. Each write read from the stream gets its history event (made from
// the change event the engine rendered) before its entry joins the feed; a failure leaves the
// entries to be offered again, so no event is lost (at least once; an event keeps its key).
#pragma once

#include "deviceshadow/store.hpp"
#include "notify/stream/assembler.hpp"

#include <chrono>
#include <functional>
#include <span>

namespace deviceshadow::notify::stream {

// The StreamFeedOptions::on_entries that appends the entries' history events to `store`.
std::function<void(std::span<const AssembledEntry>)> history_writer(Store& store, std::chrono::seconds retention);

}  // namespace deviceshadow::notify::stream
