// Reads one leased shard from its checkpoint and hands its records, in order, to a handler;
// the checkpoint advances only past records the handler reports done. Records of lease items
// (is_lease_record) are passed over: they are covered by the next checkpoint, and a page of
// nothing else stores none (storing one would write the lease, a new record, without end).
#pragma once

#include "notify/stream/streams_api.hpp"

#include <atomic>
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace deviceshadow::notify::stream {

// Receives log lines (the same shape as the dispatcher's NotifyLog).
using StreamLog = std::function<void(bool error, std::string_view message,
                                     std::vector<std::pair<std::string, std::string>> fields)>;

// Counters of every reader of one consumer.
struct StreamCounters {
  std::atomic<std::uint64_t> records{0};            // records handed to the handler and done
  std::atomic<std::uint64_t> trimmed{0};            // times records were trimmed before being read
  std::atomic<std::uint64_t> expired_iterators{0};  // iterators renewed after expiring
  std::atomic<std::uint64_t> throttled{0};          // reads refused for throttling or a failure worth retrying
};

// Gets the records of one shard read and not yet done, oldest first; returns how many of them,
// from the front, are done (delivered or given up for good). The others are offered again on
// the next poll, followed by what was read since (so a handler can wait for the rest of a
// group of records, such as the items of one transaction, which may span pages): a handler
// recognises records it has already taken by their sequence numbers.
using RecordHandler = std::function<std::size_t(const std::string& shard_id, std::span<const StreamRecord> records)>;
// Stores a checkpoint (a sequence number, or SHARD_END); false when the lease is lost.
using Checkpointer = std::function<bool(const std::string& checkpoint)>;

// Records a shard reader keeps read and not done, at most (its memory stays bounded; it reads
// no more until the feed has the older ones done).
inline constexpr std::size_t kMaxPendingRecords = 10000;

class ShardReader {
 public:
  // `checkpoint` is the lease's: a sequence number, TRIM_HORIZON or LATEST.
  ShardReader(StreamsApi& streams, std::string stream_arn, std::string shard_id, std::string checkpoint,
              Checkpointer store_checkpoint, StreamCounters& counters, StreamLog log = {}, int page_limit = 1000,
              std::size_t max_pending = kMaxPendingRecords);

  enum class Step {
    progressed,   // records were read or handled
    idle,         // nothing new (poll again later)
    retry_later,  // the read failed for a reason worth retrying (throttling, 5xx)
    lease_lost,   // the checkpoint could not be stored: stop reading this shard
    shard_end,    // read to its end and checkpointed SHARD_END: the children may start
  };
  // One step: reads the next page (none once `max_pending` records wait) and offers what
  // waits to the handler. Throws StreamError for failures that retrying will not cure, and
  // what storing a checkpoint throws (the next poll stores it again before anything else).
  Step poll(const RecordHandler& handler);

  const std::string& shard_id() const { return shard_id_; }
  const std::string& checkpoint() const { return checkpoint_; }

 private:
  void open_iterator();
  void trimmed(std::string_view what);
  // Stores a checkpoint (SHARD_END: the reader is finished); false when the lease is lost. Until
  // stored (a throw), it is unstored_, which the next poll stores first: the records before it
  // are done and never offered again.
  bool store(std::string checkpoint);

  StreamsApi& streams_;
  std::string stream_arn_;
  std::string shard_id_;
  std::string checkpoint_;                // the last one stored
  std::optional<std::string> unstored_;  // records up to it are done; storing it failed
  std::string position_;  // the last record read (or the checkpoint): where a new iterator starts
  Checkpointer store_checkpoint_;
  StreamCounters& counters_;
  StreamLog log_;
  int page_limit_;
  std::size_t max_pending_;  // records read and not done, at most (memory stays bounded)
  std::optional<std::string> iterator_;
  bool at_end_ = false;  // the last page had no next iterator
  std::vector<StreamRecord> pending_;  // read, not yet done
  bool finished_ = false;  // SHARD_END is stored
};

}  // namespace deviceshadow::notify::stream
