// The DynamoDB store's one object (not public API): its shadows, the shared request machinery
// and the table's management in dynamodb_store.cpp, its declared indexes in
// dynamodb_index.cpp, its delivery state (registrations, dead letters, claims) in
// dynamodb_delivery.cpp, its bulk jobs in dynamodb_jobs.cpp. All use the one client. Layout:
// docs/storage.md.
#pragma once

#include "aws/attribute_value.hpp"
#include "aws/client.hpp"
#include "deviceshadow/dynamodb_store.hpp"
#include "deviceshadow/error.hpp"
#include "deviceshadow/json.hpp"

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace deviceshadow {
namespace dynamodb {

using aws::AwsError;
using aws::JsonClient;
// Accessors for items read back (attributes may be absent).
using aws::get_bool;
using aws::get_n;
using aws::get_s;

inline constexpr std::int64_t kNanosPerSecond = 1'000'000'000;

// ---- AttributeValue encoding ------------------------------------------------------
inline json::object S(std::string_view s) { return {{"S", json::string(s)}}; }
inline json::object N(std::int64_t n) { return {{"N", std::to_string(n)}}; }

// ---- request bodies, written straight to text ---------------------------------------
// Writes build their DynamoDB JSON in one pass. Every member is followed by a comma; close()
// turns the last one into the closing bracket.
inline void open(std::string& out, std::string_view name, char bracket) {
  append_json_string(out, name);
  out += ':';
  out += bracket;
}
inline void close(std::string& out, char bracket) {
  if (out.back() == ',') {
    out.back() = bracket;
  } else {
    out += bracket;
  }
  out += ',';
}
inline void member(std::string& out, std::string_view name, std::string_view value) {  // "name":"value"
  append_json_string(out, name);
  out += ':';
  append_json_string(out, value);
  out += ',';
}
inline void member_s(std::string& out, std::string_view name, std::string_view value) {
  open(out, name, '{');
  member(out, "S", value);
  close(out, '}');
}
template <class Integer>
void member_n(std::string& out, std::string_view name, Integer value) {
  open(out, name, '{');
  member(out, "N", std::to_string(value));
  close(out, '}');
}
inline void member_key(std::string& out, std::string_view pk, std::string_view sk) {
  open(out, "Key", '{');
  member_s(out, "PK", pk);
  member_s(out, "SK", sk);
  close(out, '}');
}
// Closes a body opened with '{'.
inline std::string finish(std::string out) {
  close(out, '}');
  out.pop_back();
  return out;
}

// Epoch seconds for DynamoDB's TTL: expires_ns rounded up (no overflow near INT64_MAX).
inline std::int64_t ttl_seconds(std::int64_t expires_ns) {
  return expires_ns / kNanosPerSecond + (expires_ns % kNanosPerSecond > 0 ? 1 : 0);
}

// A failed call as the store's error.
Error translate(const AwsError& e);

// A TransactWriteItems request of `items`.
std::string transaction(json::array items);
// Whether a transaction cancelled for an item with this code may go through when sent again.
bool transient_cancellation(std::string_view code);

}  // namespace dynamodb

class DynamoDbStore final : public StoreBackend, public JobStore {
 public:
  DynamoDbStore(const DynamoDbOptions& options, std::unique_ptr<dynamodb::JsonClient> client)
      : options_(options), client_(std::move(client)) {}

  // Store
  using Store::read;
  std::vector<ShadowRecord> read(std::span<const ShadowKey> keys) override;
  void write(const ShadowWrite& write) override;
  std::vector<ShadowSummary> list_shadows(std::string_view thing, std::string_view after_name,
                                          std::size_t limit) override;
  std::vector<std::string> list_things(std::string_view prefix, std::string_view after_thing,
                                       std::size_t limit) override;
  std::vector<HistoryEvent> history(const ShadowKey& key, const HistoryQuery& query) override;
  std::vector<ShadowHistoryEvent> history_since(std::int64_t since_ns, const ShadowHistoryEvent* after,
                                                std::size_t limit) override;
  void append_history(std::span<const ShadowHistoryEvent> events) override;
  std::optional<StateImage> image_before(const ShadowKey& key, std::string_view event_id) override;
  std::size_t purge(std::int64_t now_ns) override;
  bool shares_versions() const override { return options_.layout == DynamoDbLayout::combined; }
  std::optional<std::string> unready() override;

  // Declared indexes (dynamodb_index.cpp)
  IndexDeclaration index_fields() override;
  std::uint64_t put_index_fields(std::span<const IndexFieldState> fields, std::uint64_t generation) override;
  void remove_undeclared_entries() override;
  std::vector<ShadowKey> put_index_entries(std::span<const IndexedShadow> shadows) override;
  std::vector<IndexHit> index_range(std::string_view field, const IndexRange& range, const IndexHit* after,
                                    std::size_t limit) override;
  std::uint64_t index_count(std::string_view field, const IndexRange& range, std::uint64_t cap) override;

  // DeliveryStore
  bool claim(std::string_view id, std::string_view owner, std::int64_t now_ns, std::int64_t expires_ns) override;
  std::size_t purge_dead_letters(std::int64_t now_ns) override;
  void put_registration(const RegistrationRecord& r) override;
  std::vector<RegistrationRecord> list_registrations() override;
  bool remove_registration(std::string_view id) override;
  std::optional<std::uint64_t> checkpoint(std::string_view) override;
  void put_checkpoint(std::string_view, std::uint64_t) override;
  void put_dead_letters(std::span<const DeadLetter> letters) override;
  std::vector<DeadLetter> dead_letters(std::string_view registration, std::string_view after, std::size_t limit) override;
  std::uint64_t count_dead_letters(std::string_view registration) override;
  std::size_t remove_dead_letters(std::string_view registration,
                                  std::optional<std::span<const std::string>> event_ids) override;
  std::vector<FeedEntry> read_feed(std::uint64_t, std::size_t) override;
  void trim_feed(std::uint64_t) override;
  std::uint64_t feed_end() override;
  void set_feed_listener(std::function<void()>) override {}  // no outbox: the stream's reader polls

  // JobStore (dynamodb_jobs.cpp)
  JobStore* job_store() noexcept override { return this; }
  void create_job(const JobRecord& job, std::size_t max_active) override;
  bool update_job(const JobRecord& job, std::uint64_t expected_revision) override;
  std::optional<JobRecord> job(std::string_view id) override;
  std::vector<JobRecord> jobs(std::string_view before, std::size_t limit) override;
  std::vector<JobRecord> active_jobs() override;
  void remove_job(std::string_view id) override;
  void put_targets(std::string_view job, std::uint64_t page, std::span<const ShadowKey> targets) override;
  std::vector<ShadowKey> targets(std::string_view job, std::uint64_t page) override;
  void remove_targets(std::string_view job) override;
  void remove_orphan_targets(std::string_view before) override;

 private:
  // Shared by both halves (dynamodb_store.cpp).
  json::value call(std::string_view operation, const json::object& body, bool idempotent);
  json::object base_query(const std::string& pk) const;
  // `projection`: the attributes to read ("": all).
  void batch_get(json::array keys, std::map<std::pair<std::string, std::string>, json::object>& items,
                 std::string_view projection = {});
  // One BatchWriteItem, and again with its UnprocessedItems (backing off) until none is left.
  void batch_write_all(const std::string& request, std::string_view what);
  // One BatchWriteItem; returns its UnprocessedItems (empty when all were written).
  json::object batch_write(const std::string& request);
  // One TransactWriteItems `request`, sent again (backing off) while it is cancelled for a
  // conflict with another transaction or for throttling, at most `attempts` times. Returns each
  // item's cancellation code ("ConditionalCheckFailed", "None", ...) when a condition failed;
  // empty when the transaction was written. Throws Error: throttled when the attempts ran out,
  // translate(e) for any other failure.
  std::vector<std::string> transact(const std::string& request, bool idempotent, int attempts);
  // Drops the items of partitions starting with one of `pk_prefixes` whose `expires` (ns) is
  // <= now_ns, as DynamoDB's TTL does on its own (a Scan). Returns how many.
  std::size_t purge_expired(std::int64_t now_ns, std::initializer_list<std::string_view> pk_prefixes);

  // Delivery (dynamodb_delivery.cpp).
  // BatchWriteItems of up to 25 requests, each made by `append` (a PutRequest or DeleteRequest
  // member, its comma included) for one of `count` items. The items must be distinct.
  void batch_write_chunks(std::size_t count, const std::function<void(std::string&, std::size_t)>& append,
                          std::string_view what);
  // Deletes the items (pk, sort_keys[i]), 25 to a BatchWriteItem.
  void batch_delete(const std::string& pk, std::span<const std::string> sort_keys, std::string_view what);
  // Deletes every item of partition `pk`: its keys queried a page at a time, each page deleted.
  void delete_partition(const std::string& pk, std::string_view what);

  // Jobs (dynamodb_jobs.cpp).
  // Whether `job` is stored as create_job writes it: a resent creation whose first attempt landed.
  bool stored_as_created(const JobRecord& job);
  // Drops from the running jobs' item the ids of jobs no longer active (finished by a shadowd
  // from before the item, or removed); true when it dropped any.
  bool repair_running_jobs();

  // Writes (dynamodb_store.cpp).
  // One item operation of a write: its kind in a transaction ("ConditionCheck", "Put",
  // "Update") and its body, which alone is also a PutItem/UpdateItem request.
  struct Operation {
    std::string_view kind;
    std::string body;
    bool declaration_check = false;  // the check of the index declaration's generation
    bool after_commit = false;       // sent after the transaction (the operations at the end)
  };
  std::vector<std::string> section_sks(const std::string& name) const;
  static std::uint64_t version_in(const json::value* item);
  // A body opened with the table name.
  std::string begin_body() const;
  // Ends an operation conditional on the item's version being `expected` (0: no such item);
  // `values` holds the operation's other ExpressionAttributeValues members.
  static std::string conditional(std::string out, std::uint64_t expected, std::string values = {});
  // The operations of a write: condition checks and sections first, then the history event
  // and the thing index. (In the combined layout the one item's condition covers both sections.)
  std::vector<Operation> build_operations(const ShadowWrite& w);
  // The Put of a history event's item (unconditional: the same event put again is the same item).
  std::string history_put(const ShadowKey& key, const HistoryEvent& event) const;
  static void append_history_item(std::string& out, const ShadowKey& key, const HistoryEvent& event);
  // `size`: an item's length as DynamoDB JSON text, which is never less than DynamoDB counts.
  static void check_size(std::size_t size);
  // One request: a single Put or Update as itself, more as one transaction (without the
  // operations after_commit).
  void send(const std::vector<Operation>& ops, const ShadowWrite& w);
  // After an unknown outcome: did this write land? (Its records carry its writeId.)
  bool applied(const ShadowWrite& w);
  std::vector<std::string> things_in_shard(int shard, std::string_view prefix, const std::string& start, std::size_t limit);

  // Declared indexes (dynamodb_index.cpp).
  struct Declared {
    std::uint64_t generation = 0;
    std::vector<IndexFieldState> fields;
    std::map<std::string, std::uint64_t, std::less<>> since;  // the generation that declared each field
  };
  // Reads the declaration item (strongly consistent) and keeps it as declared_.
  Declared read_declaration();
  // A Delete (put: false) or Put of one index entry.
  std::string entry_operation(std::uint64_t since, std::string_view field, const ShadowKey& key, const IndexValue& v,
                              bool put) const;
  // The check of the declaration and the entry operations of a write carrying index updates.
  void append_index_operations(const ShadowWrite& w, std::vector<Operation>& ops);
  // The operations marked after_commit, in batches. Never throws: the write has committed, and
  // entries left by a failure are skipped by searches as those of a stopped process are.
  void delete_after_commit(const std::vector<Operation>& ops) noexcept;
  std::vector<IndexHit> read_index(std::string_view field, const IndexRange& range, const IndexHit* after,
                                   std::size_t limit, std::uint64_t* count);

  DynamoDbOptions options_;
  std::unique_ptr<dynamodb::JsonClient> client_;
  std::mutex declared_mutex_;
  Declared declared_;                                            // the newest declaration read
  std::vector<std::pair<std::string, std::uint64_t>> undeclared_;  // (field, since) to delete
};

}  // namespace deviceshadow
