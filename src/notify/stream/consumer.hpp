// The stream consumer of one shadowd: its lease coordinator and a reader per held shard
// (docs/notifications.md, "DynamoDB: the stream consumer"). StreamService runs it: the caller
// schedules balance() every few seconds and poll() often.
#pragma once

#include "notify/stream/leases.hpp"
#include "notify/stream/shard_reader.hpp"

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>

namespace deviceshadow::notify::stream {

// Told that the reader of a shard stopped (its lease lost, or the shard read to its end), before
// any new reader of that shard starts: what the handler took of it and has not done will be
// offered again from the checkpoint.
using ReaderStopped = std::function<void(const std::string& shard_id)>;

class StreamConsumer {
 public:
  StreamConsumer(StreamsApi& streams, LeaseTable& leases, std::string stream_arn, CoordinatorOptions options,
                 RecordHandler handler, StreamLog log = {}, int page_limit = 1000, ReaderStopped stopped = {});

  // One lease round (new shards, renewals, takes, at most one steal); starts a reader for each
  // lease taken, from its checkpoint, and drops the readers of leases lost.
  void balance();
  // One step of each reader not waiting after a failure. Returns true when a reader made
  // progress (poll again at once). A reader that throws is logged with its shard and waits before
  // its next step, from 100 ms doubling up to 5 s while it keeps failing; the others go on.
  bool poll();
  // Frees the leases for the other instances (an orderly stop). Tells `stopped` nothing: no
  // reader starts again in this consumer.
  void release();

  std::vector<std::string> shards() const;  // the shards read now
  const StreamCounters& counters() const { return counters_; }
  LeaseCoordinator& coordinator() { return coordinator_; }

 private:
  // A shard's reader, and its wait after failures.
  struct Reading {
    std::unique_ptr<ShardReader> reader;
    std::chrono::milliseconds failing{0};  // 0: its last step did not throw
    std::chrono::steady_clock::time_point retry_at{};
  };

  void stop_reader(const std::string& shard_id);  // requires mutex_; calls stopped_ under it

  StreamsApi& streams_;
  std::string stream_arn_;
  LeaseCoordinator coordinator_;
  RecordHandler handler_;
  StreamLog log_;
  ReaderStopped stopped_;
  int page_limit_;
  StreamCounters counters_;
  std::function<std::chrono::steady_clock::time_point()> clock_;
  mutable std::mutex mutex_;
  std::map<std::string, Reading> readers_;
};

}  // namespace deviceshadow::notify::stream
