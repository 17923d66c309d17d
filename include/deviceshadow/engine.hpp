// The shadow engine: read, merge, write with versions and retries, history (docs/semantics.md,
// "Versions and concurrency" and "History").
//
// An Engine is safe for concurrent use from many threads. Writers to one shadow inside one
// process are serialized, so they never conflict with each other; conflicts only arise
// between processes sharing a store, and unpinned writes retry them internally.
#pragma once

#include "deviceshadow/document.hpp"
#include "deviceshadow/error.hpp"
#include "deviceshadow/index.hpp"
#include "deviceshadow/store.hpp"

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace deviceshadow {

struct EngineOptions {
  DocumentOptions document;
  int max_attempts = 8;                                  // unpinned read-merge-write attempts
  std::chrono::microseconds backoff_base{2000};          // the first retry waits between half of it and it (backoff.hpp)
  std::chrono::microseconds backoff_max{200000};
  bool history = true;  // each write stores its history event (and images) in its own transaction
  // History is kept but written by someone else, after the write (DynamoDB: from the table's
  // stream, `--history stream`): the engine writes none, time travel reads it.
  bool history_from_stream = false;
  std::chrono::seconds history_retention{30 * 24 * 3600};
  // A full image of a shadow's state is stored with about every this many of its history
  // events, so that an as-of read replays at most about this many (StateImage). 0: none.
  std::size_t history_image_every = 64;
  std::chrono::seconds tombstone_retention{48 * 3600};
  std::size_t batch_parallelism = 8;                     // batch operations run at most this many at once
  // A history page ends early, with a cursor, once its events reach this many bytes (it
  // always holds at least one event), so that no page of large events is built whole.
  std::size_t max_page_bytes = std::size_t{4} << 20;
  // Shadows whose last known records are kept, so that a write needs no read: it merges against
  // the cached copy and writes conditionally on the cached versions of both sections. A decision
  // not to write (no change, stale) is only taken on a fresh read. 0 turns the cache off.
  std::size_t cache_entries = 10000;
  bool keeps_history() const { return history || history_from_stream; }

  // The server clock; replaceable in tests. Returns Unix nanoseconds.
  std::function<std::int64_t()> clock;
};

// A report (section reported) or desire (section desired).
struct UpdateRequest {
  ShadowKey key;
  Section section = Section::reported;
  json::object state;
  std::optional<std::uint64_t> version;  // pin: accept only if the section is at this version
  std::string client_token;
  std::optional<std::string> tz;
  MergeMode mode = MergeMode::server_is_master;
  bool acknowledge = true;
};

// The interface a write came through, told to write listeners (so that the MQTT bridge does not
// announce to devices the writes it answers itself).
enum class WriteSource { api, aws_http, aws_mqtt };

// One section's part of a ShadowUpdate.
struct SectionUpdate {
  json::object state;  // merged into the section
  MergeMode mode = MergeMode::server_is_master;
  bool remove = false;  // delete the section instead (it becomes a tombstone); `state` is ignored
};

// A write of one or both sections, stored atomically as one write (the AWS IoT update).
struct ShadowUpdate {
  ShadowKey key;
  std::optional<SectionUpdate> reported;
  std::optional<SectionUpdate> desired;
  std::optional<std::uint64_t> version;  // pin: accept only at this shadow version (shadow_version)
  std::string client_token;
  bool acknowledge = true;
  bool replace_arrays = false;  // arrays are leaves, replaced whole (merge_section)
  // Store every section named even when nothing in it changed, so that each accepted update
  // moves the shadow version, as AWS IoT does. A section removed that was not live gets a new
  // tombstone.
  bool always_store = false;
  bool keep_previous = false;   // return the shadow as the write found it (UpdateResult::previous)
  WriteSource source = WriteSource::api;  // told to the write listeners
  // The shadow as the caller just read it (Store::read): merged against instead of a read of
  // the engine's own, the write conditional on its versions as on a read's; a write that loses
  // throws version_conflict when pinned. Saves a read to a caller that judged the shadow first
  // (bulk jobs).
  const ShadowRecord* base = nullptr;
};

// The one version of a shadow: the sum of its section versions (tombstones included), or,
// where the store shares one version between them (Store::shares_versions), that version. It
// grows with every stored write.
std::uint64_t shadow_version(const ShadowRecord& record, bool shared_versions) noexcept;

// Throws Error::invalid_name for a thing or shadow name no shadow may have.
void validate_key(const ShadowKey& key);

// A section's state as an object in `sp`: {} for a section that does not exist. Throws
// Error(internal) when the stored text is not a JSON object.
json::object section_state(const SectionRecord& section, json::storage_ptr sp = {});

// A shadow as read: both section records (state as JSON text) and the delta.
struct ShadowView {
  ShadowKey key;
  ShadowRecord record;
  json::object delta;
};

struct UpdateResult {
  ShadowView shadow;
  // With ShadowUpdate::keep_previous: both sections as the write found them (equal to
  // shadow.record when nothing was stored).
  std::optional<ShadowRecord> previous;
  bool changed = false;
  std::vector<Change> changes;
  std::vector<Acknowledgement> acknowledged;
  std::vector<std::string> stale;
};

struct DeleteResult {
  ShadowKey key;
  std::vector<Section> deleted;
  ShadowRecord record;  // the tombstones written (versions)
};

struct ShadowList {
  std::vector<ShadowSummary> shadows;
  std::string cursor;  // empty when this is the last page
};

struct ThingList {
  std::vector<std::string> things;
  std::string cursor;
};

// A stored write as a WriteListener is told of it.
struct WriteNotice {
  const ShadowKey& key;
  const ShadowRecord& before;  // both sections as the write found them
  const ShadowRecord& after;   // both sections as stored
  // What the write asked of each section, [0] reported and [1] desired: the state merged in,
  // or null when the write did not name the section or removed it.
  std::array<const json::object*, 2> requested{};
  bool shadow_deleted = false;  // Engine::remove of every section
  std::string_view client_token;
  WriteSource source = WriteSource::api;  // ShadowUpdate::source or remove's
  // The write as the change feed carries it (FeedEntry::json: its change event, with the id,
  // and each stored section's old and new state), whether or not the feed is on.
  std::string_view change;
};

// Follows the writes stored through an engine in this process (the MQTT bridge announces them to
// devices). Told on the writing thread after each stored write, while that shadow's other writers
// in this process wait, so one shadow's writes are told in version order. Nothing durable:
// notifications read the change feed (DeliveryStore::read_feed, or a DynamoDB table's stream).
class WriteListener {
 public:
  virtual ~WriteListener() = default;
  // Must not throw and should be quick: the writer waits.
  virtual void on_write(const WriteNotice& write) noexcept = 0;
};

// The history event of a change event the engine rendered (its "id" holds its time), for
// history written apart from its write: from a DynamoDB table's stream (`--history stream`).
// Throws Error(internal) for text that is no such event.
HistoryEvent history_event_of(std::string_view change_event, std::chrono::seconds retention);

// A set of things: one exact name, or every name that starts with a prefix ("" is all).
struct ThingPattern {
  std::string text;
  bool prefix = false;

  bool matches(std::string_view thing) const noexcept {
    return prefix ? thing.substr(0, text.size()) == text : thing == text;
  }
  friend bool operator==(const ThingPattern&, const ThingPattern&) = default;
};

struct HistoryRequest {
  std::size_t limit = 100;
  bool descending = true;
  std::optional<std::int64_t> since_ns;
  std::optional<std::int64_t> until_ns;
  std::string cursor;
};

struct HistoryPage {
  std::vector<HistoryEvent> events;
  std::string cursor;
};

// One result of a batch: the value or the error it failed with.
template <class T>
using Outcome = std::variant<T, Error>;

// Counters since the engine started; read them any time (relaxed atomics).
struct EngineStats {
  std::atomic<std::uint64_t> stored_writes{0};     // writes that stored something
  std::atomic<std::uint64_t> unchanged_writes{0};  // accepted writes that stored nothing
  std::atomic<std::uint64_t> retries{0};           // read-merge-write attempts repeated after a conflict
  std::atomic<std::uint64_t> conflicts{0};         // writes that failed with version_conflict
  std::atomic<std::uint64_t> stale_values{0};      // timestamped values rejected as not newer
  std::atomic<std::uint64_t> acknowledgements{0};  // desired leaves acknowledged
};

inline constexpr std::size_t kDefaultPageLimit = 100;
inline constexpr std::size_t kMaxPageLimit = 1000;

class Engine {
 public:
  Engine(Store& store, EngineOptions options = {});
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // Throws not_found when neither section exists.
  ShadowView get(const ShadowKey& key);
  // As get(), for threads that must not wait: nullopt when the store cannot read the record now
  // (Store::try_read).
  std::optional<ShadowView> try_get(const ShadowKey& key);
  UpdateResult update(const UpdateRequest& request);
  // Throws invalid_request when it names no section; version_conflict(current shadow version)
  // when a pinned version differs. In UpdateResult, stale paths start with their section.
  UpdateResult update(const ShadowUpdate& request);
  // Deletes one section or, without `section`, every existing one, leaving tombstones.
  // `version` pins a single-section delete; `source` is told to the write listeners. Throws
  // not_found if nothing existed.
  DeleteResult remove(const ShadowKey& key, std::optional<Section> section = std::nullopt,
                      std::optional<std::uint64_t> version = std::nullopt, WriteSource source = WriteSource::api);

  ShadowList list_shadows(const std::string& thing, std::size_t limit = kDefaultPageLimit,
                          const std::string& cursor = {});
  ThingList list_things(const std::string& prefix, std::size_t limit = kDefaultPageLimit,
                        const std::string& cursor = {});
  // The same, limited to things matching one of `scope`: the store is read only within the
  // patterns (a range per prefix, a look-up per exact name), so neither a page nor its cursor
  // tells anything of other things.
  ThingList list_things(const std::string& prefix, std::size_t limit, const std::string& cursor,
                        std::span<const ThingPattern> scope);
  HistoryPage history(const ShadowKey& key, const HistoryRequest& request = {});

  // Results in request order; each item independent. Throws only for a batch over the limit.
  std::vector<Outcome<ShadowView>> batch_get(const std::vector<ShadowKey>& keys);
  std::vector<Outcome<UpdateResult>> batch_update(const std::vector<UpdateRequest>& requests);

  // Drops expired tombstones and history events.
  std::size_t purge();

  // The change feed for notifications: while on, every stored write also carries its feed
  // entry (FeedEntry) into the store, atomically with the state. Off by default, and then a
  // write costs nothing extra; the notification layer turns it on while a registration is
  // enabled.
  void set_change_feed(bool on) noexcept { feed_.store(on, std::memory_order_relaxed); }
  bool change_feed() const noexcept { return feed_.load(std::memory_order_relaxed); }
  // Adds a listener told of every stored write, until removed. Add before writes begin and
  // remove after they end (not synchronised with writes). A write costs nothing extra while
  // none is added.
  void add_write_listener(WriteListener& listener) { write_listeners_.push_back(&listener); }
  void remove_write_listener(WriteListener& listener) { std::erase(write_listeners_, &listener); }
  // Declared indexes: every later write carries the index updates `indexer` decides (null:
  // none). Set before the engine serves writes.
  void set_indexer(Indexer* indexer) noexcept { indexer_ = indexer; }

  const EngineOptions& options() const noexcept { return options_; }
  const EngineStats& stats() const noexcept { return stats_; }
  Store& store() noexcept { return store_; }

 private:
  class Impl;
  struct UpdatePlan;
  UpdateResult run(const UpdatePlan& plan);
  // What get() answers for the record it read (caching it); throws not_found as get() does.
  ShadowView view_of(const ShadowKey& key, ShadowRecord record);
  // Stores `write` with the index updates the indexer decides from `before` and `changes`.
  void store_write(ShadowWrite& write, const ShadowRecord& before, std::span<const Change> changes);

  Store& store_;
  EngineOptions options_;
  EngineStats stats_;
  std::atomic<bool> feed_{false};
  std::vector<WriteListener*> write_listeners_;
  Indexer* indexer_ = nullptr;
  std::unique_ptr<Impl> impl_;
};

// Cursor encoding (opaque to clients): base64url of the last key of a page.
std::string encode_cursor(std::string_view last_key);
// Throws invalid_request for a malformed cursor.
std::string decode_cursor(std::string_view cursor);

}  // namespace deviceshadow
