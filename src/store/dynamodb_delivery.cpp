// The DynamoDB store's delivery state (DeliveryStore): registrations, dead letters and claims,
// each kind in partitions of its own (docs/storage.md, "Items"). The change feed is the table's
// stream (notify/stream), not an outbox.
#include "store/dynamodb.hpp"

#include <set>

namespace deviceshadow {

using namespace dynamodb;

namespace {

// Every notification registration is one item of this partition, its id the sort key; no
// thing's partition can collide with it ("DS#…", "DH#…").
constexpr std::string_view kRegistrationsPk = "NR#";
// A claim (DeliveryStore::claim): one item per claimed id, deleted by DynamoDB's TTL after it
// expires.
constexpr std::string_view kClaimsPkPrefix = "MC#";
std::string claim_pk(std::string_view id) { return std::string(kClaimsPkPrefix) + std::string(id); }
constexpr std::string_view kClaimSk = "C";
// A registration's dead letters: one partition per registration, the event id the sort key.
constexpr std::string_view kDeadLettersPkPrefix = "NDL#";
std::string dead_letters_pk(std::string_view registration) {
  return std::string(kDeadLettersPkPrefix) + std::string(registration);
}

}  // namespace

// Expired claims go with them: a claim expires like a dead letter, by its `expires`.
std::size_t DynamoDbStore::purge_dead_letters(std::int64_t now_ns) {
  return purge_expired(now_ns, {kDeadLettersPkPrefix, kClaimsPkPrefix});
}

void DynamoDbStore::put_registration(const RegistrationRecord& r) {
  call("PutItem",
       json::object{{"TableName", options_.table},
                    {"Item", json::object{{"PK", S(kRegistrationsPk)}, {"SK", S(r.id)}, {"document", S(r.json)},
                                          {"updated", N(r.updated_ns)}}}},
       true);
}

std::vector<RegistrationRecord> DynamoDbStore::list_registrations() {
  json::object q = base_query(std::string(kRegistrationsPk));
  q["KeyConditionExpression"] = "PK = :pk";
  std::vector<RegistrationRecord> out;
  for (;;) {
    json::value page = call("Query", q, true);
    for (const json::value& v : page.at("Items").as_array()) {
      const json::object& item = v.as_object();
      out.push_back({get_s(item, "SK"), get_s(item, "document"), get_n(item, "updated")});
    }
    const json::value* last = page.as_object().if_contains("LastEvaluatedKey");
    if (!last) break;
    q["ExclusiveStartKey"] = *last;
  }
  return out;
}

bool DynamoDbStore::remove_registration(std::string_view id) {
  json::value old = call("DeleteItem",
                         json::object{{"TableName", options_.table},
                                      {"Key", json::object{{"PK", S(kRegistrationsPk)}, {"SK", S(id)}}},
                                      {"ReturnValues", "ALL_OLD"}},
                         true);
  remove_dead_letters(id, std::nullopt);
  return old.as_object().contains("Attributes");
}

bool DynamoDbStore::claim(std::string_view id, std::string_view owner, std::int64_t now_ns, std::int64_t expires_ns) {
  const json::object request{
      {"TableName", options_.table},
      {"Item", json::object{{"PK", S(claim_pk(id))}, {"SK", S(kClaimSk)}, {"owner", S(owner)},
                            {"expires", N(expires_ns)}, {"ttl", N(ttl_seconds(expires_ns))}}},
      {"ConditionExpression", "attribute_not_exists(PK) OR expires < :now OR #owner = :owner"},
      {"ExpressionAttributeNames", json::object{{"#owner", "owner"}}},
      {"ExpressionAttributeValues", json::object{{":now", N(now_ns)}, {":owner", S(owner)}}}};
  try {
    client_->call("PutItem", to_json(request), true);
    return true;
  } catch (const AwsError& e) {
    if (e.type() == "ConditionalCheckFailedException") return false;
    throw translate(e);
  }
}

// Checkpoints of a DynamoDB table's feed are kept per stream shard, not per registration.
std::optional<std::uint64_t> DynamoDbStore::checkpoint(std::string_view) {
  throw Error(ErrorCode::unavailable, "a DynamoDB table's change feed is its stream, not an outbox");
}

void DynamoDbStore::put_checkpoint(std::string_view, std::uint64_t) {
  throw Error(ErrorCode::unavailable, "a DynamoDB table's change feed is its stream, not an outbox");
}

void DynamoDbStore::batch_write_chunks(std::size_t count, const std::function<void(std::string&, std::size_t)>& append,
                                       std::string_view what) {
  constexpr std::size_t kBatch = 25;  // DynamoDB's limit
  for (std::size_t next = 0; next < count;) {
    std::string request = "{";
    open(request, "RequestItems", '{');
    open(request, options_.table, '[');
    for (const std::size_t end = std::min(count, next + kBatch); next < end; ++next) {
      request += '{';
      append(request, next);
      close(request, '}');
    }
    close(request, ']');
    close(request, '}');
    batch_write_all(finish(std::move(request)), what);
  }
}

void DynamoDbStore::batch_delete(const std::string& pk, std::span<const std::string> sort_keys, std::string_view what) {
  batch_write_chunks(
      sort_keys.size(),
      [&](std::string& out, std::size_t i) {
        open(out, "DeleteRequest", '{');
        member_key(out, pk, sort_keys[i]);
        close(out, '}');
      },
      what);
}

void DynamoDbStore::delete_partition(const std::string& pk, std::string_view what) {
  json::object q = base_query(pk);
  q["KeyConditionExpression"] = "PK = :pk";
  q["ProjectionExpression"] = "SK";
  for (;;) {
    json::value page = call("Query", q, true);
    std::vector<std::string> found;
    for (const json::value& v : page.at("Items").as_array()) found.push_back(get_s(v.as_object(), "SK"));
    batch_delete(pk, found, what);
    const json::value* last = page.as_object().if_contains("LastEvaluatedKey");
    if (!last) return;
    q["ExclusiveStartKey"] = *last;
  }
}

// BatchWriteItem, 25 at a time; a letter named twice is put once, as its last.
void DynamoDbStore::put_dead_letters(std::span<const DeadLetter> letters) {
  std::map<std::pair<std::string_view, std::string_view>, std::size_t> last;  // registration, event id
  for (std::size_t i = 0; i < letters.size(); ++i) last[{letters[i].registration, letters[i].event_id}] = i;
  std::vector<const DeadLetter*> distinct;
  for (std::size_t i = 0; i < letters.size(); ++i) {
    if (last.at({letters[i].registration, letters[i].event_id}) == i) distinct.push_back(&letters[i]);
  }
  batch_write_chunks(
      distinct.size(),
      [&](std::string& out, std::size_t i) {
        const DeadLetter& d = *distinct[i];
        open(out, "PutRequest", '{');
        open(out, "Item", '{');
        member_s(out, "PK", dead_letters_pk(d.registration));
        member_s(out, "SK", d.event_id);
        member_s(out, "event", d.event);
        member_n(out, "attempts", d.attempts);
        member_s(out, "lastError", d.last_error);
        member_n(out, "failed", d.failed_ns);
        if (d.expires_ns != INT64_MAX) {  // dropped by the table's TTL some time after it expires
          member_n(out, "expires", d.expires_ns);
          member_n(out, "ttl", ttl_seconds(d.expires_ns));
        }
        close(out, '}');
        close(out, '}');
      },
      "dead letters");
}

std::vector<DeadLetter> DynamoDbStore::dead_letters(std::string_view registration, std::string_view after, std::size_t limit) {
  json::object q = base_query(dead_letters_pk(registration));
  q["KeyConditionExpression"] = "PK = :pk";
  if (!after.empty()) {  // a key condition may not compare with an empty string
    q["KeyConditionExpression"] = "PK = :pk AND SK > :after";
    q["ExpressionAttributeValues"].as_object()[":after"] = S(after);
  }
  std::vector<DeadLetter> out;
  while (out.size() < limit) {
    q["Limit"] = static_cast<std::int64_t>(std::min<std::size_t>(limit - out.size(), 1000));
    json::value page = call("Query", q, true);
    for (const json::value& v : page.at("Items").as_array()) {
      const json::object& item = v.as_object();
      out.push_back({std::string(registration), get_s(item, "SK"), get_s(item, "event"),
                     static_cast<int>(get_n(item, "attempts")), get_s(item, "lastError"), get_n(item, "failed"),
                     item.contains("expires") ? get_n(item, "expires") : INT64_MAX});
    }
    const json::value* last = page.as_object().if_contains("LastEvaluatedKey");
    if (!last) break;
    q["ExclusiveStartKey"] = *last;
  }
  return out;
}

// A Query that counts (DynamoDB reads the items but sends none).
std::uint64_t DynamoDbStore::count_dead_letters(std::string_view registration) {
  json::object q = base_query(dead_letters_pk(registration));
  q["KeyConditionExpression"] = "PK = :pk";
  q["Select"] = "COUNT";
  std::uint64_t n = 0;
  for (;;) {
    json::value page = call("Query", q, true);
    n += static_cast<std::uint64_t>(page.at("Count").to_number<std::int64_t>());
    const json::value* last = page.as_object().if_contains("LastEvaluatedKey");
    if (!last) return n;
    q["ExclusiveStartKey"] = *last;
  }
}

// All: their keys are queried a page at a time and deleted 25 to a BatchWriteItem. Named: one
// is a DeleteItem; more are looked up (BatchGetItem of their keys) and the existing deleted so.
std::size_t DynamoDbStore::remove_dead_letters(std::string_view registration,
                                               std::optional<std::span<const std::string>> event_ids) {
  const std::string pk = dead_letters_pk(registration);
  std::vector<std::string> found;  // sort keys of existing letters
  auto delete_found = [&] { batch_delete(pk, found, "dead letters"); };
  std::size_t removed = 0;
  if (!event_ids) {
    json::object q = base_query(pk);
    q["KeyConditionExpression"] = "PK = :pk";
    q["ProjectionExpression"] = "SK";
    for (;;) {
      json::value page = call("Query", q, true);
      found.clear();
      for (const json::value& v : page.at("Items").as_array()) found.push_back(get_s(v.as_object(), "SK"));
      delete_found();
      removed += found.size();
      const json::value* last = page.as_object().if_contains("LastEvaluatedKey");
      if (!last) return removed;
      q["ExclusiveStartKey"] = *last;
    }
  }
  std::set<std::string_view> ids(event_ids->begin(), event_ids->end());
  if (ids.size() == 1) {
    json::value old = call("DeleteItem",
                           json::object{{"TableName", options_.table},
                                        {"Key", json::object{{"PK", S(pk)}, {"SK", S(*ids.begin())}}},
                                        {"ReturnValues", "ALL_OLD"}},
                           true);
    return old.as_object().contains("Attributes") ? 1 : 0;
  }
  std::vector<std::string_view> named(ids.begin(), ids.end());
  for (std::size_t start = 0; start < named.size(); start += options_.max_read_batch) {
    json::array keys;
    for (std::size_t i = start; i < std::min(named.size(), start + options_.max_read_batch); ++i) {
      keys.push_back(json::object{{"PK", S(pk)}, {"SK", S(named[i])}});
    }
    std::map<std::pair<std::string, std::string>, json::object> items;
    batch_get(std::move(keys), items, "PK, SK");
    for (const auto& [key, item] : items) found.push_back(key.second);
  }
  delete_found();
  return found.size();
}

// The table's stream is its change feed; write.feed is not stored.
std::vector<FeedEntry> DynamoDbStore::read_feed(std::uint64_t, std::size_t) {
  throw Error(ErrorCode::unavailable, "a DynamoDB table's change feed is its stream, not an outbox");
}

void DynamoDbStore::trim_feed(std::uint64_t) {
  throw Error(ErrorCode::unavailable, "a DynamoDB table's change feed is its stream, not an outbox");
}

std::uint64_t DynamoDbStore::feed_end() {
  throw Error(ErrorCode::unavailable, "a DynamoDB table's change feed is its stream, not an outbox");
}

}  // namespace deviceshadow
