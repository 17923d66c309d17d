// The dispatcher: delivers the change feed to the targets of the registrations
// (docs/notifications.md).
//
// It owns the registrations of one store: creating, replacing and removing them goes through
// it, so that the engine's change feed is on exactly while an enabled registration exists and
// each registration's worker starts and stops with it.
//
// One reader thread pages through the feed for every registration, reads each entry once and
// hands it to the workers. Each enabled registration has a worker: it keeps the entries it
// wants per shadow, and its sender thread keeps the head events of up to `concurrency` shadows
// in flight on the target. A shadow's events go out one at a time in feed (= version) order;
// shadows do not wait for each other, and registrations never wait for each other (a worker
// far behind is read for separately). A failed delivery is retried with jittered exponential
// backoff; after maxAttempts, or when the target refuses the event for good, it becomes a dead
// letter and the shadow's next event goes.
//
// The feed is the store's outbox (SQLite, memory) or, on DynamoDB, what this process reads of
// the table's stream (notify/stream/stream_feed.hpp). The checkpoint (stored in the feed, so
// that a restart resumes there) is the feed seq up to which every entry is delivered,
// dead-lettered or not wanted; it is written at most every checkpoint_interval, so a crash
// redelivers what followed it (receivers deduplicate by id).
// A worker holds at most `window` entries between its checkpoint and its position, so memory
// stays bounded however long a target is down; the feed itself is trimmed up to the smallest
// stored checkpoint of the enabled registrations.
#pragma once

#include "deviceshadow/engine.hpp"
#include "deviceshadow/histogram.hpp"
#include "notify/feed.hpp"
#include "notify/registration.hpp"
#include "notify/target.hpp"

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace deviceshadow::notify {

class FeedSignal;
class SenderPool;

struct DispatcherOptions {
  std::size_t concurrency = 8;        // deliveries in flight per registration
  std::size_t window = 10000;         // feed entries a registration holds ahead of its checkpoint
  std::size_t window_bytes = std::size_t{64} << 20;  // and their bytes (one entry more may pass it)
  std::size_t page = 500;             // feed entries read at once
  std::chrono::milliseconds poll{200};  // the longest the reader sleeps when nobody wakes it
  std::chrono::milliseconds retry_base{100};
  std::chrono::milliseconds retry_max{60000};
  std::chrono::milliseconds checkpoint_interval{100};
  std::chrono::milliseconds trim_interval{1000};
  std::chrono::milliseconds expiry_sweep{250};  // how often a worker looks for events past their maxAgeSeconds
  // A feed held in memory that is nearly full (Feed::pressed) makes the registrations holding it
  // back spill their events to dead letters, if their oldest event has waited at least this long
  // since they took it from the feed (one only briefly behind is waited for).
  std::chrono::milliseconds spill_after{10000};
  int nice = 10;  // the delivery threads run this many nice levels below the process: they yield the CPU to request handling
  // Dead letters: each expires this long after it failed (purge drops it; DynamoDB's TTL), and a
  // registration keeps at most max_dead_letters (storing more removes the oldest). A worker
  // counts its registration's letters again before it removes any, at most every
  // dead_letter_recount (the count it keeps misses expired letters).
  std::chrono::seconds dead_letter_retention{14 * 24 * 3600};
  std::size_t max_dead_letters = 100000;
  std::chrono::milliseconds dead_letter_recount{60000};
  // The threads that deliver for every registration (each registration's deliveries take
  // turns on them; a turn never waits on a network).
  std::size_t sender_threads = 4;
  // Registrations a PUT may create at most: each enabled one costs its target's descriptors
  // (docs/notifications.md).
  std::size_t max_registrations = 100;
  bool keep_feed_on = false;  // the change feed stays on without registrations (history written from it)
};

// A registration's delivery counters since this process started (while it is enabled), and
// its backlog.
struct RegistrationStatus {
  std::string id;
  std::uint64_t pending = 0;       // feed entries after its position not yet delivered or passed
  double lag_seconds = 0;          // age of the oldest event held and not yet delivered
  std::uint64_t delivered = 0;
  std::uint64_t failed = 0;        // failed attempts
  std::uint64_t dead_lettered = 0; // events dead-lettered
  std::uint64_t dead_letters = 0;  // dead letters stored now
  std::uint64_t dead_letters_evicted = 0;  // the oldest dead letters removed to keep max_dead_letters
  std::optional<std::string> last_error;
  Histogram latency{Histogram::kDeliveryBounds};  // from the write to its delivery
};

// Builds the target of a registration. Throws Error(invalid_request, "target.type") for a type
// this build cannot deliver to.
using TargetFactory = std::function<std::unique_ptr<Target>(const Registration&)>;
// Receives the dispatcher's log lines (dead letters, failures of the feed or the store).
using NotifyLog = std::function<void(bool error, std::string_view message,
                                     std::vector<std::pair<std::string, std::string>> fields)>;

// The target of a registration: webhook, sqs, sns or mqtt.
std::unique_ptr<Target> make_target(const Registration& registration);

class Dispatcher {
 public:
  // Loads the registrations `store` keeps and starts the enabled ones, reading `feed` (null:
  // the store's outbox). Without a feed (a DynamoDB table without a stream) registrations can
  // be listed but not put (Error unavailable). `engine` writes on the store's other half (the
  // same backend): the dispatcher turns its change feed on and off.
  Dispatcher(Engine& engine, DeliveryStore& store, DispatcherOptions options = {}, TargetFactory targets = make_target,
             NotifyLog log = {}, Feed* feed = nullptr);
  ~Dispatcher();  // stops every worker; stored checkpoints stay where they got
  Dispatcher(const Dispatcher&) = delete;
  Dispatcher& operator=(const Dispatcher&) = delete;

  // Creates or replaces a registration (validated by parse_registration; the target must be
  // one this build delivers to). A new or re-enabled registration starts at the feed's end.
  // Throws invalid_request (with the limit) for a new id once max_registrations exist, and
  // unavailable ("cannot start the target: too many open files") when its target or worker
  // cannot start: then nothing is stored, and a replaced registration is as it was.
  Registration put(std::string_view id, std::string_view json);
  std::vector<Registration> list() const;
  std::optional<Registration> get(std::string_view id) const;
  // Stops its worker and removes it with its checkpoint and dead letters.
  bool remove(std::string_view id);
  // Reloads the stored registrations and starts, restarts or stops workers to match: for
  // several processes on one store, which learn of each other's puts and removes this way.
  // A registration new to this process starts at its feed's end. Throws what the store throws.
  void refresh();

  std::optional<RegistrationStatus> status(std::string_view id) const;
  std::vector<RegistrationStatus> statuses() const;

  // Delivers the named dead letters again (all when nullopt, at most `window` not already
  // queued), after their shadows' queued events; each is removed once delivered, or stored
  // again with its attempts added up. Returns how many were queued. Throws not_found for an
  // unknown registration, invalid_request for a disabled one.
  std::size_t redrive(std::string_view id, const std::optional<std::vector<std::string>>& event_ids);
  // The registration's dead letters by event id, ids > after, at most `limit`.
  std::vector<DeadLetter> dead_letters(std::string_view id, std::string_view after, std::size_t limit) const {
    return store_.dead_letters(id, after, limit);
  }
  // Deletes the named dead letters (all when nullopt), cancelling their queued redrives;
  // returns how many were deleted.
  std::size_t delete_dead_letters(std::string_view id, const std::optional<std::vector<std::string>>& event_ids);
  // Drops the dead letters of every registration that expired (dead_letter_retention after
  // they failed; on DynamoDB the table's TTL does it as well). Returns how many.
  std::size_t purge_dead_letters();

  // Whether there is a feed to deliver from.
  bool available() const noexcept { return feed_ != nullptr; }

 private:
  class Worker;
  class Reader;
  class Trimmer;
  class Reaper;
  struct FeedItem;
  struct Entry {
    Registration registration;
    std::shared_ptr<Worker> worker;    // null while disabled or not startable; the reader shares it
    std::optional<std::string> fault;  // why an enabled registration is not running
  };
  // Require mutex_.
  // Starts (or restarts) the registration's worker when it is enabled: from its checkpoint when
  // `resume` or it was running, else from the feed's end. Throws what starting throws.
  void run(Entry& entry, const Registration& r, std::unique_ptr<Target> target, bool resume);
  // run() for a stored registration; failures are logged and kept as the entry's fault.
  void adopt(const RegistrationRecord& record, bool resume);
  // `predecessor`: the registration's previous worker (else the one still stopping, if any).
  std::shared_ptr<Worker> start_worker(const Registration& r, std::unique_ptr<Target> target, std::uint64_t checkpoint,
                                       RegistrationStatus counters, std::shared_ptr<Worker> predecessor = nullptr);
  // Stops the entry's worker without waiting (the reaper finishes it); `removed`: the
  // registration is gone, nothing more is stored for it.
  void stop_worker(std::string_view id, Entry& entry, bool removed);
  void update_feed_switch();
  // Throws when `id` is new and max_registrations exist.
  void check_registration_limit(std::string_view id) const;

  Engine& engine_;
  DeliveryStore& store_;
  DispatcherOptions options_;
  TargetFactory targets_;
  NotifyLog log_;
  std::unique_ptr<Feed> own_feed_;
  Feed* feed_ = nullptr;

  mutable std::mutex mutex_;  // guards registrations_; held while workers start and stop
  std::map<std::string, Entry, std::less<>> registrations_;
  std::unique_ptr<FeedSignal> signal_;
  std::unique_ptr<SenderPool> pool_;  // outlives the workers, which the reaper finishes
  std::unique_ptr<Reaper> reaper_;
  // Workers still stopping, by registration: the next worker of the same id waits for its
  // predecessor before it sends anything (guarded by mutex_).
  std::map<std::string, std::weak_ptr<Worker>, std::less<>> retiring_;
  std::unique_ptr<Reader> reader_;
  std::unique_ptr<Trimmer> trimmer_;
};

// Appends the notification metrics of each enabled registration (label registration), in the
// Prometheus text format.
void render_metrics(std::string& out, const std::vector<RegistrationStatus>& registrations);

}  // namespace deviceshadow::notify
