// The stream consumer of one shadowd: its lease coordinator and a reader per held shard
// (docs/notifications.md, "DynamoDB: the stream consumer"). StreamService runs it: the caller
// schedules balance() every few seconds and poll() often.
#pragma once

#include "notify/stream/leases.hpp"
#include "notify/stream/shard_reader.hpp"

#include <map>
#include <memory>
#include <mutex>
#include <string>

namespace deviceshadow::notify::stream {

class StreamConsumer {
 public:
  StreamConsumer(StreamsApi& streams, LeaseTable& leases, std::string stream_arn, CoordinatorOptions options,
                 RecordHandler handler, StreamLog log = {}, int page_limit = 1000);

  // One lease round (new shards, renewals, takes, at most one steal); starts a reader for each
  // lease taken, from its checkpoint, and drops the readers of leases lost.
  void balance();
  // One step of each reader. Returns true when a reader made progress (poll again at once).
  bool poll();
  // Frees the leases for the other instances (an orderly stop).
  void release();

  std::vector<std::string> shards() const;  // the shards read now
  const StreamCounters& counters() const { return counters_; }
  LeaseCoordinator& coordinator() { return coordinator_; }

 private:
  StreamsApi& streams_;
  std::string stream_arn_;
  LeaseCoordinator coordinator_;
  RecordHandler handler_;
  StreamLog log_;
  int page_limit_;
  StreamCounters counters_;
  mutable std::mutex mutex_;
  std::map<std::string, std::unique_ptr<ShardReader>> readers_;
};

}  // namespace deviceshadow::notify::stream
