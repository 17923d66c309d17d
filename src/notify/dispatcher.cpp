#include "notify/dispatcher.hpp"

#include "deviceshadow/backoff.hpp"
#include "deviceshadow/error.hpp"
#include "deviceshadow/timestamp.hpp"
#include "notify/event.hpp"
#include "notify/sender_pool.hpp"

#include <algorithm>
#include <cctype>
#include <atomic>
#include <condition_variable>
#include <deque>
#include <set>
#include <stdexcept>
#include <system_error>
#include <thread>
#include <unordered_map>
#include <unordered_set>

namespace deviceshadow::notify {

// Wakes the readers when a write appended to the feed; the generation tells a reader that
// looked at the feed before the wake-up that it must look again. A write takes the lock only
// when a reader waits (sequentially consistent: either the writer sees the waiter, or the
// waiter sees the new generation).
class FeedSignal {
 public:
  void notify() {
    generation_.fetch_add(1);
    if (waiters_.load() == 0) return;
    std::lock_guard lock(mutex_);  // orders the wake-up after the waiter's check
    cv_.notify_all();
  }
  std::uint64_t generation() const { return generation_.load(); }
  void wait(std::uint64_t seen, std::chrono::milliseconds timeout) {
    std::unique_lock lock(mutex_);
    waiters_.fetch_add(1);
    cv_.wait_for(lock, timeout, [&] { return generation_.load() != seen; });
    waiters_.fetch_sub(1);
  }

 private:
  std::atomic<std::uint64_t> generation_{0};
  std::atomic<int> waiters_{0};
  std::mutex mutex_;
  std::condition_variable cv_;
};

namespace {

using Clock = std::chrono::steady_clock;

std::int64_t now_ns() { return now().unix_nanos(); }

// Calls `each` on the registration's dead letters in id order, reading a page at a time,
// until it returns false. `each` may move from the letter it is given.
void for_each_dead_letter(DeliveryStore& store, std::string_view registration,
                          const std::function<bool(DeadLetter&)>& each) {
  constexpr std::size_t kPage = 1000;
  std::string after;
  for (;;) {
    std::vector<DeadLetter> page = store.dead_letters(registration, after, kPage);
    if (page.empty()) return;
    after = page.back().event_id;
    for (DeadLetter& letter : page) {
      if (!each(letter)) return;
    }
    if (page.size() < kPage) return;
  }
}

// When a dead letter that failed at `failed_ns` expires (saturating).
std::int64_t dead_letter_expiry(std::int64_t failed_ns, std::chrono::seconds retention) {
  constexpr std::int64_t kNanos = 1'000'000'000;
  if (retention.count() >= INT64_MAX / kNanos) return INT64_MAX;
  const std::int64_t ns = retention.count() * kNanos;
  return failed_ns > INT64_MAX - ns ? INT64_MAX : failed_ns + ns;
}

// The wanted feed entries a worker has not finished, with their write times and when the worker
// took them from the feed, by seq. They are added in seq order and finished in any order: a
// sorted deque that keeps finished entries only until the oldest open one before them finishes,
// compacted when they outnumber the open ones (so it holds at most twice the open entries and a
// few more).
class OpenEntries {
 public:
  void add(std::uint64_t seq, std::int64_t written_ns, std::int64_t taken_ns) {
    entries_.push_back({seq, written_ns, taken_ns, false});
    written_.insert(written_ns);
    ++open_;
  }
  // Finishes `seq`; false when it is not open.
  bool finish(std::uint64_t seq) {
    auto it = std::lower_bound(entries_.begin(), entries_.end(), seq, [](const Entry& e, std::uint64_t s) { return e.seq < s; });
    if (it == entries_.end() || it->seq != seq || it->finished) return false;
    it->finished = true;
    written_.erase(written_.find(it->written_ns));
    --open_;
    while (!entries_.empty() && entries_.front().finished) entries_.pop_front();
    if (entries_.size() > 2 * open_ + 64) std::erase_if(entries_, [](const Entry& e) { return e.finished; });
    return true;
  }
  std::size_t size() const { return open_; }
  bool empty() const { return open_ == 0; }
  // The oldest open entry's seq and when it was taken (the earliest of the open entries');
  // requires !empty().
  std::uint64_t oldest_seq() const { return entries_.front().seq; }
  std::int64_t oldest_taken_ns() const { return entries_.front().taken_ns; }
  // The earliest write time of the open entries, whichever holds it (on a table's stream, a shard
  // read again after a takeover brings old writes behind newer ones); requires !empty().
  std::int64_t oldest_written_ns() const { return *written_.begin(); }

 private:
  struct Entry {
    std::uint64_t seq;
    std::int64_t written_ns;
    std::int64_t taken_ns;
    bool finished;
  };
  std::deque<Entry> entries_;  // the front is open
  std::multiset<std::int64_t> written_;  // the open entries' write times
  std::size_t open_ = 0;
};

}  // namespace

std::unique_ptr<Target> make_target(const Registration& r) {
  if (const auto* webhook = std::get_if<WebhookTarget>(&r.target)) return make_webhook_target(*webhook);
  if (const auto* sqs = std::get_if<SqsTarget>(&r.target)) return make_sqs_target(*sqs);
  if (const auto* sns = std::get_if<SnsTarget>(&r.target)) return make_sns_target(*sns);
  return make_mqtt_target(std::get<MqttTarget>(r.target));
}

// A feed entry, read once by the dispatcher's reader and shared by the workers that want it.
struct Dispatcher::FeedItem {
  std::uint64_t seq = 0;
  std::optional<FeedEntryText> entry;  // nullopt: unreadable, passed over

  // The shadow as the write left it (FeedEntryText::record_after), for registrations' filters:
  // read from the store once, by the first one that needs it. Throws what the store throws.
  const ShadowRecord& after(Store& store) const {
    std::lock_guard lock(mutex_);
    if (!after_) {
      const FeedWrite& w = entry->write();
      after_ = entry->record_after(store.read(ShadowKey{std::string(w.thing), std::string(w.name)}));
    }
    return *after_;
  }

 private:
  mutable std::mutex mutex_;
  mutable std::optional<ShadowRecord> after_;
};

// One enabled registration's delivery: it takes the entries it wants from the reader's pages
// (up to `window` unfinished) and delivers them in turns on the dispatcher's sender threads.
class Dispatcher::Worker final : public SenderPool::Task {
 public:
  // `counters`: the status of the registration's previous worker, whose counts go on.
  // `room`: called when the window, too full for a page before, has room for one again.
  // `predecessor`: the registration's previous worker, still stopping: this one takes no entry
  // before it has stopped, and then goes on from where it stopped, with its counters (a
  // shadow's events stay in order, and none is sent twice).
  Worker(SenderPool& pool, DeliveryStore& store, Feed& feed, Registration registration, std::unique_ptr<Target> target,
         std::uint64_t checkpoint, const DispatcherOptions& options, const NotifyLog& log, std::function<void()> room,
         RegistrationStatus counters, std::shared_ptr<Worker> predecessor)
      : pool_(pool),
        store_(store),
        feed_(feed),
        registration_(std::move(registration)),
        target_(std::move(target)),
        options_(options),
        log_(log),
        room_(std::move(room)),
        read_pos_(checkpoint),
        stored_checkpoint_(checkpoint),
        status_(std::move(counters)),
        predecessor_(std::move(predecessor)) {
    status_.id = registration_.id;
    status_.dead_letters = store_.count_dead_letters(registration_.id);
    pool_.add(*this, target_->ready_fd());  // last: its first turn may start at once
  }

  ~Worker() { finish_stop(); }

  // Stops delivering, without waiting: later pages are ignored, and the target abandons what
  // is in flight (never waiting on its network); those deliveries were not checkpointed and go
  // again with the registration's next worker. `discard`: the registration is removed, so
  // nothing more is stored for it (checkpoint, dead letters). Idempotent.
  void begin_stop(bool discard) {
    {
      std::lock_guard lock(mutex_);
      discard_ = discard_ || discard;
      if (stopping_) return;
      stopping_ = true;
    }
    target_->abandon();
    pool_.wake(*this);
  }

  // Waits until the store writes under way (a checkpoint, dead letters) have ended: after
  // begin_stop(true) none begins, so the registration's stored data can then be removed or
  // replaced without one of them writing it back.
  void wait_for_stores() {
    std::unique_lock lock(mutex_);
    stored_cv_.wait(lock, [&] { return storing_ == 0; });
  }

  // begin_stop(), then waits for its last turn and stores the checkpoint reached. Called once,
  // by the dispatcher's reaper (or the destructor), never on a request's path.
  void finish_stop() {
    begin_stop(false);
    {
      std::unique_lock lock(mutex_);
      stopped_cv_.wait(lock, [&] { return sender_ended_; });
    }
    pool_.remove(*this);
    {
      std::unique_lock lock(mutex_);
      if (stopped_) return;
      store_checkpoint_locked(lock, true);  // not when discarded
      stopped_ = true;
    }
    stopped_cv_.notify_all();
  }

  // Waits until finish_stop() is done; returns the checkpoint it reached.
  std::uint64_t wait_stopped() {
    std::unique_lock lock(mutex_);
    stopped_cv_.wait(lock, [&] { return stopped_; });
    return reached();
  }

  bool has_stopped() const {
    std::lock_guard lock(mutex_);
    return stopped_;
  }

  // Asks the sender to dead-letter every event it holds, in flight or not (the change feed is
  // full and this registration holds it back; see Dispatcher::Trimmer).
  void spill() {
    {
      std::lock_guard lock(mutex_);
      spill_requested_ = true;
    }
    pool_.wake(*this);
  }

  // The last feed seq it took when its window has room for a page, else nullopt (a page read
  // for a few free places would be read for nothing).
  std::optional<std::uint64_t> wants_entries_after() const {
    std::lock_guard lock(mutex_);
    if (stopping_ || predecessor_ || !has_room()) return std::nullopt;
    return read_pos_;
  }

  // Takes the entries of `page` (in seq order) after its position that it wants, until its
  // window is full, and moves its position past what it took or passed over. With a filter, a
  // write is wanted when the shadow as it left it passes the filter (read from `engine`'s
  // store); returns false when that read failed (the entry is offered again with a later page).
  bool take(const std::vector<std::shared_ptr<const FeedItem>>& page, Engine& engine) {
    // The filter's verdicts first, without the lock: judging a write may read the store, and a
    // sender's turn or status() must not wait on that (a turn never waits on a network). At most
    // as many as the window has room for; any other is judged under the lock, as before.
    std::vector<std::optional<bool>> verdicts(page.size());
    std::vector<bool> judged(page.size());
    if (!registration_.filter.empty()) {
      std::uint64_t from;
      std::size_t room;
      {
        std::lock_guard lock(mutex_);
        if (stopping_) return true;
        from = read_pos_;
        room = options_.window - std::min(options_.window, open_.size());
      }
      for (std::size_t i = 0; i < page.size() && room > 0; ++i) {
        const FeedItem& item = *page[i];
        if (item.seq <= from || !item.entry || !wants(registration_, item.entry->write())) continue;
        verdicts[i] = passes_filter(item, engine);
        judged[i] = true;
        if (!verdicts[i]) break;  // the store failed: the rest waits for a later page
        if (*verdicts[i]) --room;
      }
    }
    std::unique_lock lock(mutex_);
    if (stopping_) return true;
    for (std::size_t i = 0; i < page.size(); ++i) {
      const auto& item = page[i];
      if (item->seq <= read_pos_) continue;
      if (open_.size() >= options_.window || held_bytes_ >= options_.window_bytes) break;
      if (item->entry && wants(registration_, item->entry->write())) {
        const std::optional<bool> passes = judged[i] ? verdicts[i] : passes_filter(*item, engine);
        if (!passes) {
          store_checkpoint_locked(lock, false);
          return false;
        }
        if (*passes) hold(item);
      }
      read_pos_ = item->seq;
    }
    store_checkpoint_locked(lock, false);
    return true;
  }

  // Stores the checkpoint reached if it moved (at most every checkpoint_interval).
  void store_checkpoint() {
    std::unique_lock lock(mutex_);
    store_checkpoint_locked(lock, false);
  }

  std::uint64_t stored_checkpoint() const {
    std::lock_guard lock(mutex_);
    return stored_checkpoint_;
  }

  // How long the oldest event it holds has waited since it took it from the feed (zero when it
  // holds none). Not since its write: a feed that stopped being read hands over events written
  // long before, which a registration that keeps up delivers at once.
  std::chrono::nanoseconds longest_wait() const {
    std::lock_guard lock(mutex_);
    return std::chrono::nanoseconds(open_.empty() ? 0 : std::max<std::int64_t>(0, now_ns() - open_.oldest_taken_ns()));
  }

  RegistrationStatus status(std::uint64_t feed_end) const {
    std::lock_guard lock(mutex_);
    RegistrationStatus s = status_;
    s.pending = open_.size() + (feed_end > read_pos_ ? feed_end - read_pos_ : 0);
    s.lag_seconds = std::chrono::duration<double>(oldest_age_locked()).count();
    return s;
  }

  bool redriving(const std::string& event_id) const {
    std::lock_guard lock(mutex_);
    return redriving_.contains(event_id);
  }

  std::size_t redrive(std::vector<DeadLetter> letters) {
    std::lock_guard lock(mutex_);
    std::size_t n = 0;
    for (DeadLetter& letter : letters) {
      if (!redriving_.insert(letter.event_id).second) continue;  // already queued
      auto names = std::make_shared<RedrivenNames>();
      names->id = letter.event_id;
      Pending p;
      p.event = std::move(letter.event);
      p.prior_attempts = letter.attempts;
      p.written_ns = now_ns();
      try {  // the event names its shadow and type; queue it behind that shadow's events
        const json::value event = parse_json(p.event);
        names->type = event.at("type").as_string();
        names->thing = event.at("data").at("thing").as_string();
        names->name = event.at("data").at("name").as_string();
      } catch (const std::exception&) {
        names->thing = names->id;  // unreadable: deliver as it is, on a queue of its own
      }
      p.id = names->id;
      p.type = names->type;
      p.thing = names->thing;
      p.name = names->name;
      p.owner = std::move(names);
      enqueue(std::move(p));
      ++n;
    }
    return n;
  }

  // The named dead letters (all when nullopt) were deleted, `n` of them: their queued
  // redrives are cancelled.
  void forget_dead_letters(const std::optional<std::vector<std::string>>& ids, std::uint64_t n) {
    std::lock_guard lock(mutex_);
    if (ids) {
      for (const std::string& id : *ids) redriving_.erase(id);
    } else {
      redriving_.clear();
    }
    status_.dead_letters -= std::min(n, status_.dead_letters);
  }

  // Stores dead letters of this registration, each expiring dead_letter_retention after it
  // failed, and keeps at most max_dead_letters: the oldest by event id (by write time) are
  // removed to make room, and counted. `again`: they replace letters already stored (redriven
  // ones that failed again), which the count holds. The count is this worker's own (counted at
  // its start, then kept); it misses letters that expired or that another process put or
  // deleted, so it is counted again before letters are removed, at most every
  // dead_letter_recount. Called without mutex_; throws what the store throws.
  void store_dead_letters(std::vector<DeadLetter> letters, bool again) {
    if (letters.empty()) return;
    const std::uint64_t max = std::max<std::size_t>(1, options_.max_dead_letters);
    std::uint64_t evicted = 0;
    if (!again && letters.size() > max) {  // more than fit at all: only the newest go in
      std::sort(letters.begin(), letters.end(),
                [](const DeadLetter& a, const DeadLetter& b) { return a.event_id < b.event_id; });
      evicted = letters.size() - max;
      letters.erase(letters.begin(), letters.begin() + static_cast<std::ptrdiff_t>(evicted));
    }
    for (DeadLetter& letter : letters) {
      letter.expires_ns = dead_letter_expiry(letter.failed_ns, options_.dead_letter_retention);
    }
    const std::uint64_t adding = again ? 0 : letters.size();
    std::uint64_t stored;
    bool recount;
    {
      std::lock_guard lock(mutex_);
      stored = status_.dead_letters;
      recount = stored + adding > max && Clock::now() - counted_at_ >= options_.dead_letter_recount;
    }
    if (recount) {
      stored = store_.count_dead_letters(registration_.id);
      std::lock_guard lock(mutex_);
      counted_at_ = Clock::now();
      status_.dead_letters = stored;
    }
    std::uint64_t removed = 0;
    for (std::uint64_t excess = stored + adding > max ? stored + adding - max : 0; removed < excess;) {
      std::vector<DeadLetter> oldest =
          store_.dead_letters(registration_.id, "", std::min<std::uint64_t>(excess - removed, 100));
      if (oldest.empty()) break;
      std::vector<std::string> ids;
      for (const DeadLetter& letter : oldest) ids.push_back(letter.event_id);
      removed += store_.remove_dead_letters(registration_.id, std::span<const std::string>(ids));
    }
    if (removed > 0) {
      std::lock_guard lock(mutex_);
      status_.dead_letters -= std::min(removed, status_.dead_letters);
      status_.dead_letters_evicted += removed;
    }
    store_.put_dead_letters(letters);
    if (removed + evicted > 0) {
      log_(false, "the oldest dead letters were removed: a registration keeps at most --max-dead-letters",
           {{"registration", registration_.id}, {"removed", std::to_string(removed + evicted)},
            {"max_dead_letters", std::to_string(max)}});
    }
    std::lock_guard lock(mutex_);
    status_.dead_letters += adding;
    status_.dead_letters_evicted += evicted;
  }

 private:
  // Whether the write of `item` passes the registration's filter (true without one); nullopt
  // when the store could not be read for now (logged; the entry is offered again). A failure
  // that would repeat (an entry the filter cannot be judged on) passes, logged: a filter must
  // never hold a registration up for good, and an event too many beats one lost.
  std::optional<bool> passes_filter(const FeedItem& item, Engine& engine) {
    if (registration_.filter.empty()) return true;
    const FeedWrite& w = item.entry->write();
    try {
      return registration_.matches_filter(ShadowKey{std::string(w.thing), std::string(w.name)}, item.after(engine.store()),
                                          w.timestamp_ns, engine.options().document.timestamp_keys);
    } catch (const Error& e) {
      if (e.code() != ErrorCode::unavailable && e.code() != ErrorCode::throttled) {
        log_(true, "a registration's filter could not be judged; the event is delivered",
             {{"registration", registration_.id}, {"error", e.what()}});
        return true;
      }
      log_(true, "checking a registration's filter failed (reading the shadow)", {{"registration", registration_.id}, {"error", e.what()}});
      return std::nullopt;
    } catch (const std::exception& e) {
      log_(true, "a registration's filter could not be judged; the event is delivered",
           {{"registration", registration_.id}, {"error", e.what()}});
      return true;
    }
  }

  // Holds the write of `item` for delivery (mutex_ held).
  void hold(const std::shared_ptr<const FeedItem>& item) {
    const FeedWrite& w = item->entry->write();
    Pending p;
    p.seq = item->seq;
    p.owner = item;
    p.entry = &*item->entry;
    p.id = w.id;
    p.type = event_type(w);
    p.thing = w.thing;
    p.name = w.name;
    p.written_ns = w.timestamp_ns;
    p.bytes = item->entry->size();
    held_bytes_ += p.bytes;
    open_.add(p.seq, p.written_ns, now_ns());
    enqueue(std::move(p));
  }

  struct RedrivenNames {
    std::string id, type, thing, name;
  };
  struct Pending {
    std::uint64_t seq = 0;  // 0: a redriven dead letter, outside the feed
    std::shared_ptr<const void> owner;  // what the views below view: the FeedItem, or RedrivenNames
    std::string_view id, type, thing, name;
    const FeedEntryText* entry = nullptr;  // to build the event from (in the FeedItem)
    std::string event;  // the CloudEvent
    std::int64_t written_ns = 0;
    int attempts = 0;        // failed attempts so far
    int prior_attempts = 0;  // a redriven dead letter's attempts before
    std::optional<DeliveryResult> settled;  // the final outcome, once known, while it is stored
    std::size_t bytes = 0;   // counted in held_bytes_ until it leaves its queue
    bool in_flight = false;  // started on the target, outcome not settled
    bool stored = false;     // its dead letter is stored already (expired or spilled): not sent again
    bool handed_back = false;  // the target handed it back to be built again within the limit it knows now
  };
  struct Shadow {
    std::deque<Pending> events;  // the head is being delivered, waits for a retry, or is ready
  };

  // Queues an event behind its shadow's; a shadow with events is in exactly one of ready_,
  // delayed_ or a sender's hands. Requires mutex_.
  void enqueue(Pending p) {
    std::string key;
    key.reserve(p.thing.size() + 1 + p.name.size());
    key.append(p.thing).append(1, '#').append(p.name);
    Shadow& shadow = shadows_[key];
    shadow.events.push_back(std::move(p));
    if (shadow.events.size() == 1) {
      ready_.push_back(std::move(key));
      if (ready_.size() == 1) pool_.wake(*this);
    }
  }

  // Once the predecessor has stopped, starts where it got, with its counters; false while it
  // has not.
  bool take_over_from_predecessor() {
    std::shared_ptr<Worker> predecessor;
    {
      std::lock_guard lock(mutex_);
      predecessor = predecessor_;
    }
    if (!predecessor) return true;
    if (!predecessor->has_stopped()) return false;
    const std::uint64_t reached = predecessor->wait_stopped();  // at once
    const RegistrationStatus counters = predecessor->status(0);
    {
      std::lock_guard lock(mutex_);
      read_pos_ = std::max(read_pos_, reached);
      stored_checkpoint_ = std::max(stored_checkpoint_, reached);
      status_.delivered = counters.delivered;
      status_.failed = counters.failed;
      status_.dead_lettered = counters.dead_lettered;
      status_.last_error = counters.last_error;
      status_.latency = counters.latency;
      predecessor_.reset();
    }
    room_();  // the reader serves it from here
    return true;
  }

  // One turn: keeps up to `concurrency` shadows' head events in flight on the target and
  // settles each outcome as it comes. Returns when it must run again at the latest: while
  // deliveries are in flight every `poll` (the target's own time limits), while it holds events
  // at the next sweep for expired ones, at the next retry; otherwise when woken.
  std::optional<Clock::time_point> step() override {
    static const Target::Done ignore = [](std::uint64_t, DeliveryResult) {};
    std::unique_lock lock(mutex_);
    if (sender_ended_) {
      lock.unlock();
      target_->run(std::chrono::milliseconds(0), ignore);  // what still makes its descriptor ready
      return std::nullopt;
    }
    if (predecessor_) {  // stopping too: it passes on where the predecessor got, not where it began
      lock.unlock();
      if (!take_over_from_predecessor()) {
        target_->run(std::chrono::milliseconds(0), ignore);  // nothing started yet: only wake-ups
        return Clock::now() + std::chrono::milliseconds(10);
      }
      lock.lock();
    }
    const std::size_t concurrency = std::max<std::size_t>(1, options_.concurrency);
    for (int turn = 0; !stopping_; ++turn) {
      if (turn == 64) return Clock::now();  // the others' turn, then this one's again
      if (spill_requested_) {
        spill_requested_ = false;
        expire(lock, true);
        store_checkpoint_locked(lock, true);
      } else if (Clock::now() >= next_sweep_) {
        next_sweep_ = Clock::now() + options_.expiry_sweep;
        expire(lock, false);
      }
      if (stopping_) break;
      while (!delayed_.empty() && delayed_.begin()->first <= Clock::now()) {
        ready_.push_back(std::move(delayed_.begin()->second));
        delayed_.erase(delayed_.begin());
      }
      // A finished delivery's place is free already: the next ones start before the finished
      // are settled, so that the target waits as little as possible.
      while (!stopping_ && in_flight_.size() - finished_.size() < concurrency && !ready_.empty()) {
        const std::uint64_t tag = ++next_tag_;
        std::string key = std::move(ready_.front());
        ready_.pop_front();
        Pending& p = shadows_.at(key).events.front();  // stable until finish() pops it
        in_flight_.emplace_back(tag, key);
        if (p.settled || cancelled_redrive(p)) {  // store it again, or cancelled
          finished_.emplace_back(tag, p.settled.value_or(DeliveryResult{}));
          continue;
        }
        p.in_flight = true;
        lock.unlock();
        if (std::optional<DeliveryResult> refused = start(tag, p)) finished_.emplace_back(tag, std::move(*refused));
        lock.lock();
      }
      settle(lock);
      if (in_flight_.size() < concurrency && !ready_.empty()) continue;  // settling made shadows ready
      // The events that start next are built while the target works, not when places free.
      std::vector<Pending*> next;
      for (std::size_t i = 0; i < std::min(concurrency, ready_.size()); ++i) {
        Pending& p = shadows_.at(ready_[i]).events.front();
        if (p.event.empty() && p.entry) next.push_back(&p);
      }
      lock.unlock();
      for (Pending* p : next) {
        try {
          build(*p);
        } catch (const std::exception&) {  // start() tries again and refuses it
        }
      }
      target_->run(std::chrono::milliseconds(0), collect_);
      lock.lock();
      if (!finished_.empty() || (in_flight_.size() < concurrency && !ready_.empty())) continue;
      if (stopping_) break;
      std::optional<Clock::time_point> at;
      const auto sooner = [&](Clock::time_point t) { at = at ? std::min(*at, t) : t; };
      if (!in_flight_.empty()) {
        sooner(Clock::now() + options_.poll);
        if (const auto deadline = target_->next_deadline()) sooner(*deadline);
      }
      if (!shadows_.empty()) sooner(next_sweep_);
      if (!delayed_.empty()) sooner(delayed_.begin()->first);
      return at;
    }
    // Stopping: what the target reports as it abandons is settled, so that a delivered event
    // is not sent again after a restart; a call it is abandoning is waited for, turn by turn.
    lock.unlock();
    target_->run(std::chrono::milliseconds(0), collect_);
    lock.lock();
    settle(lock);
    if (target_->busy()) return Clock::now() + std::chrono::milliseconds(10);
    sender_ended_ = true;
    stopped_cv_.notify_all();
    return std::nullopt;
  }

  // Settles the finished deliveries. Requires mutex_ (released while outcomes are stored).
  void settle(std::unique_lock<std::mutex>& lock) {
    for (auto& [tag, result] : finished_) {
      auto it = std::find_if(in_flight_.begin(), in_flight_.end(), [tag = tag](const auto& f) { return f.first == tag; });
      if (it == in_flight_.end()) continue;  // reported twice: a target's fault, settled once
      const std::string key = std::move(it->second);
      if (&*it != &in_flight_.back()) *it = std::move(in_flight_.back());
      in_flight_.pop_back();
      Pending& head = shadows_.at(key).events.front();
      head.in_flight = false;
      finish(key, head, std::move(result), lock);
    }
    finished_.clear();
  }

  // Builds the event of a feed entry. A Pending in a shadow's queue stays where it is until
  // the sender pops it, and nobody else writes its event.
  void build(Pending& p) {
    if (!p.entry) throw std::invalid_argument("the dead letter holds no event");
    p.event = build_event(registration_, *p.entry, target_->max_event_bytes());
  }

  // Builds the event; one that cannot be built becomes a stub naming it and why, for its dead
  // letter. Returns the error, empty when it was built.
  std::string build_or_stub(Pending& p) {
    try {
      build(p);
      return {};
    } catch (const std::exception& e) {
      json::object stub{{"id", p.id}, {"subject", std::string(p.thing) + '#' + std::string(p.name)}, {"error", e.what()}};
      p.event = to_json(stub);
      return e.what();
    }
  }

  // Starts delivering the event; an event that cannot be built is refused at once, and its
  // dead letter says why.
  std::optional<DeliveryResult> start(std::uint64_t tag, Pending& p) {
    const std::size_t limit = target_->max_event_bytes();
    if (p.entry && p.event.size() > limit) std::string().swap(p.event);  // built for a larger limit
    if (p.event.empty()) {
      if (std::string why = build_or_stub(p); !why.empty()) {
        return DeliveryResult{DeliveryResult::Outcome::reject, "cannot deliver the event: " + why};
      }
      // Built again for the limit the target learnt (it judges the first try, maybe learning its
      // limit then), truncated and still too large: no build makes it fit.
      if (p.handed_back && p.event.size() > limit) {
        return DeliveryResult{DeliveryResult::Outcome::reject,
                              "cannot deliver the event: it is " + std::to_string(p.event.size()) +
                                  " bytes without old and new, over the target's limit of " + std::to_string(limit) +
                                  " bytes"};
      }
    }
    try {
      target_->start(tag, {p.id, p.type, p.thing, p.name, p.event});
      return std::nullopt;
    } catch (const std::exception& e) {
      return DeliveryResult{DeliveryResult::Outcome::reject, std::string("cannot deliver the event: ") + e.what()};
    }
  }

  // Settles an attempt: retries it later, or stores its final outcome (a delivered redrive
  // removes its dead letter; a failure becomes one) and moves to the shadow's next event.
  // Requires mutex_ (released while the store is written).
  void finish(const std::string& key, Pending& p, DeliveryResult result, std::unique_lock<std::mutex>& lock) {
    using Outcome = DeliveryResult::Outcome;
    const bool redriven = p.seq == 0;
    const bool cancelled = cancelled_redrive(p);
    if (!cancelled && !p.stored && !discard_) {
      if (!p.settled) {  // else: its outcome is known and was not stored yet
        if (result.outcome == Outcome::rebuild) {
          if (stopping_) return;  // as if abandoned: the next worker builds and sends it
          if (p.entry) {  // not an attempt: built again within the limit the target knows now
            std::string().swap(p.event);
            p.handed_back = true;
            ready_.push_back(key);
            return;
          }
          result.outcome = Outcome::reject;  // a redriven dead letter cannot be built again
        }
        // Abandoned as the worker stops (Target::abandon): not an attempt; the next worker sends
        // it again (the checkpoint stays before it).
        if (stopping_ && result.outcome == Outcome::retry) return;
        if (result.outcome != Outcome::delivered) {
          ++status_.failed;
          status_.last_error = result.error;
          ++p.attempts;
          if (result.outcome == Outcome::retry && p.written_ns < max_age_cutoff()) {
            result = {Outcome::reject, expired_reason() + "; last error: " + result.error};
          }
          if (result.outcome == Outcome::retry && p.attempts < registration_.max_attempts) {
            delayed_.emplace(Clock::now() + backoff_delay(p.attempts, options_.retry_base, options_.retry_max), key);
            return;
          }
        }
        p.settled = std::move(result);
      }
      bool removed = false;
      bool failed = false;
      {
        const StoreWrite write(*this, lock);
        try {
          if (p.settled->outcome == Outcome::delivered) {
            if (redriven) removed = store_.remove_dead_letter(registration_.id, p.id);
          } else {
            store_dead_letters(
                {{registration_.id, std::string(p.id), p.event, p.prior_attempts + p.attempts, p.settled->error, now_ns()}},
                redriven);
          }
        } catch (const std::exception& e) {  // the store is failing: store the outcome later, not deliver again
          failed = true;
          log_(true, "storing a delivery's outcome failed", {{"registration", registration_.id}, {"error", e.what()}});
        }
      }
      if (failed) {
        delayed_.emplace(Clock::now() + options_.retry_max, key);
        return;
      }
      if (p.settled->outcome == Outcome::delivered) {
        ++status_.delivered;
        status_.latency.observe(std::max<double>(0, (now_ns() - p.written_ns) / 1e9));
        if (removed) status_.dead_letters -= std::min<std::uint64_t>(1, status_.dead_letters);
      } else {
        ++status_.dead_lettered;  // and counted in dead_letters by store_dead_letters
        log_(true, "event dead-lettered",
             {{"registration", registration_.id}, {"event", std::string(p.id)}, {"subject", key},
              {"attempts", std::to_string(p.prior_attempts + p.attempts)}, {"error", p.settled->error}});
      }
    }
    if (redriven) redriving_.erase(std::string(p.id));
    const bool had_room = has_room();
    if (p.seq) open_.finish(p.seq);
    held_bytes_ -= p.bytes;
    if (!had_room && has_room()) room_();
    Shadow& shadow = shadows_.at(key);
    shadow.events.pop_front();
    if (shadow.events.empty()) {
      shadows_.erase(key);
    } else {
      ready_.push_back(key);  // the sender takes it on its next turn
    }
  }

  std::size_t room_wanted() const { return std::max<std::size_t>(1, std::min(options_.page, options_.window)); }
  // Events written before this are past the registration's maxAgeSeconds.
  std::int64_t max_age_cutoff() const {
    return now_ns() - std::chrono::duration_cast<std::chrono::nanoseconds>(registration_.max_age).count();
  }
  std::string expired_reason() const {
    return "expired: not delivered within maxAgeSeconds (" + std::to_string(registration_.max_age.count()) +
           " s) of its write";
  }

  // A redriven dead letter whose letter was deleted meanwhile: it is not sent. Requires mutex_.
  bool cancelled_redrive(const Pending& p) const { return p.seq == 0 && !redriving_.contains(std::string(p.id)); }

  // The age of the oldest event held (zero when none). Requires mutex_.
  std::chrono::nanoseconds oldest_age_locked() const {
    return std::chrono::nanoseconds(open_.empty() ? 0 : std::max<std::int64_t>(0, now_ns() - open_.oldest_written_ns()));
  }

  // Whether the window has room for a page: entries and bytes. Requires mutex_.
  bool has_room() const {
    return options_.window - open_.size() >= room_wanted() && held_bytes_ < options_.window_bytes;
  }

  // Dead-letters the events held longer than the registration's maxAgeSeconds, or (`spill`)
  // every event held, those in flight too (their outcome is then ignored; one delivered anyway
  // is delivered again if redriven: at least once). The dead letters are stored together; each
  // event then leaves its shadow's queue when it reaches the front, without being sent, and no
  // longer holds the checkpoint back. Requires mutex_ (released while building and storing).
  // Sender only: nothing else removes a Pending, so the pointers stay valid meanwhile.
  void expire(std::unique_lock<std::mutex>& lock, bool spill) {
    const std::int64_t now = now_ns();
    const std::int64_t cutoff = spill ? INT64_MAX : max_age_cutoff();
    if (!spill && (open_.empty() || open_.oldest_written_ns() >= cutoff) && redriving_.empty()) return;
    std::vector<Pending*> expired;
    for (auto& [key, shadow] : shadows_) {
      for (Pending& p : shadow.events) {
        if (p.written_ns >= cutoff) continue;  // not in write order: a redriven letter, a shard read again
        if (p.stored || p.settled || (p.in_flight && !spill)) continue;
        if (cancelled_redrive(p)) continue;
        expired.push_back(&p);
      }
    }
    if (expired.empty()) return;
    // Feed entries first, then redriven dead letters: each group is stored in one call, and only
    // what was stored is marked (a failure leaves the rest to the next sweep).
    std::stable_partition(expired.begin(), expired.end(), [](const Pending* p) { return p->seq != 0; });
    const std::string reason =
        spill ? "spilled: the registration fell behind by more than the change feed holds in memory (redrive it)"
              : expired_reason();
    const bool discard = discard_;
    std::size_t stored = 0;  // of `expired`, from the front
    {
      const StoreWrite write(*this, lock);
      std::vector<DeadLetter> letters, redriven;  // new dead letters; redriven ones stored again
      letters.reserve(expired.size());
      for (Pending* p : expired) {
        if (p->event.empty()) build_or_stub(*p);
        (p->seq ? letters : redriven)
            .push_back({registration_.id, std::string(p->id), p->event, p->prior_attempts + p->attempts, reason, now});
      }
      if (!discard) {
        try {
          const std::size_t new_ones = letters.size();
          store_dead_letters(std::move(letters), false);
          stored = new_ones;
          store_dead_letters(std::move(redriven), true);
          stored = expired.size();
        } catch (const std::exception& e) {  // the rest is tried again at the next sweep
          log_(true, "storing expired events as dead letters failed", {{"registration", registration_.id}, {"error", e.what()}});
        }
      }
    }
    if (stored == 0) return;
    expired.resize(stored);
    const bool had_room = has_room();
    for (Pending* p : expired) {
      p->stored = true;
      p->settled = DeliveryResult{DeliveryResult::Outcome::reject, reason};
      ++status_.dead_lettered;  // and counted in dead_letters by store_dead_letters
      if (p->seq) open_.finish(p->seq);
      if (!p->in_flight) std::string().swap(p->event);  // the target keeps no view of it
    }
    if (!had_room && has_room()) room_();
    // A shadow waiting for a retry whose head is now stored moves on at once.
    for (auto it = delayed_.begin(); it != delayed_.end();) {
      if (shadows_.at(it->second).events.front().stored) {
        ready_.push_back(std::move(it->second));
        it = delayed_.erase(it);
      } else {
        ++it;
      }
    }
    log_(true, spill ? "events spilled to dead letters" : "events expired to dead letters",
         {{"registration", registration_.id}, {"events", std::to_string(expired.size())}, {"error", reason}});
  }

  // A store write made with mutex_ released, for its scope: counted in storing_ (so that
  // wait_for_stores() waits for it), mutex_ released, and taken again at its end, however it ends.
  class StoreWrite {
   public:
    StoreWrite(Worker& worker, std::unique_lock<std::mutex>& lock) : worker_(worker), lock_(lock) {
      ++worker_.storing_;
      lock_.unlock();
    }
    ~StoreWrite() {
      lock_.lock();
      if (--worker_.storing_ == 0) worker_.stored_cv_.notify_all();
    }
    StoreWrite(const StoreWrite&) = delete;
    StoreWrite& operator=(const StoreWrite&) = delete;

   private:
    Worker& worker_;
    std::unique_lock<std::mutex>& lock_;
  };

  // The checkpoint: every feed entry up to it is finished. Requires mutex_.
  std::uint64_t reached() const { return open_.empty() ? read_pos_ : open_.oldest_seq() - 1; }

  // Stores the checkpoint reached when it moved and the interval passed (or `force`).
  void store_checkpoint_locked(std::unique_lock<std::mutex>& lock, bool force) {
    if (discard_) return;
    const std::uint64_t seq = reached();
    if (seq <= stored_checkpoint_ || (!force && Clock::now() - last_checkpoint_ < options_.checkpoint_interval)) return;
    last_checkpoint_ = Clock::now();
    bool stored = false;
    {
      const StoreWrite write(*this, lock);
      try {
        feed_.put_checkpoint(registration_.id, seq);
        stored = true;
      } catch (const std::exception& e) {
        log_(true, "storing a checkpoint failed", {{"registration", registration_.id}, {"error", e.what()}});
      }
    }
    if (stored) stored_checkpoint_ = std::max(stored_checkpoint_, seq);
  }

  SenderPool& pool_;
  DeliveryStore& store_;
  Feed& feed_;
  const Registration registration_;
  const std::unique_ptr<Target> target_;
  const DispatcherOptions& options_;
  const NotifyLog& log_;
  const std::function<void()> room_;

  mutable std::mutex mutex_;
  bool stopping_ = false;
  bool discard_ = false;  // the registration is removed: store nothing more for it
  int storing_ = 0;       // store writes under way, made with mutex_ released
  std::condition_variable stored_cv_;  // storing_ went to 0
  bool stopped_ = false;  // finish_stop() is done
  std::condition_variable stopped_cv_;
  bool spill_requested_ = false;
  // Of the feed entries held in shadows_ (redriven dead letters are bounded by `window` per
  // redrive and do not count: they must never keep the worker from taking feed entries).
  std::size_t held_bytes_ = 0;
  std::uint64_t read_pos_;                       // the last feed seq read
  std::uint64_t stored_checkpoint_;
  Clock::time_point last_checkpoint_{};
  OpenEntries open_;                             // wanted feed entries not finished
  std::unordered_map<std::string, Shadow> shadows_;  // by "{thing}#{name}"
  std::deque<std::string> ready_;
  std::multimap<Clock::time_point, std::string> delayed_;
  std::unordered_set<std::string> redriving_;    // ids of the dead letters queued again
  RegistrationStatus status_;
  std::shared_ptr<Worker> predecessor_;  // still stopping; reset by the sender once it has stopped
  Clock::time_point counted_at_ = Clock::now();  // when status_.dead_letters was last read from the store
  bool sender_ended_ = false;  // its last turn is over (stopped_cv_ tells)
  // Of the turns (one at a time, on the pool's threads): deliveries started, by tag, with the
  // shadow each is of (at most `concurrency` unsettled), and those the target reported finished.
  std::vector<std::pair<std::uint64_t, std::string>> in_flight_;
  std::vector<std::pair<std::uint64_t, DeliveryResult>> finished_;
  const Target::Done collect_ = [this](std::uint64_t tag, DeliveryResult r) { finished_.emplace_back(tag, std::move(r)); };
  std::uint64_t next_tag_ = 0;
  Clock::time_point next_sweep_{};
};

// Reads the feed once for every worker. A round reads a page after the lowest position of the
// workers whose window has room, reads it once and hands it to each of them whose position lies
// before the page's end, then reads on from the lowest position of those not served, until each
// got a page or the feed is exhausted: a worker far behind costs the others one more read per
// round, never a wait. Between rounds that found nothing it sleeps until a write or a worker's
// window (full before) wakes it.
class Dispatcher::Reader {
 public:
  explicit Reader(Dispatcher& d) : d_(d), thread_([this] {
    lower_thread_priority(d_.options_.nice);
    run();
  }) {}
  ~Reader() {
    stopping_ = true;
    d_.signal_->notify();
    thread_.join();
  }

 private:
  void run() {
    while (!stopping_) {
      const std::uint64_t seen = d_.signal_->generation();
      std::vector<std::shared_ptr<Worker>> workers;
      {
        std::lock_guard lock(d_.mutex_);
        for (const auto& [id, entry] : d_.registrations_) {
          if (entry.worker) workers.push_back(entry.worker);
        }
      }
      std::vector<std::pair<Worker*, std::uint64_t>> hungry;  // and its position
      for (const auto& worker : workers) {
        if (auto position = worker->wants_entries_after()) hungry.emplace_back(worker.get(), *position);
      }
      bool progressed = false;
      bool read_failed = false;  // a shadow a filter needed could not be read
      while (!hungry.empty() && !stopping_) {
        const std::uint64_t after = std::min_element(hungry.begin(), hungry.end(), [](auto& a, auto& b) {
                                      return a.second < b.second;
                                    })->second;
        std::vector<std::shared_ptr<const FeedItem>> page;
        try {
          page = read_page(after);
        } catch (const std::exception& e) {
          d_.log_(true, "reading the change feed failed", {{"error", e.what()}});
          progressed = false;  // do not spin on a failing store
          break;
        }
        if (page.empty()) break;
        progressed = true;
        std::erase_if(hungry, [&](const auto& h) {
          if (h.second >= page.back()->seq) return false;
          if (!h.first->take(page, d_.engine_)) read_failed = true;
          return true;
        });
      }
      for (const auto& worker : workers) worker->store_checkpoint();
      workers.clear();  // a worker stopped meanwhile is released here
      if (!progressed || read_failed) d_.signal_->wait(seen, d_.options_.poll);
    }
  }

  std::vector<std::shared_ptr<const FeedItem>> read_page(std::uint64_t after) {
    std::vector<FeedEntry> entries = d_.feed_->read(after, d_.options_.page);
    std::vector<std::shared_ptr<const FeedItem>> page;
    page.reserve(entries.size());
    for (FeedEntry& entry : entries) {
      auto item = std::make_shared<FeedItem>();
      item->seq = entry.seq;
      try {
        item->entry.emplace(std::move(entry.json));
      } catch (const std::exception& e) {  // never written so; passed over, not retried forever
        d_.log_(true, "an unreadable change-feed entry was skipped",
                {{"seq", std::to_string(entry.seq)}, {"error", e.what()}});
      }
      page.push_back(std::move(item));
    }
    return page;
  }

  Dispatcher& d_;
  std::atomic<bool> stopping_{false};
  std::thread thread_;
};

// Trims the feed up to the smallest stored checkpoint of the enabled registrations.
class Dispatcher::Trimmer {
 public:
  explicit Trimmer(Dispatcher& d) : thread_([this, &d] { run(d); }) {}
  ~Trimmer() {
    {
      std::lock_guard lock(mutex_);
      stopping_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }

 private:
  void run(Dispatcher& d) {
    std::uint64_t trimmed = 0;
    std::unique_lock lock(mutex_);
    while (!cv_.wait_for(lock, d.options_.trim_interval, [&] { return stopping_; })) {
      try {
        std::optional<std::uint64_t> up_to;
        std::vector<std::pair<std::string, std::shared_ptr<Worker>>> holding_back;  // at the smallest checkpoint
        {
          std::lock_guard registrations(d.mutex_);
          for (const auto& [id, entry] : d.registrations_) {
            if (!entry.worker) continue;
            const std::uint64_t checkpoint = entry.worker->stored_checkpoint();
            if (up_to && checkpoint > *up_to) continue;
            if (!up_to || checkpoint < *up_to) holding_back.clear();
            up_to = checkpoint;
            holding_back.emplace_back(id, entry.worker);
          }
          // With no registration enabled the feed is off, and a new one starts at its end.
          if (!up_to) up_to = d.feed_->end();
        }
        if (*up_to > trimmed) {
          d.feed_->trim(*up_to);
          trimmed = *up_to;
        }
        // A feed held in memory (a DynamoDB table's stream) that is nearly full stops being read
        // when full, for every registration and for history written from it: the registrations
        // that hold it back give up their events to dead letters instead, once their oldest has
        // waited spill_after. Judged after the trim: what a registration spilled a moment ago
        // held back must not count against the next one.
        if (!holding_back.empty() && d.feed_->pressed()) {
          for (const auto& [id, worker] : holding_back) {
            if (worker->longest_wait() < d.options_.spill_after) continue;
            d.log_(true, "the change feed is nearly full: spilling the events of the registration holding it back to "
                         "its dead letters",
                   {{"registration", id}});
            worker->spill();
          }
        }
      } catch (const std::exception& e) {
        d.log_(true, "trimming the change feed failed", {{"error", e.what()}});
      }
    }
  }

  std::mutex mutex_;
  std::condition_variable cv_;
  bool stopping_ = false;
  std::thread thread_;
};

// Finishes stopping the workers that were stopped (joins their senders, stores their
// checkpoints) on a thread of its own, so that replacing or removing a registration, and every
// other registration's delivery meanwhile, never waits on a target's network.
class Dispatcher::Reaper {
 public:
  Reaper() : thread_([this] { run(); }) {}
  ~Reaper() {  // finishes every worker handed over first
    {
      std::lock_guard lock(mutex_);
      stopping_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }

  void retire(std::shared_ptr<Worker> worker) {
    {
      std::lock_guard lock(mutex_);
      workers_.push_back(std::move(worker));
    }
    cv_.notify_all();
  }

  // Waits up to `timeout` until every worker handed over has stopped and let go of its target
  // (and so of its descriptors and thread); true when none is left.
  bool wait_idle(std::chrono::milliseconds timeout) {
    std::unique_lock lock(mutex_);
    return idle_cv_.wait_for(lock, timeout, [&] { return workers_.empty() && !busy_; });
  }

 private:
  void run() {
    std::unique_lock lock(mutex_);
    for (;;) {
      cv_.wait(lock, [&] { return stopping_ || !workers_.empty(); });
      if (workers_.empty()) return;
      std::shared_ptr<Worker> worker = std::move(workers_.front());
      workers_.pop_front();
      busy_ = true;
      lock.unlock();
      worker->finish_stop();
      worker.reset();
      lock.lock();
      busy_ = false;
      idle_cv_.notify_all();
    }
  }

  std::mutex mutex_;
  std::condition_variable cv_;
  std::condition_variable idle_cv_;
  std::deque<std::shared_ptr<Worker>> workers_;
  bool busy_ = false;  // a worker taken from workers_ is still stopping
  bool stopping_ = false;
  std::thread thread_;
};

Dispatcher::Dispatcher(Engine& engine, DeliveryStore& store, DispatcherOptions options, TargetFactory targets,
                       NotifyLog log, Feed* feed)
    : engine_(engine),
      store_(store),
      options_(options),
      targets_(std::move(targets)),
      log_(log ? std::move(log) : [](bool, std::string_view, std::vector<std::pair<std::string, std::string>>) {}),
      signal_(std::make_unique<FeedSignal>()),
      pool_(std::make_unique<SenderPool>(options_.sender_threads, options_.nice)),
      reaper_(std::make_unique<Reaper>()) {
  if (feed) {
    feed_ = feed;
  } else if (OutboxFeed::available(store_)) {
    own_feed_ = std::make_unique<OutboxFeed>(store_);
    feed_ = own_feed_.get();
  }
  if (feed_) feed_->set_listener([signal = signal_.get()] { signal->notify(); });
  std::lock_guard lock(mutex_);
  try {
    for (const RegistrationRecord& record : store_.list_registrations()) adopt(record, true);
  } catch (const std::exception& e) {
    log_(true, "the registrations cannot be read; notifications are off until the next start", {{"error", e.what()}});
  }
  update_feed_switch();
  if (feed_) {
    reader_ = std::make_unique<Reader>(*this);
    trimmer_ = std::make_unique<Trimmer>(*this);
  }
}

Dispatcher::~Dispatcher() {
  reader_.reset();
  trimmer_.reset();
  {
    std::lock_guard lock(mutex_);
    for (auto& [id, entry] : registrations_) stop_worker(id, entry, false);  // every target abandons at once
    registrations_.clear();
  }
  reaper_.reset();
  if (!options_.keep_feed_on) engine_.set_change_feed(false);
  if (feed_) feed_->set_listener({});
}

std::shared_ptr<Dispatcher::Worker> Dispatcher::start_worker(const Registration& r, std::unique_ptr<Target> target,
                                                             std::uint64_t checkpoint, RegistrationStatus counters,
                                                             std::shared_ptr<Worker> predecessor) {
  if (auto it = retiring_.find(r.id); !predecessor && it != retiring_.end()) predecessor = it->second.lock();
  auto worker = std::make_shared<Worker>(*pool_, store_, *feed_, r, std::move(target), checkpoint, options_, log_,
                                         [signal = signal_.get()] { signal->notify(); }, std::move(counters),
                                         std::move(predecessor));
  signal_->notify();  // the reader serves it from its checkpoint
  return worker;
}

void Dispatcher::stop_worker(std::string_view id, Entry& entry, bool removed) {
  if (!entry.worker) return;
  entry.worker->begin_stop(removed);
  std::erase_if(retiring_, [](const auto& r) { return r.second.expired(); });
  retiring_.insert_or_assign(std::string(id), entry.worker);
  reaper_->retire(std::move(entry.worker));
}

void Dispatcher::update_feed_switch() {
  bool any = options_.keep_feed_on;
  for (const auto& [id, entry] : registrations_) any = any || entry.worker != nullptr;
  engine_.set_change_feed(any);
}

void Dispatcher::run(Entry& entry, const Registration& r, std::unique_ptr<Target> target, bool resume) {
  RegistrationStatus counters;
  // Replaced while running: the next worker goes on where this one stops, which it learns from
  // it (held here, since the reaper may finish and drop it before the next one starts; the
  // checkpoint read below may not have its last position yet).
  std::shared_ptr<Worker> previous = entry.worker;
  if (previous) {
    counters = previous->status(0);
    resume = true;
  }
  stop_worker(r.id, entry, false);
  entry.registration = r;
  entry.fault.reset();
  if (!feed_ || !r.enabled) return;
  engine_.set_change_feed(true);  // before the feed's end is read: every later write has an entry
  std::uint64_t start = 0;
  if (resume) {
    start = feed_->checkpoint(r.id).value_or(feed_->end());
  } else {  // new or enabled again: it skips what was written before
    if (auto it = retiring_.find(r.id); it != retiring_.end()) {
      if (auto stopping = it->second.lock()) {  // its checkpoint must not overwrite this one
        stopping->begin_stop(true);
        stopping->wait_for_stores();
      }
    }
    start = feed_->end();
    feed_->put_checkpoint(r.id, start);
  }
  entry.worker = start_worker(r, std::move(target), start, std::move(counters), std::move(previous));
}

void Dispatcher::adopt(const RegistrationRecord& record, bool resume) {
  std::optional<Registration> r;
  try {
    r = parse_registration(record.id, record.json);
    Entry& entry = registrations_[r->id];
    try {
      run(entry, *r, feed_ && r->enabled ? targets_(*r) : nullptr, resume);
    } catch (const std::exception&) {  // stored, but not running: status says why until it changes
      stop_worker(r->id, entry, false);
      entry.registration = *r;
      throw;
    }
  } catch (const std::exception& e) {
    if (auto it = registrations_.find(record.id); r && it != registrations_.end()) it->second.fault = e.what();
    log_(true, "a stored registration cannot start", {{"registration", record.id}, {"error", e.what()}});
  }
}

void Dispatcher::refresh() {
  std::lock_guard lock(mutex_);  // held while reading, so that a put meanwhile is not undone
  std::set<std::string, std::less<>> stored;
  for (const RegistrationRecord& record : store_.list_registrations()) {
    stored.insert(record.id);
    auto it = registrations_.find(record.id);
    if (it != registrations_.end() && render_registration(it->second.registration) == record.json) continue;
    adopt(record, false);
  }
  for (auto it = registrations_.begin(); it != registrations_.end();) {
    if (stored.contains(it->first)) {
      ++it;
    } else {
      stop_worker(it->first, it->second, true);  // removed by another shadowd
      it = registrations_.erase(it);
    }
  }
  update_feed_switch();
}

namespace {

// Rethrows the exception being handled, thrown while a registration's target or worker started,
// as the API answers it: errors of validation and of the store as they are; running out of
// descriptors, threads or memory (or any other failure to start) as 503 unavailable.
[[noreturn]] void rethrow_start_failure() {
  const std::string prefix = "cannot start the target: ";
  try {
    throw;
  } catch (const Error&) {
    throw;
  } catch (const std::system_error& e) {  // EMFILE, ENFILE, EAGAIN (threads), ENOMEM
    std::string why = e.code().message();
    if (!why.empty()) why[0] = static_cast<char>(std::tolower(static_cast<unsigned char>(why[0])));
    throw Error(ErrorCode::unavailable, prefix + why);
  } catch (const std::bad_alloc&) {
    throw Error(ErrorCode::unavailable, prefix + "out of memory");
  } catch (const std::exception& e) {
    throw Error(ErrorCode::unavailable, prefix + e.what());
  }
}

}  // namespace

void Dispatcher::check_registration_limit(std::string_view id) const {
  if (registrations_.contains(id) || registrations_.size() < options_.max_registrations) return;
  ErrorDetails details;
  details.limit = options_.max_registrations;
  throw Error(ErrorCode::invalid_request,
              "shadowd keeps at most " + std::to_string(options_.max_registrations) +
                  " registrations (--max-registrations): delete one, or raise the limit",
              std::move(details));
}

Registration Dispatcher::put(std::string_view id, std::string_view json) {
  Registration r = parse_registration(id, json);
  check_new_registration(r);
  {
    std::lock_guard lock(mutex_);
    check_registration_limit(r.id);  // before its target takes descriptors
  }
  std::unique_ptr<Target> target;
  try {
    try {
      target = targets_(r);  // refuses a type this build cannot deliver to
    } catch (const std::system_error&) {
      // Out of descriptors or threads: those of registrations just deleted or replaced come
      // back once their workers have stopped, so wait for that (briefly) and try once more.
      if (!reaper_->wait_idle(std::chrono::seconds(2))) throw;
      target = targets_(r);
    }
  } catch (...) {
    rethrow_start_failure();
  }
  if (!feed_) {
    throw Error(ErrorCode::unavailable,
                "notifications need a change feed: on DynamoDB, the table's stream "
                "(shadowd dynamodb create-table enables it)");
  }
  std::lock_guard lock(mutex_);
  check_registration_limit(r.id);  // again: another PUT may have created one meanwhile
  std::optional<RegistrationRecord> previous;
  if (auto it = registrations_.find(r.id); it != registrations_.end()) {
    previous = RegistrationRecord{r.id, render_registration(it->second.registration), now_ns()};
  }
  store_.put_registration({r.id, render_registration(r), now_ns()});
  Entry& entry = registrations_[r.id];
  try {
    run(entry, r, std::move(target), false);
  } catch (...) {
    // Undone, so that a PUT that failed stored nothing: a new registration is removed again; a
    // replaced one is stored and started as it was (if that fails too, its status says why).
    try {
      if (previous) {
        store_.put_registration(*previous);
        adopt(*previous, true);
      } else {
        stop_worker(r.id, entry, true);
        registrations_.erase(r.id);
        store_.remove_registration(r.id);
      }
    } catch (const std::exception& e) {
      log_(true, "a registration that could not start could not be undone either",
           {{"registration", r.id}, {"error", e.what()}});
    }
    update_feed_switch();
    rethrow_start_failure();
  }
  update_feed_switch();
  return r;
}

std::vector<Registration> Dispatcher::list() const {
  std::lock_guard lock(mutex_);
  std::vector<Registration> out;
  for (const auto& [id, entry] : registrations_) out.push_back(entry.registration);
  return out;
}

std::optional<Registration> Dispatcher::get(std::string_view id) const {
  std::lock_guard lock(mutex_);
  auto it = registrations_.find(id);
  if (it == registrations_.end()) return std::nullopt;
  return it->second.registration;
}

bool Dispatcher::remove(std::string_view id) {
  std::lock_guard lock(mutex_);
  auto it = registrations_.find(id);
  if (it != registrations_.end()) {
    const std::shared_ptr<Worker> stopping = it->second.worker;
    stop_worker(it->first, it->second, true);
    registrations_.erase(it);
    update_feed_switch();
    if (stopping) stopping->wait_for_stores();  // none writes a checkpoint or dead letter back
  }
  return store_.remove_registration(id);
}

std::optional<RegistrationStatus> Dispatcher::status(std::string_view id) const {
  std::lock_guard lock(mutex_);
  auto it = registrations_.find(id);
  if (it == registrations_.end()) return std::nullopt;
  if (it->second.worker) return it->second.worker->status(feed_->end());
  RegistrationStatus s;
  s.id = it->first;
  s.dead_letters = store_.count_dead_letters(id);
  if (it->second.fault) s.last_error = "not running: " + *it->second.fault;
  return s;
}

std::vector<RegistrationStatus> Dispatcher::statuses() const {
  std::lock_guard lock(mutex_);
  std::vector<RegistrationStatus> out;
  const std::uint64_t feed_end = feed_ ? feed_->end() : 0;
  for (const auto& [id, entry] : registrations_) {
    if (entry.worker) out.push_back(entry.worker->status(feed_end));
  }
  return out;
}

namespace {

// The registration's dead letters with the given ids (every one when nullopt), at most `limit`,
// in id order; those `skip` names are left out.
std::vector<DeadLetter> find_dead_letters(DeliveryStore& store, std::string_view registration,
                                          const std::optional<std::vector<std::string>>& ids, std::size_t limit,
                                          const std::function<bool(const std::string&)>& skip) {
  std::vector<DeadLetter> out;
  if (ids && ids->empty()) return out;
  std::set<std::string, std::less<>> wanted;
  if (ids) wanted.insert(ids->begin(), ids->end());
  for_each_dead_letter(store, registration, [&](DeadLetter& letter) {
    if (ids && letter.event_id > *wanted.rbegin()) return false;  // past the last one named
    if ((!ids || wanted.contains(letter.event_id)) && !skip(letter.event_id)) out.push_back(std::move(letter));
    return out.size() < limit;
  });
  return out;
}

}  // namespace

std::size_t Dispatcher::redrive(std::string_view id, const std::optional<std::vector<std::string>>& event_ids) {
  std::lock_guard lock(mutex_);
  auto it = registrations_.find(id);
  if (it == registrations_.end()) throw Error::not_found("no registration " + std::string(id));
  Worker* worker = it->second.worker.get();
  if (!worker) {
    throw Error::invalid_request("registration " + std::string(id) + " is disabled: enable it to redrive", "enabled");
  }
  return worker->redrive(find_dead_letters(store_, id, event_ids, options_.window,
                                           [&](const std::string& event) { return worker->redriving(event); }));
}

std::size_t Dispatcher::delete_dead_letters(std::string_view id, const std::optional<std::vector<std::string>>& event_ids) {
  {
    std::lock_guard lock(mutex_);
    if (!registrations_.contains(id)) throw Error::not_found("no registration " + std::string(id));
  }
  // The store's work happens outside the lock: deleting many letters must not hold up the rest.
  // One call removes them all (SQLite: one transaction).
  const std::size_t n = event_ids ? store_.remove_dead_letters(id, std::span<const std::string>(*event_ids))
                                  : store_.remove_dead_letters(id, std::nullopt);
  std::lock_guard lock(mutex_);
  if (auto it = registrations_.find(id); it != registrations_.end() && it->second.worker) {
    it->second.worker->forget_dead_letters(event_ids, n);
  }
  return n;
}

std::size_t Dispatcher::purge_dead_letters() { return store_.purge_dead_letters(now_ns()); }

}  // namespace deviceshadow::notify
