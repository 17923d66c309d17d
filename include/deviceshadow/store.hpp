// The shadow storage interface. A Store keeps section records, history events and the thing
// index; it knows nothing of merging. What notifications keep (registrations, checkpoints, dead
// letters, claims, the outbox) is the DeliveryStore's (delivery_store.hpp). Implementations:
// memory, SQLite, DynamoDB, each one object implementing both (StoreBackend, store_backend.hpp);
// docs/storage.md shows how SQLite and DynamoDB lay the data out.
//
// Every Store is safe for concurrent use from many threads without external locking.
#pragma once

#include "deviceshadow/document.hpp"
#include "deviceshadow/index.hpp"

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace deviceshadow {

struct ShadowKey {
  std::string thing;
  std::string name;

  friend bool operator==(const ShadowKey&, const ShadowKey&) = default;
  friend auto operator<=>(const ShadowKey&, const ShadowKey&) = default;
};

// One section as stored. Version 0 means the section never existed (or its tombstone expired).
struct SectionRecord {
  std::uint64_t version = 0;
  bool deleted = false;           // a tombstone: reads as absent but keeps the version (ABA guard)
  std::int64_t timestamp_ns = 0;  // server time of the last accepted write (or of the delete)
  std::string client_token;
  std::string tz;
  std::string state_json = "{}";  // compact JSON of the state; "{}" for tombstones
  // When each leaf of the state last changed (leaf_times.hpp): compact JSON of Unix ns, "" for
  // tombstones and for data written before times were kept (every leaf at timestamp_ns).
  std::string times_json;
  std::string write_id;           // globally unique id of the write that produced this record
                                  // (a store may use it as an idempotency token, ≤ 36 chars)
  std::int64_t expires_ns = 0;    // tombstones: when purge may drop the record; else 0

  bool exists() const noexcept { return version > 0 && !deleted; }
};

struct ShadowRecord {
  SectionRecord reported;
  SectionRecord desired;

  SectionRecord& section(Section s) noexcept { return s == Section::reported ? reported : desired; }
  const SectionRecord& section(Section s) const noexcept { return s == Section::reported ? reported : desired; }
  bool exists() const noexcept { return reported.exists() || desired.exists(); }
};

// One entry of the history journal (docs/semantics.md, "History").
struct HistoryEvent {
  std::string id;  // unique within the shadow, time-ordered: "{timestamp ns, 20 digits}#{R|D|C|X}{version}"
  std::int64_t timestamp_ns = 0;
  std::int64_t expires_ns = 0;  // purge may drop it from then on
  std::string json;             // the change event as rendered by the API
};

// A full image of a shadow's sections right after one of its history events, stored with that
// event every so many events (EngineOptions::history_image_every): time travel replays history
// from the nearest image at or before a moment instead of from the shadow's creation. Only a
// short cut: a read works without any, and images expire like events.
struct StateImage {
  std::string event_id;         // the event it was taken right after
  std::int64_t expires_ns = 0;  // purge may drop it from then on
  std::string json;             // opaque to the store
};

// A history event and the shadow it belongs to.
struct ShadowHistoryEvent {
  ShadowKey key;
  HistoryEvent event;
};

// A section written by a ShadowWrite, conditional on the version the writer read.
struct SectionPut {
  Section section = Section::reported;
  std::uint64_t expected_version = 0;  // the stored version (tombstones included) must equal it
  SectionRecord record;                // the new record; record.version == expected_version + 1
  bool was_live = false;               // the section existed (not a tombstone) at expected_version
};

// A section a write does not store but whose version must still be `expected_version`.
struct SectionCheck {
  Section section = Section::reported;
  std::uint64_t expected_version = 0;
};

// Everything one write stores, atomically: the sections, the history event, the thing index.
struct ShadowWrite {
  ShadowKey key;
  std::vector<SectionPut> sections;  // one or two, distinct sections
  std::optional<HistoryEvent> event;
  std::vector<SectionCheck> checks;  // conditions only, on sections not in `sections`
  // The section not in `sections` as the writer read it, or null. A store keeping both sections
  // in one item rewrites the item whole from it (reading the item when it is null); the
  // conditions still decide whether the write lands.
  const SectionRecord* unchanged = nullptr;
  // The write's change-feed entry (the json of a FeedEntry, delivery_store.hpp), present while
  // the feed is on. A store with an outbox appends it in the write's transaction, where its
  // delivery store reads it (DeliveryStore::read_feed); DynamoDB's feed is the table's stream.
  std::optional<std::string> feed;
  std::optional<StateImage> image;  // only with `event`, stored in the same transaction
  // The shadow's index entries the write changes (Indexer).
  std::vector<IndexUpdate> index;
  // Non-zero: the declaration generation `index` was decided by; a store shared by processes
  // throws IndexDeclarationChanged, storing nothing, when its declaration is no longer at it.
  std::uint64_t index_generation = 0;
};

// A shadow's index entries as a background build computed them from the sections it read.
struct IndexedShadow {
  ShadowKey key;
  std::uint64_t reported_version = 0, desired_version = 0;  // as read
  std::vector<IndexUpdate> updates;
};

struct ShadowSummary {
  std::string name;
  std::uint64_t reported_version = 0;
  std::uint64_t desired_version = 0;
  std::int64_t timestamp_ns = 0;  // the later of the two sections' timestamps
};

struct HistoryQuery {
  std::size_t limit = 100;
  bool descending = true;
  std::int64_t since_ns = INT64_MIN;  // inclusive
  std::int64_t until_ns = INT64_MAX;  // inclusive
  std::string after_id;               // exclusive, in the query's order; empty = from the start
  // Stop once the events returned total more than this many bytes of JSON (the event that
  // crosses it is included), so that a page of large events is never read whole.
  std::size_t max_bytes = SIZE_MAX;
};

class Store {
 public:
  virtual ~Store() = default;

  // Both sections of each key, in key order; tombstones included. Strongly consistent.
  virtual std::vector<ShadowRecord> read(std::span<const ShadowKey> keys) = 0;
  ShadowRecord read(const ShadowKey& key) { return read(std::span<const ShadowKey>(&key, 1)).front(); }
  // As read(key), for threads that must not wait (the HTTP I/O threads): the record when it can
  // be read now, without waiting behind other work (every SQLite reader busy) or on a network;
  // nullopt otherwise (the default). A read from a local disk counts as now.
  virtual std::optional<ShadowRecord> try_read(const ShadowKey& /*key*/) { return std::nullopt; }

  // Applies `write` atomically and durably before returning. Throws
  // Error::version_conflict(current) when a section's stored version differs from its
  // expected_version; then nothing is stored.
  virtual void write(const ShadowWrite& write) = 0;

  // Shadows of a thing with at least one live section, sorted by name, names > after_name.
  virtual std::vector<ShadowSummary> list_shadows(std::string_view thing, std::string_view after_name,
                                                  std::size_t limit) = 0;
  // Things with at least one live section whose name starts with prefix, sorted bytewise,
  // things > after_thing.
  virtual std::vector<std::string> list_things(std::string_view prefix, std::string_view after_thing,
                                               std::size_t limit) = 0;
  // Shadows with at least one live section, in (thing, name) order, after `after` when given,
  // at most limit (a background build's walk). The default lists things, then their shadows.
  virtual std::vector<ShadowKey> list_shadow_keys(const ShadowKey* after, std::size_t limit);
  virtual std::vector<HistoryEvent> history(const ShadowKey& key, const HistoryQuery& query) = 0;
  // The history of every shadow in time order, for live streams resuming at a time (docs/streams.md):
  // events with timestamp_ns >= since_ns, ordered by (timestamp, thing, name, id), strictly
  // after `after` in that order when given, at most limit. DynamoDB reads its time index (eventually
  // consistent; a table without it throws Error(unavailable)).
  virtual std::vector<ShadowHistoryEvent> history_since(std::int64_t since_ns, const ShadowHistoryEvent* after,
                                                        std::size_t limit) = 0;
  // Stores history events on their own, not with their writes (DynamoDB: written from the
  // table's stream, `--history stream`), durably, all or (after a failure) some of them.
  // Idempotent: an event stored again under the same id (a stream record read twice) stays one
  // event.
  virtual void append_history(std::span<const ShadowHistoryEvent> events) = 0;
  // The newest image of the shadow taken at or before event `event_id` (ids compare
  // bytewise), if any.
  virtual std::optional<StateImage> image_before(const ShadowKey& key, std::string_view event_id) = 0;

  // True when both sections of a shadow share one version (DynamoDB's combined layout): every
  // write then moves the version of both.
  virtual bool shares_versions() const { return false; }

  // Drops tombstones, history events and images whose expires_ns <= now_ns. Returns how many. (Expired
  // dead letters are the delivery store's: DeliveryStore::purge_dead_letters.)
  virtual std::size_t purge(std::int64_t now_ns) = 0;
  // Readiness: nothing when the store can serve requests, else why it cannot.
  virtual std::optional<std::string> unready() = 0;

  // Declared indexes (index.hpp, docs/queries.md). A store without them declares none and
  // refuses to: the defaults below.
  //
  // The declared fields, in the order declared, and their generation.
  virtual IndexDeclaration index_fields() { return {}; }
  // Replaces the declared fields if the declaration is still at `generation` (else throws
  // IndexDeclarationChanged); a new list of fields moves the generation on. The entries of
  // fields left out are deleted, in the same transaction or (a store whose entries of a field
  // declared again are new ones: DynamoDB) by remove_undeclared_entries. Returns the generation
  // stored. Throws invalid_request on a store without indexes.
  virtual std::uint64_t put_index_fields(std::span<const IndexFieldState> fields, std::uint64_t generation);
  // Deletes what put_index_fields left of the entries of fields left out; called without holding
  // writes up.
  virtual void remove_undeclared_entries() {}
  // Adds the entries of shadows a background build read (their updates remove nothing), each
  // only if its sections are still at the versions it read. Returns the keys of those whose
  // versions moved (stored nothing for them: the build reads them again).
  virtual std::vector<ShadowKey> put_index_entries(std::span<const IndexedShadow> shadows);
  // Entries of `field` in `range`, in (value, thing, name) order (reversed when
  // range.descending), after `after` in that order when given, at most `limit`.
  virtual std::vector<IndexHit> index_range(std::string_view field, const IndexRange& range, const IndexHit* after,
                                            std::size_t limit);
  // How many entries of `field` are in `range`, counting at most `cap`.
  virtual std::uint64_t index_count(std::string_view field, const IndexRange& range, std::uint64_t cap);
};

}  // namespace deviceshadow
