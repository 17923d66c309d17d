#include "notify/stream/consumer.hpp"

#include <algorithm>

namespace deviceshadow::notify::stream {

StreamConsumer::StreamConsumer(StreamsApi& streams, LeaseTable& leases, std::string stream_arn,
                               CoordinatorOptions options, RecordHandler handler, StreamLog log, int page_limit,
                               ReaderStopped stopped)
    : streams_(streams),
      stream_arn_(stream_arn),
      coordinator_(streams, leases, std::move(stream_arn), std::move(options)),
      handler_(std::move(handler)),
      log_(std::move(log)),
      stopped_(std::move(stopped)),
      page_limit_(page_limit),
      clock_(coordinator_.options().clock) {}

void StreamConsumer::stop_reader(const std::string& shard_id) {
  if (stopped_) stopped_(shard_id);
}

void StreamConsumer::balance() {
  const LeaseCoordinator::RoundResult round = coordinator_.round();
  std::lock_guard lock(mutex_);
  for (const std::string& shard : round.lost) {
    if (!readers_.erase(shard)) continue;
    if (log_) log_(false, "stream shard lease lost", {{"shard", shard}});
    stop_reader(shard);
  }
  for (const Lease& lease : coordinator_.held()) {
    if (readers_.contains(lease.shard_id)) continue;
    auto store = [this, shard = lease.shard_id](const std::string& checkpoint) {
      return coordinator_.checkpoint(shard, checkpoint);
    };
    readers_[lease.shard_id].reader = std::make_unique<ShardReader>(streams_, stream_arn_, lease.shard_id, lease.checkpoint,
                                                                    store, counters_, log_, page_limit_);
  }
}

bool StreamConsumer::poll() {
  std::lock_guard lock(mutex_);
  const auto now = clock_();
  bool progressed = false;
  for (auto it = readers_.begin(); it != readers_.end();) {
    Reading& r = it->second;
    if (r.failing.count() && now < r.retry_at) {
      ++it;
      continue;
    }
    ShardReader::Step step;
    try {
      step = r.reader->poll(handler_);
      r.failing = std::chrono::milliseconds(0);
    } catch (const std::exception& e) {
      r.failing = std::clamp(r.failing * 2, std::chrono::milliseconds(100), std::chrono::milliseconds(5000));
      r.retry_at = now + r.failing;
      if (log_) {
        log_(true, "reading a shard of the table's stream failed",
             {{"shard", it->first}, {"error", e.what()}, {"retry_ms", std::to_string(r.failing.count())}});
      }
      ++it;
      continue;
    }
    if (step == ShardReader::Step::lease_lost || step == ShardReader::Step::shard_end) {
      if (step == ShardReader::Step::lease_lost && log_) log_(false, "stream shard lease lost", {{"shard", it->first}});
      const std::string shard = it->first;
      it = readers_.erase(it);
      stop_reader(shard);
      progressed = true;
    } else {
      progressed = progressed || step == ShardReader::Step::progressed;
      ++it;
    }
  }
  return progressed;
}

void StreamConsumer::release() {
  std::lock_guard lock(mutex_);
  readers_.clear();
  coordinator_.release_all();
}

std::vector<std::string> StreamConsumer::shards() const {
  std::lock_guard lock(mutex_);
  std::vector<std::string> out;
  for (const auto& [id, reader] : readers_) out.push_back(id);
  return out;
}

}  // namespace deviceshadow::notify::stream
