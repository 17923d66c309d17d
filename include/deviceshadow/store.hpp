// The storage interface. A Store keeps section records, history events and the thing index; it
// knows nothing of merging. Implementations: memory, SQLite, DynamoDB (docs/storage.md shows how
// SQLite and DynamoDB lay the data out).
//
// Every Store is safe for concurrent use from many threads without external locking.
#pragma once

#include "deviceshadow/document.hpp"

#include <cstdint>
#include <functional>
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
  // The write's change-feed entry (see FeedEntry), present while the feed is on. A store with
  // an outbox appends it in the write's transaction; DynamoDB's feed is the table's stream.
  std::optional<std::string> feed;
};

// One stored write as the change feed carries it to notifications (the transactional outbox of
// the SQLite and memory stores): {"event": <the change event>, "reported"|"desired":
// {"old": <state before>, "new": <state after>}} for each section the write stored.
struct FeedEntry {
  std::uint64_t seq = 0;  // assigned by the store: increasing in commit order, never reused
  ShadowKey key;
  std::string json;

  friend bool operator==(const FeedEntry&, const FeedEntry&) = default;
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

// A notification registration as stored: the store keeps it whole and knows nothing of its
// content, which the notification layer (src/notify) validates and interprets.
struct RegistrationRecord {
  std::string id;
  std::string json;                // the registration document as accepted
  std::int64_t updated_ns = 0;     // when it was last put

  friend bool operator==(const RegistrationRecord&, const RegistrationRecord&) = default;
};

// An event a registration's target refused for good or failed maxAttempts times: kept until it
// is redriven or deleted, or until it expires.
struct DeadLetter {
  std::string registration;
  std::string event_id;  // the CloudEvent's id
  std::string event;     // the CloudEvent as last sent
  int attempts = 0;
  std::string last_error;
  std::int64_t failed_ns = 0;
  std::int64_t expires_ns = INT64_MAX;  // purge may drop it from then on; INT64_MAX: never

  friend bool operator==(const DeadLetter&, const DeadLetter&) = default;
};

class Store {
 public:
  virtual ~Store() = default;

  // Both sections of each key, in key order; tombstones included. Strongly consistent.
  virtual std::vector<ShadowRecord> read(std::span<const ShadowKey> keys) = 0;
  ShadowRecord read(const ShadowKey& key) { return read(std::span<const ShadowKey>(&key, 1)).front(); }

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
  virtual std::vector<HistoryEvent> history(const ShadowKey& key, const HistoryQuery& query) = 0;
  // The history of every shadow in time order, for live streams resuming at a time (docs/streams.md):
  // events with timestamp_ns >= since_ns, ordered by (timestamp, thing, name, id), strictly
  // after `after` in that order when given, at most limit. A store that cannot (DynamoDB)
  // throws Error(unavailable).
  virtual std::vector<ShadowHistoryEvent> history_since(std::int64_t since_ns, const ShadowHistoryEvent* after,
                                                        std::size_t limit) = 0;
  // Stores history events on their own, not with their writes (DynamoDB: written from the
  // table's stream, `--history stream`), durably, all or (after a failure) some of them.
  // Idempotent: an event stored again under the same id (a stream record read twice) stays one
  // event.
  virtual void append_history(std::span<const ShadowHistoryEvent> events) = 0;

  // True when both sections of a shadow share one version (DynamoDB's combined layout): every
  // write then moves the version of both.
  virtual bool shares_versions() const { return false; }

  // Drops tombstones, history events and dead letters whose expires_ns <= now_ns. Returns how
  // many.
  virtual std::size_t purge(std::int64_t now_ns) = 0;
  // Readiness: nothing when the store can serve requests, else why it cannot.
  virtual std::optional<std::string> unready() = 0;

  // Claims `id` for `owner` until `expires_ns`: true when no claim of it is held, the one held
  // expired before `now_ns`, or it is `owner`'s own (so a retried claim is granted again). For
  // work that every process on one store receives alike and only one may do (an MQTT request
  // each shadowd hears). A store that one process uses (memory, SQLite) grants every claim.
  virtual bool claim(std::string_view id, std::string_view owner, std::int64_t now_ns, std::int64_t expires_ns) = 0;

  // Notification registrations, kept in the store so that every process on it sees one set.
  // put creates or replaces by id; list is sorted by id; remove says whether one existed and
  // also drops its delivery state (checkpoint, dead letters).
  virtual void put_registration(const RegistrationRecord& registration) = 0;
  virtual std::vector<RegistrationRecord> list_registrations() = 0;
  virtual bool remove_registration(std::string_view id) = 0;

  // Delivery state of a registration. The checkpoint is the feed seq up to which every entry
  // is delivered or dead-lettered (outbox stores; DynamoDB keeps its own per stream shard and
  // throws Error(unavailable) here). Dead letters are listed by event id, ids > after.
  virtual std::optional<std::uint64_t> checkpoint(std::string_view registration) = 0;
  virtual void put_checkpoint(std::string_view registration, std::uint64_t seq) = 0;
  // Stores dead letters (of any registrations), each replacing the one of its registration and
  // event id: at once where the store can (SQLite: one transaction; DynamoDB: batches of 25,
  // so that a failure may leave some stored). A letter named twice is stored as its last.
  virtual void put_dead_letters(std::span<const DeadLetter> letters) = 0;
  void put_dead_letter(const DeadLetter& letter) { put_dead_letters(std::span<const DeadLetter>(&letter, 1)); }
  virtual std::vector<DeadLetter> dead_letters(std::string_view registration, std::string_view after,
                                               std::size_t limit) = 0;
  // How many dead letters the registration has, without reading their events.
  virtual std::uint64_t count_dead_letters(std::string_view registration) = 0;
  // Removes the registration's dead letters with the given event ids, or all of them (nullopt),
  // at once where the store can (SQLite: one transaction; DynamoDB: batches of 25). Returns how
  // many of them there were (an id named twice counts once).
  virtual std::size_t remove_dead_letters(std::string_view registration,
                                          std::optional<std::span<const std::string>> event_ids) = 0;
  bool remove_dead_letter(std::string_view registration, std::string_view event_id) {
    const std::string id(event_id);
    return remove_dead_letters(registration, std::span<const std::string>(&id, 1)) > 0;
  }

  // The outbox: entries with seq > after, in seq order, at most limit. Throws
  // Error(unavailable) on a store whose feed is not an outbox (DynamoDB: its stream).
  virtual std::vector<FeedEntry> read_feed(std::uint64_t after, std::size_t limit) = 0;
  // Drops the entries with seq <= up_to: every consumer has them.
  virtual void trim_feed(std::uint64_t up_to) = 0;
  // The seq of the last entry ever appended (0: none), trimmed or not: a registration created
  // now starts after it.
  virtual std::uint64_t feed_end() = 0;
  // Called after each commit that appended entries (once for a group commit), on the thread
  // that committed and before the commit's writes return, so that the feed's reader needs not
  // poll; must neither throw nor call the store. Replacing it waits for a call in progress. A
  // store without an outbox never calls it.
  virtual void set_feed_listener(std::function<void()> listener) = 0;
};

}  // namespace deviceshadow
