#include "notify/stream/shard_reader.hpp"

#include "notify/stream/leases.hpp"

#include <algorithm>

namespace deviceshadow::notify::stream {

ShardReader::ShardReader(StreamsApi& streams, std::string stream_arn, std::string shard_id, std::string checkpoint,
                         Checkpointer store_checkpoint, StreamCounters& counters, StreamLog log, int page_limit,
                         std::size_t max_pending)
    : streams_(streams),
      stream_arn_(std::move(stream_arn)),
      shard_id_(std::move(shard_id)),
      checkpoint_(std::move(checkpoint)),
      position_(checkpoint_),
      store_checkpoint_(std::move(store_checkpoint)),
      counters_(counters),
      log_(std::move(log)),
      page_limit_(page_limit),
      max_pending_(std::max<std::size_t>(max_pending, 1)) {}

void ShardReader::trimmed(std::string_view what) {
  ++counters_.trimmed;
  if (log_) {
    log_(true, "stream records were trimmed before they were read: their changes will not be notified",
         {{"shard", shard_id_}, {"checkpoint", checkpoint_}, {"position", position_}, {"detected_by", std::string(what)}});
  }
}

void ShardReader::open_iterator() {
  try {
    if (position_ == kTrimHorizon) {
      iterator_ = streams_.shard_iterator(stream_arn_, shard_id_, IteratorType::trim_horizon);
    } else if (position_ == kLatest) {
      iterator_ = streams_.shard_iterator(stream_arn_, shard_id_, IteratorType::latest);
    } else {
      iterator_ = streams_.shard_iterator(stream_arn_, shard_id_, IteratorType::after_sequence, position_);
    }
  } catch (const StreamError& e) {
    if (e.kind() == StreamErrorKind::trimmed_data) {  // the position is older than the stream keeps
      trimmed("GetShardIterator: TrimmedDataAccessException");
      iterator_ = streams_.shard_iterator(stream_arn_, shard_id_, IteratorType::trim_horizon);
    } else if (e.kind() == StreamErrorKind::not_found) {  // the whole shard aged out of the stream
      trimmed("GetShardIterator: ResourceNotFoundException (the shard is gone)");
      iterator_.reset();
      at_end_ = true;
    } else {
      throw;
    }
  }
}

bool ShardReader::store(std::string checkpoint) {
  unstored_ = checkpoint;
  if (!store_checkpoint_(checkpoint)) return false;
  unstored_.reset();
  finished_ = checkpoint == kShardEnd;
  checkpoint_ = std::move(checkpoint);
  return true;
}

ShardReader::Step ShardReader::poll(const RecordHandler& handler) {
  if (unstored_ && !store(*unstored_)) return Step::lease_lost;
  if (finished_) return Step::shard_end;
  bool fetched = false;
  if (pending_.size() < max_pending_ && !at_end_) {
    try {
      if (!iterator_) open_iterator();
      if (iterator_) {
        RecordsPage page = streams_.records(*iterator_, page_limit_);
        iterator_ = std::move(page.next_iterator);
        at_end_ = !iterator_;
        // Never hand out a record twice, whatever the iterator did; pass over lease items.
        const bool numeric = position_ != kTrimHorizon && position_ != kLatest;
        for (StreamRecord& r : page.records) {
          if (numeric && compare_sequence(r.sequence_number, position_) <= 0) continue;
          position_ = r.sequence_number;
          fetched = true;
          if (!is_lease_record(r)) pending_.push_back(std::move(r));
        }
      }
    } catch (const StreamError& e) {
      switch (e.kind()) {
        case StreamErrorKind::expired_iterator:  // renewed from where reading got, at once
          ++counters_.expired_iterators;
          iterator_.reset();
          return Step::progressed;
        case StreamErrorKind::trimmed_data:  // continue at the oldest record kept (after position_)
          trimmed("GetRecords: TrimmedDataAccessException");
          iterator_ = streams_.shard_iterator(stream_arn_, shard_id_, IteratorType::trim_horizon);
          return Step::progressed;
        case StreamErrorKind::retryable:
          ++counters_.throttled;
          return Step::retry_later;
        default: throw;
      }
    }
  }
  if (!pending_.empty()) {
    const std::size_t done = std::min(handler(shard_id_, pending_), pending_.size());
    if (done == 0) return fetched ? Step::progressed : Step::idle;
    // The handler has them: they leave pending_ before the checkpoint is stored, which may throw.
    const std::string sequence = pending_[done - 1].sequence_number;
    counters_.records += done;
    pending_.erase(pending_.begin(), pending_.begin() + static_cast<std::ptrdiff_t>(done));
    return store(sequence) ? Step::progressed : Step::lease_lost;
  }
  if (at_end_) return store(std::string(kShardEnd)) ? Step::shard_end : Step::lease_lost;
  return fetched ? Step::progressed : Step::idle;
}

}  // namespace deviceshadow::notify::stream
