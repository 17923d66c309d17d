// The change feed of a DynamoDB store as one process reads it: the entries the write assembler
// makes of the stream records of the shards this process holds leases on, numbered in the order
// they were completed, and kept in memory until every registration has them (trim). Only then
// do the records they were made of count as done, so that a shard's checkpoint passes them: a
// process that dies first leaves them to be read again by whoever takes the shard over
// (at-least-once; an event keeps its id). One shadow's items are in one shard, so its entries
// keep their version order.
//
// It is bounded in entries and bytes; when a registration far behind holds it near that bound
// (pressed()), the dispatcher spills that registration's events to dead letters, so that one
// slow receiver never stops the stream for the others (or for history written from it).
//
// Registrations' checkpoints live in memory: after a restart every registration starts at the
// first entry read again, from the shards' stored checkpoints (checkpoint() of a registration
// the feed has not seen is the first entry it holds, less one), whether the shards were read
// before the dispatcher came up or after.
#pragma once

#include "notify/feed.hpp"
#include "notify/stream/assembler.hpp"
#include "notify/stream/shard_reader.hpp"
#include "store/feed_listener.hpp"

#include <deque>
#include <map>
#include <mutex>
#include <span>
#include <string>
#include <unordered_map>

namespace deviceshadow::notify::stream {

struct StreamFeedOptions {
  std::size_t capacity = 20000;  // entries held at most; reading the shards waits beyond it
  std::size_t capacity_bytes = std::size_t{256} << 20;  // and their bytes (one entry more may pass it)
  // The records a shard reader keeps waiting for their entries to be trimmed: it reads no more
  // beyond it (ShardReader's max_pending), so a shard near it counts as pressed too.
  std::size_t shard_records = kMaxPendingRecords;
  // Called with entries, in order, before they join the feed (history written from the stream).
  // Throwing leaves them to be offered again at the next take(), and nothing is taken meanwhile.
  std::function<void(std::span<const AssembledEntry>)> on_entries;
};

class StreamFeed final : public Feed {
 public:
  explicit StreamFeed(StreamFeedOptions options = {});

  // The consumer's RecordHandler: takes the records not taken before, assembles them and
  // returns how many from the front are done (ignored, or their write's entry trimmed).
  // Called by one thread at a time. Throws what the assembler or on_entries throws (the
  // records are offered again).
  std::size_t take(const std::string& shard_id, std::span<const StreamRecord> records);
  // The shard's reader stopped (lease lost, shard ended): what was taken of it is forgotten
  // (its entries already in the feed stay and are delivered).
  void forget(const std::string& shard_id);

  std::size_t size() const;  // entries held
  // Three quarters of a capacity are taken (entries, bytes, or one shard's records not done):
  // the registrations holding the feed back spill.
  bool pressed() override;
  std::size_t waiting() const;  // records taken whose write is not complete
  std::uint64_t unreadable() const noexcept { return assembler_.unreadable(); }  // WriteAssembler::unreadable

  std::vector<FeedEntry> read(std::uint64_t after, std::size_t limit) override;
  void trim(std::uint64_t up_to) override;
  std::uint64_t end() override;
  std::optional<std::uint64_t> checkpoint(std::string_view registration) override;
  void put_checkpoint(std::string_view registration, std::uint64_t seq) override;
  void set_listener(std::function<void()> listener) override;

 private:
  // A record taken from a shard and not yet done.
  struct Taken {
    std::string sequence_number;
    bool part = false;      // of a write (else ignored: done at once)
    std::uint64_t seq = 0;  // its write's entry; 0 while the write is not complete
  };
  // Requires mutex_: ignored, or its write's entry is trimmed.
  bool is_done(const Taken& t) const { return !t.part || (t.seq != 0 && t.seq <= trimmed_); }
  // Requires mutex_ (released while on_entries runs). Passes the completed entries to
  // on_entries and appends them; when on_entries throws they stay ready and it rethrows.
  void publish(std::unique_lock<std::mutex>& lock);

  const StreamFeedOptions options_;
  mutable std::mutex mutex_;
  WriteAssembler assembler_;
  std::deque<FeedEntry> entries_;  // seqs trimmed_ + 1 … end_
  std::size_t bytes_ = 0;          // of entries_ and ready_
  std::uint64_t end_ = 0;
  std::uint64_t trimmed_ = 0;
  std::vector<AssembledEntry> ready_;  // complete, not yet appended
  std::map<std::string, std::deque<Taken>, std::less<>> shards_;
  std::unordered_map<std::string, Taken*> parts_;  // records of incomplete writes, by sequence number
  std::map<std::string, std::uint64_t, std::less<>> checkpoints_;
  FeedListener listener_;
};

}  // namespace deviceshadow::notify::stream
