// Turns the stream records of a DynamoDB store's writes into change-feed entries: for each
// write, exactly the FeedEntry json the outbox stores (SQLite, memory) keep for it,
// {"event": <the change event>, "reported"|"desired": {"old": …, "new": …}} for each section
// it stored (docs/notifications.md, "DynamoDB: the stream consumer").
//
// While the change feed is on, a section item a write puts carries the write's change event
// (attribute feedEvent, docs/storage.md): the event comes from the record's NewImage as the
// engine rendered it, a section's old state from the OldImage ({} when it did not exist) and its
// new state from the NewImage. The combined layout's one item holds both sections: one record
// is the whole write. In the separate layout a write of both sections puts its whole entry on
// its reported item (attribute feedEntry) and nothing on its desired item, so that one record
// is the whole write there too, wherever the two records land; only when that item would be too
// large does each of its items carry the event, and then its entry is complete once a record of
// every section the event names was added (usually in one shard, in either order, possibly with
// other records between them).
#pragma once

#include "deviceshadow/store.hpp"
#include "notify/stream/streams_api.hpp"

#include <array>
#include <atomic>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace deviceshadow::notify::stream {

// One write's change-feed entry, assembled from its stream records.
struct AssembledEntry {
  ShadowKey key;
  std::string json;                            // as FeedEntry::json (states in DynamoDB's member order)
  std::vector<std::string> sequence_numbers;   // of the records it was made of, as added
  std::size_t event_bytes = 0;

  // The change event as the engine rendered it (the start of `json`).
  std::string_view event() const { return std::string_view(json).substr(kEventStart, event_bytes); }
  static constexpr std::size_t kEventStart = 9;  // after {"event":
};

// Thread-safe: the readers of several shards may share one assembler, so that a write whose two
// items landed in different shards read by this process is still joined.
class WriteAssembler {
 public:
  // Adds one record (each record once). Returns the entry of the write it completes. Records
  // that are no write's part are ignored: other items (lease, history, thing index,
  // registrations, dead letters), removals (TTL dropping an expired item) and items put while
  // the change feed was off (no feedEvent).
  // `part`, when given, is set to whether the record is a write's part (else it was ignored).
  std::optional<AssembledEntry> add(const StreamRecord& record, bool* part = nullptr);

  // Forgets the incomplete write the record is a part of, if any (its shard is to be read
  // again from an earlier checkpoint, by this process or another).
  void drop(std::string_view sequence_number);

  // Writes with some but not all of their records added.
  std::size_t waiting() const;
  // Records of a write whose event cannot be read (not JSON, or no id), passed over as ignored:
  // their writes are not notified.
  std::uint64_t unreadable() const noexcept { return unreadable_; }

 private:
  struct Part {
    bool seen = false;
    std::string old_state;
    std::string new_state;
  };
  struct Pending {
    std::string event;
    std::array<bool, 2> expected{};  // reported, desired: the sections the event names
    std::array<Part, 2> parts;
    std::vector<std::string> sequence_numbers;
  };

  std::atomic<std::uint64_t> unreadable_{0};
  mutable std::mutex mutex_;
  std::map<std::pair<ShadowKey, std::string>, Pending> pending_;  // by shadow and event id
};

}  // namespace deviceshadow::notify::stream
