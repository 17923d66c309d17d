// The stream consumer of one shadowd, running: it shares the reading of its DynamoDB table's
// stream with the other processes on the table through lease items, and feeds what it reads to
// a StreamFeed that the dispatcher delivers from (docs/notifications.md, "DynamoDB: the stream
// consumer").
#pragma once

#include "deviceshadow/dynamodb_store.hpp"
#include "notify/stream/consumer.hpp"
#include "notify/stream/stream_feed.hpp"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <optional>
#include <string>
#include <thread>

namespace deviceshadow::aws {
class JsonClient;
}

namespace deviceshadow::notify::stream {

struct StreamServiceOptions {
  std::string owner;  // unique among the processes on the table; empty: host name, pid and a random part
  std::chrono::milliseconds lease_timeout{10000};  // a process silent this long loses its shards
  std::chrono::milliseconds idle{250};             // between reads when no shard had anything new
  StreamFeedOptions feed;
};

class StreamService {
 public:
  // The table's stream, or nullopt when it has none. Throws StreamError.
  static std::optional<std::string> find_stream(DynamoDbOptions table);

  // Starts reading `stream_arn` on a thread of its own.
  StreamService(DynamoDbOptions table, const std::string& stream_arn, StreamServiceOptions options, StreamLog log);
  ~StreamService();  // stops reading and frees its leases, so the others take over at once
  StreamService(const StreamService&) = delete;
  StreamService& operator=(const StreamService&) = delete;

  StreamFeed& feed() { return feed_; }
  const StreamCounters& counters() const { return consumer_->counters(); }
  // Shards read now. Lock-free, so that metrics may ask while the reader's handler is in a
  // store call that reports its own metrics.
  std::size_t shards() const { return shards_.load(std::memory_order_relaxed); }
  const std::string& owner() const { return owner_; }

 private:
  void run();

  std::string owner_;
  StreamServiceOptions options_;
  StreamLog log_;
  StreamFeed feed_;
  std::unique_ptr<aws::JsonClient> dynamodb_;
  std::unique_ptr<StreamsApi> streams_;
  std::unique_ptr<LeaseTable> leases_;
  std::unique_ptr<StreamConsumer> consumer_;
  std::mutex mutex_;
  std::condition_variable cv_;
  bool stopping_ = false;
  std::atomic<std::size_t> shards_{0};
  std::thread thread_;
};

}  // namespace deviceshadow::notify::stream
