#include "notify/stream/leases.hpp"

#include "aws/attribute_value.hpp"
#include "aws/client.hpp"

#include <algorithm>
#include <stdexcept>

namespace deviceshadow::notify::stream {
namespace {

std::int64_t wall_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

json::object S(std::string_view s) { return {{"S", json::string(s)}}; }
json::object N(std::uint64_t n) { return {{"N", std::to_string(n)}}; }

using aws::get_s;
std::uint64_t get_n(const json::object& item, std::string_view name) { return static_cast<std::uint64_t>(aws::get_n(item, name)); }

Lease lease_of(const json::object& item) {
  Lease l;
  l.shard_id = get_s(item, "SK");
  l.owner = get_s(item, "owner");
  l.counter = get_n(item, "counter");
  l.checkpoint = get_s(item, "checkpoint");
  l.heartbeat_ns = static_cast<std::int64_t>(get_n(item, "heartbeat"));
  if (const json::value* parents = item.if_contains("parents")) {
    for (const json::value& p : parents->at("L").as_array()) l.parents.emplace_back(p.at("S").as_string());
  }
  return l;
}

}  // namespace

bool is_lease_record(const StreamRecord& record) {
  const json::value* pk = record.keys.if_contains("PK");
  const json::value* s = pk && pk->is_object() ? pk->get_object().if_contains("S") : nullptr;
  return s && s->is_string() && s->get_string().starts_with("NL#");
}

LeaseTable::LeaseTable(aws::JsonClient& dynamodb, std::string table, const std::string& stream_arn)
    : dynamodb_(dynamodb), table_(std::move(table)), partition_(partition_of(stream_arn)) {}

std::string LeaseTable::partition_of(const std::string& stream_arn) {
  const auto at = stream_arn.rfind("/stream/");
  return "NL#" + (at == std::string::npos ? stream_arn : stream_arn.substr(at + 8));
}

namespace {
json::value call(aws::JsonClient& client, std::string_view operation, const json::object& body) {
  try {
    return client.call(operation, to_json(body), /*idempotent=*/true);  // conditional: a resend cannot apply twice
  } catch (const aws::AwsError& e) {
    if (e.type() == "ConditionalCheckFailedException") throw;
    throw classify(e);
  }
}
}  // namespace

std::vector<Lease> LeaseTable::list() {
  std::vector<Lease> out;
  json::object query{{"TableName", table_},
                     {"KeyConditionExpression", "PK = :pk"},
                     {"ExpressionAttributeValues", json::object{{":pk", S(partition_)}}},
                     {"ConsistentRead", true}};
  for (;;) {
    const json::value page = call(dynamodb_, "Query", query);
    for (const json::value& item : page.at("Items").as_array()) out.push_back(lease_of(item.as_object()));
    const json::value* last = page.as_object().if_contains("LastEvaluatedKey");
    if (!last) return out;
    query["ExclusiveStartKey"] = *last;
  }
}

bool LeaseTable::create(const Lease& lease) {
  json::object item{{"PK", S(partition_)},       {"SK", S(lease.shard_id)},   {"counter", N(0)},
                    {"checkpoint", S(lease.checkpoint)}, {"heartbeat", N(static_cast<std::uint64_t>(wall_ns()))}};
  if (!lease.parents.empty()) {
    json::array parents;
    for (const std::string& p : lease.parents) parents.push_back(S(p));
    item["parents"] = json::object{{"L", std::move(parents)}};
  }
  try {
    call(dynamodb_, "PutItem",
         json::object{{"TableName", table_}, {"Item", std::move(item)}, {"ConditionExpression", "attribute_not_exists(PK)"}});
    return true;
  } catch (const aws::AwsError&) {  // only ConditionalCheckFailedException gets here
    return false;
  }
}

std::optional<Lease> LeaseTable::update(const Lease& expected, const std::string& set, json::object values, bool free) {
  const std::int64_t heartbeat = wall_ns();
  values[":seen"] = N(expected.counter);
  values[":next"] = N(expected.counter + 1);
  values[":hb"] = N(static_cast<std::uint64_t>(heartbeat));
  std::string condition = "#counter = :seen AND ";
  if (expected.owner.empty()) {
    condition += "attribute_not_exists(#owner)";
  } else {
    condition += "#owner = :seenOwner";
    values[":seenOwner"] = S(expected.owner);
  }
  json::object names{{"#owner", "owner"}, {"#counter", "counter"}};
  if (set.find("#checkpoint") != std::string::npos) names["#checkpoint"] = "checkpoint";  // unused names are refused
  std::string expression = "SET #counter = :next, heartbeat = :hb";
  if (!set.empty()) expression += ", " + set;
  if (free) expression += " REMOVE #owner";
  json::object request{{"TableName", table_},
                       {"Key", json::object{{"PK", S(partition_)}, {"SK", S(expected.shard_id)}}},
                       {"UpdateExpression", expression},
                       {"ConditionExpression", condition},
                       {"ExpressionAttributeNames", std::move(names)},
                       {"ExpressionAttributeValues", std::move(values)},
                       {"ReturnValues", "ALL_NEW"}};
  try {
    return lease_of(call(dynamodb_, "UpdateItem", request).at("Attributes").as_object());
  } catch (const aws::AwsError&) {  // only ConditionalCheckFailedException gets here
    // The client resends a request whose answer it lost (a timeout): if the first send was
    // applied, the resend fails its condition. The lease then holds this write's counter and
    // heartbeat (a time in ns no other write of the lease carries): it was written.
    const json::value item = call(dynamodb_, "GetItem",
                                  json::object{{"TableName", table_},
                                               {"Key", json::object{{"PK", S(partition_)}, {"SK", S(expected.shard_id)}}},
                                               {"ConsistentRead", true}});
    const json::value* attributes = item.as_object().if_contains("Item");
    if (!attributes) return std::nullopt;
    Lease now = lease_of(attributes->as_object());
    if (now.counter != expected.counter + 1 || now.heartbeat_ns != heartbeat) return std::nullopt;
    return now;
  }
}

std::optional<Lease> LeaseTable::take(const Lease& seen, const std::string& owner) {
  return update(seen, "#owner = :owner", json::object{{":owner", S(owner)}}, false);
}

bool LeaseTable::renew(Lease& held) {
  std::optional<Lease> now = update(held, "", {}, false);
  if (now) held = *now;
  return now.has_value();
}

bool LeaseTable::checkpoint(Lease& held, const std::string& checkpoint) {
  std::optional<Lease> now =
      update(held, "#checkpoint = :checkpoint", json::object{{":checkpoint", S(checkpoint)}}, checkpoint == kShardEnd);
  if (now) held = *now;
  return now.has_value();
}

bool LeaseTable::release(Lease& held) {
  std::optional<Lease> now = update(held, "", {}, true);
  if (now) held = *now;
  return now.has_value();
}

// ---- the coordinator ------------------------------------------------------------------

LeaseCoordinator::LeaseCoordinator(StreamsApi& streams, LeaseTable& leases, std::string stream_arn,
                                   CoordinatorOptions options)
    : streams_(streams), leases_(leases), stream_arn_(std::move(stream_arn)), options_(std::move(options)) {
  if (options_.owner.empty()) throw std::invalid_argument("a lease coordinator needs an owner id");
}

void LeaseCoordinator::discover(std::vector<Lease>& leases) {
  const StreamDescription stream = streams_.describe_stream(stream_arn_);
  const bool first_start = leases.empty();
  bool attempted = false;
  for (const Shard& shard : stream.shards) {
    const bool known = std::any_of(leases.begin(), leases.end(), [&](const Lease& l) { return l.shard_id == shard.id; });
    if (known) continue;
    Lease lease;
    lease.shard_id = shard.id;
    if (!shard.parent_id.empty()) lease.parents.push_back(shard.parent_id);
    if (!first_start || options_.initial_position == kTrimHorizon) {
      lease.checkpoint = kTrimHorizon;
    } else {  // the very first start at LATEST: what was written before it is not owed
      lease.checkpoint = shard.closed() ? kShardEnd : kLatest;
    }
    leases_.create(lease);
    attempted = true;
  }
  // Creations may have raced with another instance's: read back what the table holds.
  if (attempted) leases = leases_.list();
}

bool LeaseCoordinator::expired(const Lease& lease, std::chrono::steady_clock::time_point now) const {
  auto it = seen_.find(lease.shard_id);
  return it != seen_.end() && now - it->second.since >= options_.lease_timeout;
}

LeaseCoordinator::RoundResult LeaseCoordinator::round() {
  std::lock_guard lock(mutex_);
  RoundResult result = turn();
  result.lost = std::exchange(lost_, {});
  return result;
}

LeaseCoordinator::RoundResult LeaseCoordinator::turn() {
  RoundResult result;
  const auto now = options_.clock();
  std::vector<Lease> leases = leases_.list();
  discover(leases);

  std::map<std::string, const Lease*> by_shard;
  for (const Lease& l : leases) {
    by_shard[l.shard_id] = &l;
    Seen& s = seen_[l.shard_id];
    if (s.since == std::chrono::steady_clock::time_point{} || s.counter != l.counter || s.owner != l.owner) {
      s = {l.counter, l.owner, now};
    }
  }

  // Held leases that another instance wrote since (taken over) or that vanished are lost.
  for (auto it = held_.begin(); it != held_.end();) {
    auto listed = by_shard.find(it->first);
    if (listed == by_shard.end() || listed->second->owner != options_.owner || listed->second->counter != it->second.counter) {
      lost_.push_back(it->first);
      it = held_.erase(it);
    } else {
      ++it;
    }
  }
  if (now - last_renewal_ >= options_.renew_interval) {
    last_renewal_ = now;
    for (auto it = held_.begin(); it != held_.end();) {
      if (leases_.renew(it->second)) {
        seen_[it->first] = {it->second.counter, it->second.owner, now};
        ++it;
      } else {
        lost_.push_back(it->first);
        it = held_.erase(it);
      }
    }
  }

  // The active shards: not read to their end, every known parent read to its end.
  std::vector<const Lease*> active;
  for (const Lease& l : leases) {
    if (l.finished()) continue;
    const bool parents_done = std::all_of(l.parents.begin(), l.parents.end(), [&](const std::string& p) {
      auto parent = by_shard.find(p);
      return parent == by_shard.end() || parent->second->finished();
    });
    if (parents_done) active.push_back(&l);
  }
  std::map<std::string, std::size_t> load;  // live instances other than this one -> active leases
  std::vector<const Lease*> available;      // free, expired, or left by an earlier life of this owner
  for (const Lease* l : active) {
    if (held_.contains(l->shard_id)) continue;
    if (l->owner.empty() || l->owner == options_.owner || expired(*l, now)) {
      available.push_back(l);
    } else {
      ++load[l->owner];
    }
  }
  const std::size_t instances = load.size() + 1;
  const std::size_t target = (active.size() + instances - 1) / instances;
  std::size_t mine = held_.size();
  if (mine >= target) return result;
  std::size_t need = target - mine;

  auto take = [&](const Lease& l) {
    Lease seen = l;
    if (std::optional<Lease> got = leases_.take(seen, options_.owner)) {
      seen_[l.shard_id] = {got->counter, got->owner, now};
      held_[l.shard_id] = std::move(*got);
      result.taken.push_back(l.shard_id);
      return true;
    }
    return false;
  };
  for (const Lease* l : available) {
    if (need == 0) break;
    if (take(*l)) --need;
  }
  if (!available.empty() || need == 0 || load.empty()) return result;

  // Steal one lease from the most loaded instance when it holds more than the target, or as
  // many while this one needs more than one to reach it.
  auto most = std::max_element(load.begin(), load.end(), [](const auto& a, const auto& b) { return a.second < b.second; });
  if (most->second > target || (most->second == target && need > 1)) {
    for (const Lease* l : active) {
      if (l->owner == most->first) {
        take(*l);
        break;
      }
    }
  }
  return result;
}

std::vector<Lease> LeaseCoordinator::held() const {
  std::lock_guard lock(mutex_);
  std::vector<Lease> out;
  for (const auto& [id, lease] : held_) out.push_back(lease);
  return out;
}

std::optional<Lease> LeaseCoordinator::held(const std::string& shard_id) const {
  std::lock_guard lock(mutex_);
  auto it = held_.find(shard_id);
  if (it == held_.end()) return std::nullopt;
  return it->second;
}

bool LeaseCoordinator::checkpoint(const std::string& shard_id, const std::string& checkpoint) {
  std::lock_guard lock(mutex_);
  auto it = held_.find(shard_id);
  if (it == held_.end()) return false;
  const bool written = leases_.checkpoint(it->second, checkpoint);
  if (written) seen_[shard_id] = {it->second.counter, it->second.owner, options_.clock()};
  if (!written || checkpoint == kShardEnd) held_.erase(it);
  return written;
}

void LeaseCoordinator::release_all() {
  std::lock_guard lock(mutex_);
  for (auto& [id, lease] : held_) leases_.release(lease);
  held_.clear();
}

}  // namespace deviceshadow::notify::stream
