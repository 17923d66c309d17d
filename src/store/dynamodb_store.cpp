// The DynamoDB store's shadows (Store): section items, the thing index and history; the request
// machinery both halves share; the table's creation. Its delivery state is in
// dynamodb_delivery.cpp.
#include "store/dynamodb.hpp"

#include "deviceshadow/backoff.hpp"

#include "aws/credentials.hpp"
#include "deviceshadow/arena.hpp"
#include "deviceshadow/error.hpp"
#include "deviceshadow/event_id.hpp"
#include "store/conditions.hpp"
#include "store/dynamodb_client.hpp"

#include <algorithm>
#include <cstdio>
#include <functional>
#include <future>
#include <iterator>
#include <limits>
#include <map>
#include <random>
#include <set>
#include <thread>
#include <tuple>

namespace deviceshadow {

using namespace dynamodb;

namespace {

constexpr int kShards = 16;
// History's time index GSI2 (docs/storage.md, "History in time order"): every history item is
// also in one of kHistoryIndexShards partitions of GSI2 (GSI2PK = HT#{shard}, the shard a stable
// hash of the shadow), sorted by its event id (GSI2SK), whose first 20 digits are its time. No
// key takes more than 1/kHistoryIndexShards of the table's history writes; a read in time order
// queries every shard and merges. A layout constant: every shadowd on a table must agree.
constexpr int kHistoryIndexShards = 4;
constexpr std::string_view kHistoryIndex = "GSI2";

// ---- request bodies (the shared part: store/dynamodb.hpp) ---------------------------
void member_bool(std::string& out, std::string_view name, bool value) {
  append_json_string(out, name);
  out += value ? R"(:{"BOOL":true},)" : R"(:{"BOOL":false},)";
}

// The AttributeValue of a JSON value; numbers keep the API's decimal form.
void append_attribute(std::string& out, const json::value& v) {
  switch (v.kind()) {
    case json::kind::null: out += R"({"NULL":true})"; return;
    case json::kind::bool_: out += v.get_bool() ? R"({"BOOL":true})" : R"({"BOOL":false})"; return;
    case json::kind::string:
      out += R"({"S":)";
      append_json_string(out, v.get_string());
      out += '}';
      return;
    case json::kind::int64:
    case json::kind::uint64:
    case json::kind::double_:
      out += R"({"N":")";
      append_json(out, v);
      out += "\"}";
      return;
    case json::kind::array:
      out += R"({"L":[)";
      for (const json::value& e : v.get_array()) {
        append_attribute(out, e);
        out += ',';
      }
      if (out.back() == ',') out.pop_back();
      out += "]}";
      return;
    case json::kind::object:
      out += R"({"M":{)";
      for (const auto& m : v.get_object()) {
        append_json_string(out, m.key());
        out += ':';
        append_attribute(out, m.value());
        out += ',';
      }
      if (out.back() == ',') out.pop_back();
      out += "}}";
      return;
  }
}

// A section's state (compact JSON text) as the attribute `name`.
void member_state(std::string& out, std::string_view name, const std::string& state_json) {
  unsigned char buffer[4096];  // most states fit; larger ones continue on the heap
  Arena arena(buffer, sizeof buffer);
  append_json_string(out, name);
  out += ':';
  append_attribute(out, parse_json(state_json, 512, &arena));
  out += ',';
}

json::value from_attribute(const json::value& av) {
  const json::object& o = av.as_object();
  // DynamoDB Local's stream images show an empty map as {} (without its "M").
  if (o.empty()) return json::object();
  if (o.size() != 1) throw Error(ErrorCode::internal, "dynamodb: malformed attribute value");
  const auto& [type, value] = *o.begin();
  if (type == "S") return value;
  if (type == "N") return parse_json(std::string_view(value.as_string()));
  if (type == "BOOL") return value;
  if (type == "NULL") return nullptr;
  if (type == "L") {
    json::array out;
    for (const json::value& e : value.as_array()) out.push_back(from_attribute(e));
    return out;
  }
  if (type == "M") {
    json::object out;
    for (const auto& m : value.as_object()) out.emplace(m.key(), from_attribute(m.value()));
    return out;
  }
  throw Error(ErrorCode::internal, "dynamodb: unsupported attribute type " + std::string(type));
}

// ---- keys (the delivery partitions, NR#, NDL#… and MC#…: dynamodb_delivery.cpp) ------
constexpr std::string_view kShadowPkPrefix = "DS#";
constexpr std::string_view kHistoryPkPrefix = "DH#";
std::string shadow_pk(std::string_view thing) { return std::string(kShadowPkPrefix) + std::string(thing); }
std::string history_pk(const ShadowKey& key) { return std::string(kHistoryPkPrefix) + key.thing + "#" + key.name; }
constexpr std::string_view kImagePkPrefix = "DI#";
std::string image_pk(const ShadowKey& key) { return std::string(kImagePkPrefix) + key.thing + "#" + key.name; }
std::string section_prefix(Section s) { return s == Section::reported ? "DSR#" : "DSD#"; }
constexpr std::string_view kCombinedPrefix = "DSC#";
constexpr std::string_view kThingIndexSk = "T#";
// While the change feed is on, a section item a write puts carries the write's change event
// (JSON text), so that its stream record says what the write was, or, on the reported item of a
// write of both sections in the separate layout, the write's whole feed entry, so that that one
// record is the whole write (docs/storage.md, "Items").
constexpr std::string_view kFeedEventAttribute = "feedEvent";
constexpr std::string_view kFeedEntryAttribute = "feedEntry";

// FNV-1a: a stable hash, so a thing always lands on the same GSI shard.
std::uint32_t fnv1a(std::string_view text, std::uint32_t h = 2166136261u) {
  for (unsigned char c : text) h = (h ^ c) * 16777619u;
  return h;
}
int shard_of(std::string_view thing) { return static_cast<int>(fnv1a(thing) % kShards); }
std::string history_index_pk(int shard) { return "HT#" + std::to_string(shard); }
std::string history_index_pk(const ShadowKey& key) {
  return history_index_pk(static_cast<int>(fnv1a(key.name, fnv1a("#", fnv1a(key.thing))) % kHistoryIndexShards));
}
// The shadow of a history item's PK, "DH#{thing}#{name}" (names have no '#', things may).
ShadowKey history_key(std::string_view pk) {
  pk.remove_prefix(kHistoryPkPrefix.size());
  const std::size_t hash = pk.rfind('#');
  return {std::string(pk.substr(0, hash)), std::string(pk.substr(hash + 1))};
}

// Section metadata as attributes: of a separate-layout item, or of the "{section}Meta" map
// of a combined item (whose version is the item's).
void member_section_attributes(std::string& out, const SectionRecord& r, bool with_version) {
  if (with_version) member_n(out, "version", r.version);
  member_n(out, "timestamp", r.timestamp_ns);
  member_s(out, "writeId", r.write_id);
  member_bool(out, "deleted", r.deleted);
  if (!r.client_token.empty()) member_s(out, "clientToken", r.client_token);
  if (!r.tz.empty()) member_s(out, "tz", r.tz);
  if (r.deleted) {
    member_n(out, "expires", r.expires_ns);
    member_n(out, "ttl", ttl_seconds(r.expires_ns));
  }
}

// `state` and `times` are the section's attributes of those (absent: nullptr).
SectionRecord section_from_attributes(const json::object& item, const json::value* state, const json::value* times) {
  SectionRecord r;
  r.version = static_cast<std::uint64_t>(get_n(item, "version"));
  r.timestamp_ns = get_n(item, "timestamp");
  r.write_id = get_s(item, "writeId");
  r.deleted = get_bool(item, "deleted");
  r.client_token = get_s(item, "clientToken");
  r.tz = get_s(item, "tz");
  r.expires_ns = get_n(item, "expires");
  r.state_json = state ? to_json(from_attribute(*state)) : "{}";
  if (times) r.times_json = times->at("S").as_string();
  return r;
}

// Both sections of a combined-layout item.
ShadowRecord combined_record(const json::object& item) {
  ShadowRecord record;
  const std::uint64_t version = static_cast<std::uint64_t>(get_n(item, "version"));
  for (Section s : {Section::reported, Section::desired}) {
    std::string name(to_string(s));
    SectionRecord& r = record.section(s);
    const json::value* times = item.if_contains(name + "Times");
    if (const json::value* meta = item.if_contains(name + "Meta")) {
      r = section_from_attributes(meta->at("M").as_object(), item.if_contains(name), times);
    } else if (const json::value* state = item.if_contains(name)) {
      r = section_from_attributes(item, state, times);  // its metadata is the item's own
    } else {
      r.deleted = true;  // never written: absent, but the shared version guards it
    }
    r.version = version;
  }
  return record;
}

// The change event inside a write's feed entry (FeedEntry: {"event":{…},"reported":…}),
// found without parsing the sections' states that follow it.
std::string_view feed_event(std::string_view feed) {
  constexpr std::string_view kPrefix = R"({"event":{)";
  if (feed.starts_with(kPrefix)) {
    int depth = 0;
    bool in_string = false;
    for (std::size_t i = kPrefix.size() - 1; i < feed.size(); ++i) {
      const char c = feed[i];
      if (in_string) {
        if (c == '\\') {
          ++i;
        } else if (c == '"') {
          in_string = false;
        }
      } else if (c == '"') {
        in_string = true;
      } else if (c == '{' || c == '[') {
        ++depth;
      } else if ((c == '}' || c == ']') && --depth == 0) {
        return feed.substr(kPrefix.size() - 1, i + 2 - kPrefix.size());
      }
    }
  }
  throw Error(ErrorCode::internal, "dynamodb: malformed change-feed entry");
}

}  // namespace

Error dynamodb::translate(const AwsError& e) {
  if (e.throttled()) return Error(ErrorCode::throttled, "dynamodb is throttling: " + std::string(e.what()));
  if (e.status() >= 500 || e.status() == 0) return Error(ErrorCode::unavailable, "dynamodb: " + std::string(e.what()));
  if (e.type() == "ResourceNotFoundException") return Error(ErrorCode::unavailable, "dynamodb: " + std::string(e.what()));
  if (e.type() == "ValidationException" && std::string(e.what()).find("size") != std::string::npos) {
    return Error(ErrorCode::document_too_large, "dynamodb: " + std::string(e.what()));
  }
  if (e.type() == "ValidationException" && (std::string(e.what()).find("Number overflow") != std::string::npos ||
                                            std::string(e.what()).find("Number underflow") != std::string::npos)) {
    return Error::invalid_request("state: a number's magnitude is outside what DynamoDB stores (1e-130 to below 1e126, "
                                  "or 0); nothing was stored",
                                  "state");
  }
  return Error(ErrorCode::internal, "dynamodb: " + std::string(e.what()));
}

namespace {

// One call, its failure translated into the store's errors.
json::value call_translated(JsonClient& client, std::string_view operation, const json::object& body, bool idempotent) {
  try {
    return client.call(operation, to_json(body), idempotent);
  } catch (const AwsError& e) {
    throw translate(e);
  }
}

// Sleeps before retry `attempt` (a batch's unprocessed part, a cancelled transaction): from `base`
// up to base << max_shift.
void back_off(std::chrono::milliseconds base, int attempt, int max_shift) {
  sleep_before_retry(attempt, base, base * (1 << max_shift));
}

}  // namespace

std::vector<ShadowRecord> DynamoDbStore::read(std::span<const ShadowKey> keys) {
  // Every item key once (BatchGetItem rejects duplicates), fetched in chunks.
  std::vector<std::pair<std::string, std::string>> item_keys;
  for (const ShadowKey& key : keys) {
    for (const std::string& sk : section_sks(key.name)) item_keys.emplace_back(shadow_pk(key.thing), sk);
  }
  std::sort(item_keys.begin(), item_keys.end());
  item_keys.erase(std::unique(item_keys.begin(), item_keys.end()), item_keys.end());
  std::map<std::pair<std::string, std::string>, json::object> items;
  for (std::size_t start = 0; start < item_keys.size(); start += options_.max_read_batch) {
    json::array request_keys;
    for (std::size_t i = start; i < std::min(item_keys.size(), start + options_.max_read_batch); ++i) {
      request_keys.push_back(json::object{{"PK", S(item_keys[i].first)}, {"SK", S(item_keys[i].second)}});
    }
    batch_get(std::move(request_keys), items);
  }
  std::vector<ShadowRecord> out;
  out.reserve(keys.size());
  for (const ShadowKey& key : keys) {
    ShadowRecord record;
    if (options_.layout == DynamoDbLayout::combined) {
      auto it = items.find({shadow_pk(key.thing), std::string(kCombinedPrefix) + key.name});
      if (it != items.end()) record = combined_record(it->second);
    } else {
      for (Section s : {Section::reported, Section::desired}) {
        auto it = items.find({shadow_pk(key.thing), section_prefix(s) + key.name});
        if (it != items.end()) record.section(s) = section_from_attributes(it->second, it->second.if_contains("state"),
                                                                           it->second.if_contains("times"));
      }
    }
    out.push_back(std::move(record));
  }
  return out;
}

void DynamoDbStore::write(const ShadowWrite& write) {
  const std::vector<Operation> ops = build_operations(write);
  // Whether an earlier send's outcome is unknown. Such a send may land after applied() looked
  // and before it is sent again; the condition then fails on this write itself, so a failed
  // condition is checked against the writeIds before it is called a conflict.
  bool may_have_landed = false;
  for (int attempt = 1;; ++attempt) {
    try {
      send(ops, write);
      delete_after_commit(ops);
      return;
    } catch (const AwsError& e) {
      if (e.type() == "ConditionalCheckFailedException") {
        if (may_have_landed && applied(write)) return delete_after_commit(ops);
        throw Error::version_conflict(version_in(e.body().as_object().if_contains("Item")));
      }
      if (e.type() == "TransactionCanceledException") {
        const json::value* reasons = e.body().as_object().if_contains("CancellationReasons");
        bool transient = false;
        if (reasons) {
          for (std::size_t i = 0; i < reasons->as_array().size(); ++i) {
            const json::value& reason = reasons->as_array()[i];
            std::string code(reason.at("Code").as_string());
            if (code == "ConditionalCheckFailed" && i < ops.size() && ops[i].declaration_check) {
              throw IndexDeclarationChanged();
            }
            if (code == "ConditionalCheckFailed") {
              if (may_have_landed && applied(write)) return delete_after_commit(ops);
              throw Error::version_conflict(version_in(reason.as_object().if_contains("Item")));
            }
            transient = transient || transient_cancellation(code);
          }
        }
        if (!transient) throw translate(e);
        if (attempt >= options_.max_attempts) throw Error(ErrorCode::throttled, "dynamodb: " + std::string(e.what()));
      } else if (e.outcome_unknown() || e.type() == "TransactionInProgressException") {
        // The write may or may not have landed (or its first sending is still being applied:
        // the same ClientRequestToken): the writeIds tell.
        may_have_landed = true;
        std::this_thread::sleep_for(options_.request_timeout / 4);
        if (applied(write)) return delete_after_commit(ops);
        if (attempt >= options_.max_attempts) throw translate(e);
      } else {
        throw translate(e);
      }
    }
    back_off(std::chrono::milliseconds(20), attempt, 6);
  }
}

std::vector<ShadowSummary> DynamoDbStore::list_shadows(std::string_view thing, std::string_view after_name,
                                                       std::size_t limit) {
  std::vector<std::string> prefixes = options_.layout == DynamoDbLayout::combined
                                          ? std::vector<std::string>{std::string(kCombinedPrefix)}
                                          : std::vector<std::string>{section_prefix(Section::desired),
                                                                     section_prefix(Section::reported)};
  std::vector<ShadowSummary> out;
  std::string after(after_name);
  while (out.size() < limit) {
    // One page from each prefix after `after`; names up to the smallest last name seen in a
    // page that has more are complete.
    std::map<std::string, ShadowRecord> by_name;
    std::optional<std::string> horizon;
    for (const std::string& prefix : prefixes) {
      json::object q = base_query(shadow_pk(std::string(thing)));
      q["KeyConditionExpression"] = "PK = :pk AND SK BETWEEN :lo AND :hi";
      json::object& values = q["ExpressionAttributeValues"].as_object();
      values[":lo"] = S(prefix + after + "\x01");
      values[":hi"] = S(prefix.substr(0, 3) + "$");
      q["Limit"] = static_cast<std::int64_t>(limit + 1);
      json::value page = call("Query", q, true);
      const json::array& items = page.at("Items").as_array();
      for (const json::value& v : items) {
        const json::object& item = v.as_object();
        std::string name = get_s(item, "SK").substr(prefix.size());
        if (options_.layout == DynamoDbLayout::combined) {
          by_name[name] = combined_record(item);
        } else {
          by_name[name].section(prefix == section_prefix(Section::reported) ? Section::reported : Section::desired) =
              section_from_attributes(item, nullptr, nullptr);
        }
      }
      if (page.as_object().contains("LastEvaluatedKey") && !items.empty()) {
        std::string last = get_s(items.back().as_object(), "SK").substr(prefix.size());
        if (!horizon || last < *horizon) horizon = last;
      }
    }
    for (auto& [name, record] : by_name) {
      if (horizon && name > *horizon) break;
      if (record.exists() && out.size() < limit) out.push_back(summarize(name, record));
    }
    if (!horizon) break;
    after = *horizon;
  }
  return out;
}

std::vector<std::string> DynamoDbStore::list_things(std::string_view prefix, std::string_view after_thing,
                                                    std::size_t limit) {
  std::string start = std::max(std::string(prefix), std::string(after_thing) + "\x01");
  std::vector<std::future<std::vector<std::string>>> shards;
  for (int shard = 0; shard < kShards; ++shard) {
    shards.push_back(std::async(std::launch::async, [&, shard] { return things_in_shard(shard, prefix, start, limit); }));
  }
  std::vector<std::string> merged;
  for (auto& f : shards) {
    std::vector<std::string> part = f.get();
    merged.insert(merged.end(), part.begin(), part.end());
  }
  std::sort(merged.begin(), merged.end());
  if (merged.size() > limit) merged.resize(limit);
  return merged;
}

// Every shadow's history in time order, from the time index GSI2: each of its shards is read in
// event-id order from the lower bound, and the shards are merged. A shard read until it has
// `limit` events after `after`, and all of those at the same time as the last of them, holds
// every event of its up to that time; the merged page stops at the earliest such time of a shard
// that had more. The index is eventually consistent: an event shows up in it shortly after its
// write (the hub's poll allows for that, docs/streams.md).
std::vector<ShadowHistoryEvent> DynamoDbStore::history_since(std::int64_t since_ns, const ShadowHistoryEvent* after,
                                                            std::size_t limit) {
  auto order = [](const ShadowHistoryEvent& a, const ShadowHistoryEvent& b) {
    return std::tie(a.event.timestamp_ns, a.key.thing, a.key.name, a.event.id) <
           std::tie(b.event.timestamp_ns, b.key.thing, b.key.name, b.event.id);
  };
  const std::int64_t from = after ? std::max(since_ns, after->event.timestamp_ns) : since_ns;
  struct Part {
    std::vector<ShadowHistoryEvent> events;
    std::optional<std::int64_t> complete_to;  // nullopt: the shard was read to its end
  };
  auto read_shard = [&](int shard) {
    json::object q{{"TableName", options_.table},
                   {"IndexName", kHistoryIndex},
                   {"KeyConditionExpression", "GSI2PK = :pk AND GSI2SK >= :from"},
                   {"ExpressionAttributeValues", json::object{{":pk", S(history_index_pk(shard))}, {":from", S(event_id_time_prefix(from))}}}};
    Part part;
    std::size_t wanted = 0;  // events after `after`
    for (;;) {
      q["Limit"] = static_cast<std::int64_t>(std::min<std::size_t>(limit + 1, 1000));
      json::value page = call("Query", q, true);
      for (const json::value& v : page.at("Items").as_array()) {
        const json::object& item = v.as_object();
        ShadowHistoryEvent e{history_key(get_s(item, "PK")),
                             {get_s(item, "SK"), get_n(item, "timestamp"), get_n(item, "expires"), get_s(item, "event")}};
        if (e.event.timestamp_ns < since_ns || (after && !order(*after, e))) continue;
        if (wanted >= limit && e.event.timestamp_ns > part.events.back().event.timestamp_ns) {
          part.complete_to = part.events.back().event.timestamp_ns;
          return part;
        }
        ++wanted;
        part.events.push_back(std::move(e));
      }
      const json::value* last = page.as_object().if_contains("LastEvaluatedKey");
      if (!last) return part;
      q["ExclusiveStartKey"] = *last;
    }
  };
  std::vector<std::future<Part>> shards;
  for (int shard = 0; shard < kHistoryIndexShards; ++shard) {
    shards.push_back(std::async(std::launch::async, read_shard, shard));
  }
  std::vector<ShadowHistoryEvent> merged;
  std::int64_t complete_to = std::numeric_limits<std::int64_t>::max();
  std::optional<Error> failed;
  for (auto& f : shards) {
    try {
      Part part = f.get();
      if (part.complete_to) complete_to = std::min(complete_to, *part.complete_to);
      std::move(part.events.begin(), part.events.end(), std::back_inserter(merged));
    } catch (const Error& e) {
      if (!failed) failed = e;
    }
  }
  if (failed) {
    if (std::string_view(failed->what()).find("specified index") != std::string_view::npos) {
      throw Error(ErrorCode::unavailable, "table " + options_.table + " has no time index of history (" +
                                              std::string(kHistoryIndex) + "): add it (docs/storage.md)");
    }
    throw *failed;
  }
  std::erase_if(merged, [&](const ShadowHistoryEvent& e) { return e.event.timestamp_ns > complete_to; });
  std::sort(merged.begin(), merged.end(), order);
  if (merged.size() > limit) merged.resize(limit);
  return merged;
}

std::vector<HistoryEvent> DynamoDbStore::history(const ShadowKey& key, const HistoryQuery& query) {
  auto [lo, hi] = history_id_range(query);
  if (!query.after_id.empty()) {
    if (query.descending) {
      hi = std::min(hi, query.after_id);  // inclusive: the cursor item itself is dropped below
    } else {
      lo = std::max(lo, query.after_id + "\x01");
    }
  }
  std::vector<HistoryEvent> out;
  std::size_t bytes = 0;
  if (lo > hi) return out;
  json::object q = base_query(history_pk(key));
  q["KeyConditionExpression"] = "PK = :pk AND SK BETWEEN :lo AND :hi";
  json::object& values = q["ExpressionAttributeValues"].as_object();
  values[":lo"] = S(lo);
  values[":hi"] = S(hi);
  q["ScanIndexForward"] = !query.descending;
  for (;;) {
    q["Limit"] = static_cast<std::int64_t>(query.limit - out.size() + 1);
    json::value page = call("Query", q, true);
    for (const json::value& v : page.at("Items").as_array()) {
      const json::object& item = v.as_object();
      HistoryEvent e{get_s(item, "SK"), get_n(item, "timestamp"), get_n(item, "expires"), get_s(item, "event")};
      if (e.id == query.after_id || e.timestamp_ns < query.since_ns || e.timestamp_ns > query.until_ns) continue;
      if (out.size() < query.limit && bytes <= query.max_bytes) {
        bytes += e.json.size();
        out.push_back(std::move(e));
      }
    }
    const json::value* last = page.as_object().if_contains("LastEvaluatedKey");
    if (!last || out.size() >= query.limit || bytes > query.max_bytes) break;
    q["ExclusiveStartKey"] = *last;
  }
  return out;
}

std::optional<StateImage> DynamoDbStore::image_before(const ShadowKey& key, std::string_view event_id) {
  json::object q = base_query(image_pk(key));
  q["KeyConditionExpression"] = "PK = :pk AND SK <= :id";
  q["ExpressionAttributeValues"].as_object()[":id"] = S(event_id);
  q["ScanIndexForward"] = false;
  q["Limit"] = 1;
  json::value page = call("Query", q, true);
  const json::array& items = page.at("Items").as_array();
  if (items.empty()) return std::nullopt;
  const json::object& item = items.front().as_object();
  return StateImage{get_s(item, "SK"), get_n(item, "expires"), get_s(item, "image")};
}

// DynamoDB's TTL drops expired items on its own; purge does the same eagerly (a Scan),
// for tests and for tables without TTL: the shadows' partitions (tombstones), history's and
// images'.
std::size_t DynamoDbStore::purge(std::int64_t now_ns) {
  return purge_expired(now_ns, {kShadowPkPrefix, kHistoryPkPrefix, kImagePkPrefix});
}

std::size_t DynamoDbStore::purge_expired(std::int64_t now_ns, std::initializer_list<std::string_view> pk_prefixes) {
  json::object values{{":now", N(now_ns)}};
  std::string prefixes;
  for (std::string_view prefix : pk_prefixes) {
    const std::string name = ":p" + std::to_string(values.size());
    prefixes += (prefixes.empty() ? "begins_with(PK, " : " OR begins_with(PK, ") + name + ")";
    values[name] = S(prefix);
  }
  json::object scan{{"TableName", options_.table},
                    {"FilterExpression", "attribute_exists(expires) AND expires <= :now AND (" + prefixes + ")"},
                    {"ProjectionExpression", "PK, SK, expires"},
                    {"ConsistentRead", true},
                    {"ExpressionAttributeValues", std::move(values)}};
  std::size_t purged = 0;
  for (;;) {
    json::value page = call("Scan", scan, true);
    for (const json::value& v : page.at("Items").as_array()) {
      const json::object& item = v.as_object();
      json::object del{{"TableName", options_.table},
                       {"Key", json::object{{"PK", item.at("PK")}, {"SK", item.at("SK")}}},
                       {"ConditionExpression", "expires = :e"},
                       {"ExpressionAttributeValues", json::object{{":e", item.at("expires")}}}};
      try {
        client_->call("DeleteItem", to_json(del), true);
        ++purged;
      } catch (const AwsError& e) {
        if (e.type() != "ConditionalCheckFailedException") throw translate(e);
        // re-created or changed meanwhile: not expired any more
      }
    }
    const json::value* last = page.as_object().if_contains("LastEvaluatedKey");
    if (!last) break;
    scan["ExclusiveStartKey"] = *last;
  }
  return purged;
}

// BatchWriteItem, 25 distinct items at a time (DynamoDB refuses a batch naming one twice);
// items left unprocessed (throttling) are sent again.
void DynamoDbStore::append_history(std::span<const ShadowHistoryEvent> events) {
  constexpr std::size_t kBatch = 25;  // DynamoDB's limit
  for (std::size_t next = 0; next < events.size();) {
    std::set<std::pair<std::string, std::string_view>> batch;  // history_pk, event id
    std::string request = "{";
    open(request, "RequestItems", '{');
    open(request, options_.table, '[');
    for (; next < events.size() && batch.size() < kBatch; ++next) {
      const ShadowHistoryEvent& e = events[next];
      if (!batch.emplace(history_pk(e.key), e.event.id).second) continue;
      request += "{";
      open(request, "PutRequest", '{');
      append_history_item(request, e.key, e.event);
      close(request, '}');
      close(request, '}');
    }
    close(request, ']');
    close(request, '}');
    batch_write_all(finish(std::move(request)), "history items");
  }
}

void DynamoDbStore::batch_write_all(const std::string& request, std::string_view what) {
  json::object unprocessed = batch_write(request);
  for (int attempt = 1; !unprocessed.empty(); ++attempt) {
    if (attempt >= options_.max_attempts * 2) {
      throw Error(ErrorCode::throttled, "dynamodb: " + std::string(what) + " left unprocessed");
    }
    back_off(std::chrono::milliseconds(10), attempt, 7);
    unprocessed = batch_write(to_json(json::object{{"RequestItems", std::move(unprocessed)}}));
  }
}

json::object DynamoDbStore::batch_write(const std::string& request) {
  json::value response;
  try {
    response = client_->call("BatchWriteItem", request, true);
  } catch (const AwsError& e) {
    throw translate(e);
  }
  const json::value* unprocessed = response.as_object().if_contains("UnprocessedItems");
  return unprocessed && unprocessed->is_object() ? unprocessed->as_object() : json::object{};
}

std::optional<std::string> DynamoDbStore::unready() {
  try {
    // One attempt: a probe answers within one request's timeout, not after the client's retries.
    const json::value t = client_->call("DescribeTable", to_json(json::object{{"TableName", options_.table}}), true, 1);
    const json::string& status = t.at("Table").at("TableStatus").as_string();
    if (status == "ACTIVE") return std::nullopt;
    return "the table " + options_.table + " is " + std::string(status);
  } catch (const AwsError& e) {
    if (e.throttled()) return std::nullopt;  // it answered: throttling is for requests to retry, not a reason to stop routing
    return std::string("DynamoDB is not reachable: ") + translate(e).what();
  } catch (const std::exception& e) {
    return std::string("DynamoDB is not reachable: ") + e.what();
  }
}

std::vector<std::string> DynamoDbStore::section_sks(const std::string& name) const {
  if (options_.layout == DynamoDbLayout::combined) return {std::string(kCombinedPrefix) + name};
  return {section_prefix(Section::reported) + name, section_prefix(Section::desired) + name};
}

std::string dynamodb::transaction(json::array items) { return to_json(json::object{{"TransactItems", std::move(items)}}); }

bool dynamodb::transient_cancellation(std::string_view code) {
  return code == "TransactionConflict" || code == "ThrottlingError" || code == "ProvisionedThroughputExceeded";
}

std::vector<std::string> DynamoDbStore::transact(const std::string& request, bool idempotent, int attempts) {
  for (int attempt = 1;; ++attempt) {
    try {
      client_->call("TransactWriteItems", request, idempotent);
      return {};
    } catch (const AwsError& e) {
      if (e.type() != "TransactionCanceledException") throw translate(e);
      std::vector<std::string> codes;
      bool condition = false;
      const json::value* reasons = e.body().is_object() ? e.body().as_object().if_contains("CancellationReasons") : nullptr;
      if (reasons && reasons->is_array()) {
        for (const json::value& r : reasons->as_array()) {
          const json::value* code = r.is_object() ? r.as_object().if_contains("Code") : nullptr;
          codes.emplace_back(code && code->is_string() ? code->as_string() : "None");
          condition = condition || codes.back() == "ConditionalCheckFailed";
        }
      }
      if (condition) return codes;
      if (std::none_of(codes.begin(), codes.end(), transient_cancellation)) throw translate(e);
      if (attempt >= attempts) throw Error(ErrorCode::throttled, "dynamodb: " + std::string(e.what()));
      back_off(std::chrono::milliseconds(20), attempt, 6);
    }
  }
}

json::value DynamoDbStore::call(std::string_view operation, const json::object& body, bool idempotent) {
  return call_translated(*client_, operation, body, idempotent);
}

json::object DynamoDbStore::base_query(const std::string& pk) const {
  return {{"TableName", options_.table}, {"ConsistentRead", true},
          {"ExpressionAttributeValues", json::object{{":pk", S(pk)}}}};
}

void DynamoDbStore::batch_get(json::array keys, std::map<std::pair<std::string, std::string>, json::object>& items,
                              std::string_view projection) {
  json::object table{{"Keys", std::move(keys)}, {"ConsistentRead", true}};
  if (!projection.empty()) table["ProjectionExpression"] = projection;
  json::object request{{"RequestItems", json::object{{options_.table, std::move(table)}}}};
  for (int attempt = 1;; ++attempt) {
    json::value response = call("BatchGetItem", request, true);
    for (const json::value& v : response.at("Responses").at(options_.table).as_array()) {
      const json::object& item = v.as_object();
      items[{get_s(item, "PK"), get_s(item, "SK")}] = item;
    }
    const json::value* unprocessed = response.as_object().if_contains("UnprocessedKeys");
    if (!unprocessed || unprocessed->as_object().empty()) return;
    if (attempt >= options_.max_attempts * 2) throw Error(ErrorCode::throttled, "dynamodb: keys left unprocessed");
    request["RequestItems"] = *unprocessed;
    back_off(std::chrono::milliseconds(10), attempt, 7);
  }
}

std::uint64_t DynamoDbStore::version_in(const json::value* item) {
  return item ? static_cast<std::uint64_t>(get_n(item->as_object(), "version")) : 0;
}

std::string DynamoDbStore::begin_body() const {
  std::string out = "{";
  member(out, "TableName", options_.table);
  return out;
}

std::string DynamoDbStore::conditional(std::string out, std::uint64_t expected, std::string values) {
  if (expected == 0) {
    member(out, "ConditionExpression", "attribute_not_exists(PK)");
  } else {
    member(out, "ConditionExpression", "version = :expected");
    member_n(values, ":expected", expected);
  }
  if (!values.empty()) {
    open(out, "ExpressionAttributeValues", '{');
    out += values;
    close(out, '}');
  }
  member(out, "ReturnValuesOnConditionCheckFailure", "ALL_OLD");
  return finish(std::move(out));
}

std::vector<DynamoDbStore::Operation> DynamoDbStore::build_operations(const ShadowWrite& w) {
  std::vector<Operation> ops;
  const std::string pk = shadow_pk(w.key.thing);
  int live_delta = 0;
  for (const SectionPut& put : w.sections) live_delta += (put.record.exists() ? 1 : 0) - (put.was_live ? 1 : 0);
  const std::string_view event = w.feed ? feed_event(*w.feed) : std::string_view();
  if (options_.layout == DynamoDbLayout::separate) {
    for (const SectionCheck& check : w.checks) {
      std::string op = begin_body();
      member_key(op, pk, section_prefix(check.section) + w.key.name);
      ops.push_back({"ConditionCheck", conditional(std::move(op), check.expected_version)});
    }
    // The two items of a write of both sections may be written to partitions whose stream
    // records two processes read: its reported item carries the whole entry, unless that item
    // could then pass the size limit (twice the texts: attribute values and escapes cost more),
    // in which case both items carry the event and the reader joins their records.
    const bool whole_entry = [&] {
      if (!w.feed || w.sections.size() != 2) return false;
      const SectionRecord& r = w.sections[0].section == Section::reported ? w.sections[0].record : w.sections[1].record;
      return 2 * (r.state_json.size() + r.times_json.size() + w.feed->size()) + 4096 <= kDynamoDbMaxItemBytes;
    }();
    for (const SectionPut& put : w.sections) {
      std::string op = begin_body();
      open(op, "Item", '{');
      const std::size_t item_start = op.size() - 1;
      member_s(op, "PK", pk);
      member_s(op, "SK", section_prefix(put.section) + w.key.name);
      member_section_attributes(op, put.record, true);
      member_state(op, "state", put.record.state_json);
      if (!put.record.times_json.empty()) member_s(op, "times", put.record.times_json);
      if (!whole_entry) {
        if (w.feed) member_s(op, kFeedEventAttribute, event);
      } else if (put.section == Section::reported) {
        member_s(op, kFeedEntryAttribute, *w.feed);
      }
      close(op, '}');
      check_size(op.size() - 1 - item_start);
      ops.push_back({"Put", conditional(std::move(op), put.expected_version)});
    }
  } else {
    // One item holds both sections and their one shared version: differing expectations
    // cannot both hold. The item is put whole (a PutItem costs DynamoDB less than an
    // UpdateItem with a long expression); the condition makes the unchanged section current.
    const std::uint64_t expected = w.sections.front().expected_version;
    auto differs = [&](std::uint64_t v) { return v != expected; };
    if (std::any_of(w.sections.begin(), w.sections.end(), [&](const SectionPut& p) { return differs(p.expected_version); }) ||
        std::any_of(w.checks.begin(), w.checks.end(), [&](const SectionCheck& c) { return differs(c.expected_version); })) {
      throw Error::version_conflict(read(w.key).reported.version);
    }
    ShadowRecord item;
    if (w.sections.size() == 1) {
      const Section kept = other(w.sections.front().section);
      if (w.unchanged) {
        item.section(kept) = *w.unchanged;
      } else {
        item = read(w.key);
        if (item.reported.version != expected) throw Error::version_conflict(item.reported.version);
      }
    }
    for (const SectionPut& put : w.sections) item.section(put.section) = put.record;
    const SectionRecord& latest = w.sections.front().record;
    std::string op = begin_body();
    open(op, "Item", '{');
    const std::size_t item_start = op.size() - 1;
    member_s(op, "PK", pk);
    member_s(op, "SK", std::string(kCombinedPrefix) + w.key.name);
    member_n(op, "version", expected + 1);
    member_n(op, "timestamp", latest.timestamp_ns);
    member_s(op, "writeId", latest.write_id);
    if (!latest.client_token.empty()) member_s(op, "clientToken", latest.client_token);
    if (w.feed) member_s(op, kFeedEventAttribute, event);
    std::int64_t expires = 0;
    for (Section s : {Section::reported, Section::desired}) {
      const SectionRecord& r = item.section(s);
      expires = std::max(expires, r.expires_ns);
      if (r.version == 0 || (r.deleted && r.write_id.empty() && r.timestamp_ns == 0)) continue;  // never written
      const std::string name(to_string(s));
      member_state(op, name, r.state_json);
      if (!r.times_json.empty()) member_s(op, name + "Times", r.times_json);
      // A live section written now has the item's own metadata; only a map that says more is
      // stored (DynamoDB Local spends a tenth more per write on one more nested map).
      const bool own = r.exists() && r.tz.empty() && r.timestamp_ns == latest.timestamp_ns &&
                       r.write_id == latest.write_id && r.client_token == latest.client_token;
      if (own) continue;
      open(op, name + "Meta", '{');
      open(op, "M", '{');
      member_section_attributes(op, r, false);
      close(op, '}');
      close(op, '}');
    }
    if (!item.exists() && expires > 0) {  // only tombstones: the item expires with the last of them
      member_n(op, "expires", expires);
      member_n(op, "ttl", ttl_seconds(expires));
    }
    close(op, '}');
    check_size(op.size() - 1 - item_start);
    ops.push_back({"Put", conditional(std::move(op), expected)});
  }
  if (w.event) ops.push_back({"Put", history_put(w.key, *w.event)});
  if (w.image) {  // a short cut only: an image too large for an item is left out
    std::string op = begin_body();
    open(op, "Item", '{');
    const std::size_t item_start = op.size() - 1;
    member_s(op, "PK", image_pk(w.key));
    member_s(op, "SK", w.image->event_id);
    member_n(op, "expires", w.image->expires_ns);
    member_n(op, "ttl", ttl_seconds(w.image->expires_ns));
    member_s(op, "image", w.image->json);
    close(op, '}');
    if (op.size() - 1 - item_start <= kDynamoDbMaxItemBytes) ops.push_back({"Put", finish(std::move(op))});
  }
  if (live_delta != 0) {
    std::string op = begin_body();
    member_key(op, pk, kThingIndexSk);
    member(op, "UpdateExpression", "SET GSI1PK = :shard, GSI1SK = :thing ADD liveCount :delta");
    open(op, "ExpressionAttributeValues", '{');
    member_s(op, ":shard", "THINGS#" + std::to_string(shard_of(w.key.thing)));
    member_s(op, ":thing", w.key.thing);
    member_n(op, ":delta", live_delta);
    close(op, '}');
    ops.push_back({"Update", finish(std::move(op))});
  }
  append_index_operations(w, ops);
  return ops;
}

std::string DynamoDbStore::history_put(const ShadowKey& key, const HistoryEvent& event) const {
  std::string op = begin_body();
  append_history_item(op, key, event);
  return finish(std::move(op));
}

void DynamoDbStore::append_history_item(std::string& out, const ShadowKey& key, const HistoryEvent& event) {
  open(out, "Item", '{');
  member_s(out, "PK", history_pk(key));
  member_s(out, "SK", event.id);
  member_n(out, "timestamp", event.timestamp_ns);
  member_n(out, "expires", event.expires_ns);
  member_n(out, "ttl", ttl_seconds(event.expires_ns));
  member_s(out, "event", event.json);
  member_s(out, "GSI2PK", history_index_pk(key));
  member_s(out, "GSI2SK", event.id);
  close(out, '}');
}

void DynamoDbStore::check_size(std::size_t size) {
  if (size > kDynamoDbMaxItemBytes) throw Error::too_large("the DynamoDB item", size, kDynamoDbMaxItemBytes);
}

void DynamoDbStore::send(const std::vector<Operation>& ops, const ShadowWrite& w) {
  if (ops.size() == 1) {
    client_->call(ops.front().kind == "Put" ? "PutItem" : "UpdateItem", ops.front().body, false);
    return;
  }
  std::string request = "{";
  open(request, "TransactItems", '[');
  for (const Operation& op : ops) {
    if (op.after_commit) break;  // only at the end
    request += '{';
    append_json_string(request, op.kind);
    request += ':';
    request += op.body;
    request += "},";
  }
  close(request, ']');
  member(request, "ClientRequestToken", w.sections.front().record.write_id);
  client_->call("TransactWriteItems", finish(std::move(request)), false);
}

bool DynamoDbStore::applied(const ShadowWrite& w) {
  ShadowRecord now = read(w.key);
  for (const SectionPut& put : w.sections) {
    const SectionRecord& s = now.section(put.section);
    if (s.write_id != put.record.write_id) return false;
  }
  return true;
}

std::vector<std::string> DynamoDbStore::things_in_shard(int shard, std::string_view prefix, const std::string& start, std::size_t limit) {
  json::object q{{"TableName", options_.table},
                 {"IndexName", "GSI1"},
                 {"KeyConditionExpression", "GSI1PK = :shard AND GSI1SK >= :start"},
                 {"FilterExpression", "liveCount > :zero"},
                 {"ExpressionAttributeValues", json::object{{":shard", S("THINGS#" + std::to_string(shard))},
                                                            {":start", S(start)},
                                                            {":zero", N(std::int64_t{0})}}}};
  std::vector<std::string> out;
  for (;;) {
    q["Limit"] = static_cast<std::int64_t>(limit + 1);
    json::value page = call("Query", q, true);
    for (const json::value& v : page.at("Items").as_array()) {
      std::string thing = get_s(v.as_object(), "GSI1SK");
      if (thing.compare(0, prefix.size(), prefix) != 0) return out;  // sorted: past the prefix
      out.push_back(std::move(thing));
      if (out.size() >= limit) return out;
    }
    const json::value* last = page.as_object().if_contains("LastEvaluatedKey");
    if (!last) return out;
    q["ExclusiveStartKey"] = *last;
  }
}

aws::ClientOptions dynamodb_client_options(DynamoDbOptions& options) {
  if (options.region.empty()) options.region = aws::load_region(options.profile).value_or("us-east-1");
  if (options.endpoint.empty()) options.endpoint = "https://dynamodb." + options.region + ".amazonaws.com";
  aws::ClientOptions c;
  c.endpoint = options.endpoint;
  c.region = options.region;
  c.request_timeout = options.request_timeout;
  c.max_attempts = options.max_attempts;
  return c;
}

namespace {

std::unique_ptr<JsonClient> make_client(DynamoDbOptions& options) {
  aws::ClientOptions c = dynamodb_client_options(options);
  try {
    return std::make_unique<JsonClient>(c, aws::load_credentials(options.profile));
  } catch (const std::runtime_error& e) {
    throw Error(ErrorCode::unavailable, e.what());
  }
}

}  // namespace

std::unique_ptr<StoreBackend> open_dynamodb_store(const DynamoDbOptions& given) {
  DynamoDbOptions options = given;
  if (options.table.empty()) throw Error::invalid_request("a DynamoDB table name is required");
  auto client = make_client(options);
  return std::make_unique<DynamoDbStore>(options, std::move(client));
}

void delete_dynamodb_table(const DynamoDbOptions& given) {
  DynamoDbOptions options = given;
  auto client = make_client(options);
  call_translated(*client, "DeleteTable", json::object{{"TableName", options.table}}, true);
}

namespace {

// GSI2, the time index of history (kHistoryIndexShards).
json::object history_time_index() {
  auto key = [](const char* name, const char* type) { return json::object{{"AttributeName", name}, {"KeyType", type}}; };
  return {{"IndexName", kHistoryIndex},
          {"KeySchema", json::array{key("GSI2PK", "HASH"), key("GSI2SK", "RANGE")}},
          {"Projection", json::object{{"ProjectionType", "INCLUDE"},
                                      {"NonKeyAttributes", json::array{"timestamp", "expires", "event"}}}}};
}

}  // namespace

void create_dynamodb_table(const DynamoDbOptions& given, bool with_stream) {
  DynamoDbOptions options = given;
  auto client = make_client(options);
  auto call = [&](std::string_view op, const json::object& body) { return call_translated(*client, op, body, true); };
  auto attr = [](const char* name) { return json::object{{"AttributeName", name}, {"AttributeType", "S"}}; };
  auto key = [](const char* name, const char* type) { return json::object{{"AttributeName", name}, {"KeyType", type}}; };
  json::object create{
      {"TableName", options.table},
      {"BillingMode", "PAY_PER_REQUEST"},
      {"AttributeDefinitions",
       json::array{attr("PK"), attr("SK"), attr("GSI1PK"), attr("GSI1SK"), attr("GSI2PK"), attr("GSI2SK")}},
      {"KeySchema", json::array{key("PK", "HASH"), key("SK", "RANGE")}},
      {"GlobalSecondaryIndexes",
       json::array{json::object{{"IndexName", "GSI1"},
                                {"KeySchema", json::array{key("GSI1PK", "HASH"), key("GSI1SK", "RANGE")}},
                                {"Projection", json::object{{"ProjectionType", "INCLUDE"},
                                                            {"NonKeyAttributes", json::array{"liveCount"}}}}},
                   history_time_index()}},
      {"StreamSpecification", json::object{{"StreamEnabled", true}, {"StreamViewType", "NEW_AND_OLD_IMAGES"}}}};
  if (!with_stream) create.erase("StreamSpecification");
  call("CreateTable", create);
  for (int i = 0; i < 600; ++i) {
    json::value t = call("DescribeTable", json::object{{"TableName", options.table}});
    if (t.at("Table").at("TableStatus").as_string() == "ACTIVE") break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  call("UpdateTimeToLive", json::object{{"TableName", options.table},
                                        {"TimeToLiveSpecification", json::object{{"Enabled", true}, {"AttributeName", "ttl"}}}});
}

std::optional<DynamoDbSectionItem> decode_dynamodb_section_item(const json::object& image) {
  const std::string pk = get_s(image, "PK");
  const std::string sk = get_s(image, "SK");
  if (!pk.starts_with(kShadowPkPrefix)) return std::nullopt;
  DynamoDbSectionItem out;
  out.key.thing = pk.substr(kShadowPkPrefix.size());
  if (sk.starts_with(kCombinedPrefix)) {
    out.key.name = sk.substr(kCombinedPrefix.size());
    out.record = combined_record(image);
  } else {
    for (Section s : {Section::reported, Section::desired}) {
      if (!sk.starts_with(section_prefix(s))) continue;
      out.key.name = sk.substr(section_prefix(s).size());
      out.section = s;
      out.record.section(s) = section_from_attributes(image, image.if_contains("state"), image.if_contains("times"));
    }
    if (!out.section) return std::nullopt;  // the thing index item (T#)
  }
  out.feed_entry = get_s(image, kFeedEntryAttribute);
  out.feed_event = out.feed_entry.empty() ? get_s(image, kFeedEventAttribute) : std::string(feed_event(out.feed_entry));
  return out;
}

}  // namespace deviceshadow
