// Leases of the stream's shards, kept as items of the shadows' own DynamoDB table, so that
// several shadowd on one table share the reading of its stream (docs/storage.md, "Lease items";
// docs/notifications.md, "DynamoDB: the stream consumer").
//
// One item per shard: PK "NL#{stream label}", SK the shard id, with the owner (absent when
// free), a lease counter (+1 on every write of the item), the checkpoint and the parent shard
// ids. Every write after the item's creation is conditional on the counter the writer saw (and
// on the owner), so two instances can never both believe they hold a lease: the loser of a race
// sees its condition fail. Liveness is judged by the counter, never by clocks compared across
// machines: a lease whose counter has not moved for `lease_timeout` of this instance's own
// clock is expired, and anybody may take it.
#pragma once

#include "notify/stream/streams_api.hpp"

#include <chrono>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace deviceshadow::aws {
class JsonClient;
}

namespace deviceshadow::notify::stream {

// Checkpoints that are not sequence numbers.
inline constexpr std::string_view kTrimHorizon = "TRIM_HORIZON";  // read the shard from its oldest record
inline constexpr std::string_view kLatest = "LATEST";             // read what is written from now on
inline constexpr std::string_view kShardEnd = "SHARD_END";        // the shard is closed and read to its end

// Whether a stream record is of a lease item: the leases live in the table whose stream they
// lease, so their own writes appear on it; readers pass over them.
bool is_lease_record(const StreamRecord& record);

struct Lease {
  std::string shard_id;
  std::string owner;  // empty: free
  std::uint64_t counter = 0;
  std::string checkpoint;  // a sequence number, kTrimHorizon, kLatest or kShardEnd
  std::vector<std::string> parents;
  std::int64_t heartbeat_ns = 0;  // wall time of the last write (for operators; not used to decide)

  bool finished() const { return checkpoint == kShardEnd; }
};

// The lease items of one stream in one table. Each write returns false when its condition
// failed (somebody else wrote the lease since); other failures throw StreamError.
class LeaseTable {
 public:
  // `dynamodb` is a client of the DynamoDB API (target prefix "DynamoDB_20120810.").
  LeaseTable(aws::JsonClient& dynamodb, std::string table, const std::string& stream_arn);

  // The partition key of the stream's leases: "NL#" and the stream's label (the ARN's last
  // part), so that a table's new stream starts with leases of its own.
  static std::string partition_of(const std::string& stream_arn);

  std::vector<Lease> list();  // strongly consistent, in shard id order
  bool create(const Lease& lease);  // only if no item exists for the shard
  // Sets the owner, conditional on the counter (and owner) in `seen`; returns the lease now held.
  std::optional<Lease> take(const Lease& seen, const std::string& owner);
  // Writes of a held lease, conditional on its owner and counter; on success `held.counter`
  // (and the checkpoint) follow what was written. Every write here is idempotent: a resend of
  // one that was applied, its answer lost, is found written (not a lost lease).
  bool renew(Lease& held);
  bool checkpoint(Lease& held, const std::string& checkpoint);  // kShardEnd also frees the lease
  bool release(Lease& held);

 private:
  std::optional<Lease> update(const Lease& expected, const std::string& set, json::object values, bool free);

  aws::JsonClient& dynamodb_;
  std::string table_;
  std::string partition_;
};

struct CoordinatorOptions {
  std::string owner;  // this instance's id, unique among the instances sharing the table (required)
  std::chrono::milliseconds lease_timeout{10000};  // a lease not renewed for this long is expired
  std::chrono::milliseconds renew_interval{3000};  // how often held leases are renewed
  // Where the shards found at the consumer's very first start (no lease items yet) begin:
  // kLatest (what is written from now on; closed shards count as read) or kTrimHorizon.
  // Shards first seen later always begin at kTrimHorizon.
  std::string initial_position{kLatest};
  std::function<std::chrono::steady_clock::time_point()> clock = [] { return std::chrono::steady_clock::now(); };
};

// Decides which leases this instance holds. round() is called periodically: it creates lease
// items for new shards, renews the held leases, takes free and expired ones, and steals at
// most one per round from the most loaded instance, aiming at ceil(active shards / live
// instances) leases each. A shard is active while it is not read to its end and all its
// parents are (or are unknown: trimmed away). Thread-safe.
class LeaseCoordinator {
 public:
  LeaseCoordinator(StreamsApi& streams, LeaseTable& leases, std::string stream_arn, CoordinatorOptions options);

  struct RoundResult {
    std::vector<std::string> taken;  // shards newly held (read from their lease's checkpoint)
    std::vector<std::string> lost;   // shards no longer held (taken by another, or gone)
  };
  RoundResult round();  // throws StreamError (the caller retries at its next round)

  std::vector<Lease> held() const;  // the leases held now, in shard id order
  std::optional<Lease> held(const std::string& shard_id) const;
  // Stores a checkpoint of a held lease. False when the lease is no longer held (the reader
  // must stop). kShardEnd marks the shard done and frees its lease.
  bool checkpoint(const std::string& shard_id, const std::string& checkpoint);
  // Frees every held lease (on an orderly stop), so others take over without waiting.
  void release_all();

  const CoordinatorOptions& options() const { return options_; }

 private:
  struct Seen {
    std::uint64_t counter = 0;
    std::string owner;
    std::chrono::steady_clock::time_point since;  // when this instance first saw that counter
  };
  void discover(std::vector<Lease>& leases);
  RoundResult turn();  // round() but for reporting the lost leases (lost_)
  bool expired(const Lease& lease, std::chrono::steady_clock::time_point now) const;

  StreamsApi& streams_;
  LeaseTable& leases_;
  std::string stream_arn_;
  CoordinatorOptions options_;
  mutable std::mutex mutex_;
  std::map<std::string, Lease> held_;
  // Leases found lost and not yet reported: a round that fails after finding some reports them
  // with the next round that completes, so that their readers are stopped all the same.
  std::vector<std::string> lost_;
  std::map<std::string, Seen> seen_;
  std::chrono::steady_clock::time_point last_renewal_{};
};

}  // namespace deviceshadow::notify::stream
