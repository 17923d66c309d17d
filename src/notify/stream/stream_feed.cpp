#include "notify/stream/stream_feed.hpp"

#include "deviceshadow/error.hpp"

#include <algorithm>

namespace deviceshadow::notify::stream {

StreamFeed::StreamFeed(StreamFeedOptions options) : options_(std::move(options)) {}

std::size_t StreamFeed::take(const std::string& shard_id, std::span<const StreamRecord> records) {
  std::unique_lock lock(mutex_);
  const std::uint64_t end_before = end_;
  std::deque<Taken>& taken = shards_[shard_id];
  if (taken.size() > records.size() ||
      (!taken.empty() && taken.front().sequence_number != records.front().sequence_number)) {
    throw Error(ErrorCode::internal, "stream feed: records offered out of turn for shard " + shard_id);
  }
  publish(lock);  // what on_entries refused before goes first
  for (std::size_t i = taken.size();
       i < records.size() && entries_.size() + ready_.size() < options_.capacity && bytes_ < options_.capacity_bytes; ++i) {
    bool part = false;
    std::optional<AssembledEntry> entry = assembler_.add(records[i], &part);
    taken.push_back({records[i].sequence_number, part, 0});
    if (part) parts_.emplace(records[i].sequence_number, &taken.back());
    if (entry) {
      bytes_ += entry->json.size();
      ready_.push_back(std::move(*entry));
    }
  }
  publish(lock);
  std::size_t done = 0;
  while (!taken.empty() && is_done(taken.front())) {
    taken.pop_front();
    ++done;
  }
  const bool appended = end_ != end_before;
  lock.unlock();
  if (appended) listener_.call();
  return done;
}

void StreamFeed::publish(std::unique_lock<std::mutex>& lock) {
  if (ready_.empty()) return;
  std::vector<AssembledEntry> batch = std::move(ready_);
  ready_.clear();
  if (options_.on_entries) {
    lock.unlock();
    try {
      options_.on_entries(batch);
    } catch (...) {
      lock.lock();
      ready_ = std::move(batch);  // nothing was added meanwhile: take() runs on one thread
      throw;
    }
    lock.lock();
  }
  for (AssembledEntry& entry : batch) {
    const std::uint64_t seq = ++end_;
    for (const std::string& record : entry.sequence_numbers) {
      if (auto it = parts_.find(record); it != parts_.end()) {
        it->second->seq = seq;
        parts_.erase(it);
      }
    }
    entries_.push_back({seq, std::move(entry.key), std::move(entry.json)});
  }
}

void StreamFeed::forget(const std::string& shard_id) {
  std::lock_guard lock(mutex_);
  auto shard = shards_.find(shard_id);
  if (shard == shards_.end()) return;
  for (const Taken& t : shard->second) {
    if (t.part && t.seq == 0) {
      parts_.erase(t.sequence_number);
      assembler_.drop(t.sequence_number);  // read again from the checkpoint if the shard comes back
    }
  }
  shards_.erase(shard);
}

std::size_t StreamFeed::size() const {
  std::lock_guard lock(mutex_);
  return entries_.size();
}

std::size_t StreamFeed::waiting() const {
  std::lock_guard lock(mutex_);
  return parts_.size();
}

std::vector<FeedEntry> StreamFeed::read(std::uint64_t after, std::size_t limit) {
  std::lock_guard lock(mutex_);
  std::vector<FeedEntry> out;
  for (std::size_t i = after > trimmed_ ? after - trimmed_ : 0; i < entries_.size() && out.size() < limit; ++i) {
    out.push_back(entries_[i]);
  }
  return out;
}

bool StreamFeed::pressed() {
  std::lock_guard lock(mutex_);
  if (entries_.size() + ready_.size() >= options_.capacity / 4 * 3 || bytes_ >= options_.capacity_bytes / 4 * 3) return true;
  // A shard's records whose entries are trimmed are done, though they leave `taken` only at the
  // reader's next take(): they do not count.
  return std::any_of(shards_.begin(), shards_.end(), [&](const auto& shard) {
    const std::deque<Taken>& taken = shard.second;
    if (taken.size() < options_.shard_records / 4 * 3) return false;
    const auto undone = std::find_if(taken.begin(), taken.end(), [&](const Taken& t) { return !is_done(t); });
    return static_cast<std::size_t>(taken.end() - undone) >= options_.shard_records / 4 * 3;
  });
}

void StreamFeed::trim(std::uint64_t up_to) {
  std::lock_guard lock(mutex_);
  up_to = std::min(up_to, end_);
  while (!entries_.empty() && entries_.front().seq <= up_to) {
    bytes_ -= entries_.front().json.size();
    entries_.pop_front();
  }
  trimmed_ = std::max(trimmed_, up_to);
}

std::uint64_t StreamFeed::end() {
  std::lock_guard lock(mutex_);
  return end_;
}

std::optional<std::uint64_t> StreamFeed::checkpoint(std::string_view registration) {
  std::lock_guard lock(mutex_);
  // One this process has not seen (it has just started) starts at the first entry it holds:
  // the entries read again from the shards' stored checkpoints, which it may not have had.
  auto it = checkpoints_.find(registration);
  return it == checkpoints_.end() ? trimmed_ : it->second;
}

void StreamFeed::put_checkpoint(std::string_view registration, std::uint64_t seq) {
  std::lock_guard lock(mutex_);
  checkpoints_.insert_or_assign(std::string(registration), seq);
}

void StreamFeed::set_listener(std::function<void()> listener) { listener_.set(std::move(listener)); }

}  // namespace deviceshadow::notify::stream
