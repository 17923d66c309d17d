// The delivery storage interface: what notifications (src/notify) and the MQTT bridge's claims
// keep in the store, beside the shadows (store.hpp): registrations, each one's checkpoint in the
// change feed, dead letters, claims, and the feed itself where it is an outbox. Every backend
// (memory, SQLite, DynamoDB) implements it in the same object as its Store (StoreBackend), on
// the same database or table: a write's feed entry is stored in the write's transaction
// (ShadowWrite::feed) and read back here.
//
// Every DeliveryStore is safe for concurrent use from many threads without external locking.
#pragma once

#include "deviceshadow/store.hpp"

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace deviceshadow {

// One stored write as the change feed carries it to notifications (the transactional outbox of
// the SQLite and memory stores): {"event": <the change event>, "reported"|"desired":
// {"old": <state before>, "new": <state after>}} for each section the write stored.
struct FeedEntry {
  std::uint64_t seq = 0;  // assigned by the store: increasing in commit order, never reused
  ShadowKey key;
  std::string json;

  friend bool operator==(const FeedEntry&, const FeedEntry&) = default;
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
  std::int64_t expires_ns = INT64_MAX;  // purge_dead_letters may drop it from then on; INT64_MAX: never

  friend bool operator==(const DeadLetter&, const DeadLetter&) = default;
};

class DeliveryStore {
 public:
  virtual ~DeliveryStore() = default;

  // Claims `id` for `owner` until `expires_ns`: true when no claim of it is held, the one held
  // expired before `now_ns`, or it is `owner`'s own (so a retried claim is granted again). For
  // work that every process on one store receives alike and only one may do (an MQTT request
  // each shadowd hears). A store that one process uses (memory, SQLite) grants every claim.
  virtual bool claim(std::string_view id, std::string_view owner, std::int64_t now_ns, std::int64_t expires_ns) = 0;

  // Drops dead letters whose expires_ns <= now_ns (DynamoDB: and expired claims). Returns how
  // many.
  virtual std::size_t purge_dead_letters(std::int64_t now_ns) = 0;

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
