#include "live/hub.hpp"

#include "deviceshadow/error.hpp"
#include "deviceshadow/event_id.hpp"
#include "deviceshadow/prometheus.hpp"
#include "deviceshadow/timestamp.hpp"
#include "notify/event.hpp"
#include "query/filter.hpp"

#include <algorithm>
#include <array>
#include <cctype>
#include <cstdio>
#include <limits>
#include <list>
#include <map>
#include <mutex>
#include <set>
#include <shared_mutex>
#include <tuple>

namespace deviceshadow::live {

namespace {

constexpr std::string_view kOverflow = "event: overflow\ndata: {}\n\n";
constexpr std::string_view kKeepAlive = ": keep-alive\n\n";
// Events a replay reads from the store at once.
constexpr std::size_t kReplayPage = 256;
// A replay waits this long for a client to make room before it counts it too slow.
constexpr auto kReplayPatience = std::chrono::seconds(30);

// The SSE message of an event: "id", "event" (change or deleted), "data" (the CloudEvent, compact
// JSON: one line).
std::string message(const notify::FeedWrite& w, const std::string& cloud_event) {
  std::string m;
  m.reserve(cloud_event.size() + w.id.size() + 32);
  m.append("id: ").append(w.id).append(w.deleted ? "\nevent: deleted\ndata: " : "\nevent: change\ndata: ");
  m.append(cloud_event).append("\n\n");
  return m;
}

// Whether `subject` passes the stream's filter (true without one); time:now is `write_ns`, the
// write's time. A filter that cannot be judged on the shadow lets the event through, logged, as a
// registration's does (docs/notifications.md "Filters"): an event too many beats one lost.
bool passes(const notify::Registration& selection, const query::Subject& subject, std::int64_t write_ns,
            const HubOptions& options) {
  if (selection.filter.empty()) return true;
  try {
    return selection.parsed_filter ? selection.parsed_filter->matches(subject)
                                   : query::Filter::parse(selection.filter, write_ns).matches(subject);
  } catch (const std::exception& e) {
    if (options.on_error) options.on_error("a stream's filter could not be judged; the event is sent", e.what());
    return true;
  }
}

std::int64_t saturating_sub(std::int64_t a, std::int64_t b) {
  constexpr std::int64_t lo = std::numeric_limits<std::int64_t>::min();
  return a < lo + b ? lo : a - b;
}

}  // namespace

ResumePoint parse_resume_point(std::string_view text, std::string_view field) {
  if (const std::optional<std::int64_t> ns = event_id_time(text)) return {*ns, std::string(text)};
  if (auto t = parse_rfc3339(text)) return {t->unix_nanos(), {}};
  throw Error::invalid_request(std::string(field) + " must be an event id (as sent in id:) or an RFC 3339 time",
                               std::string(field));
}

void set_filter(notify::Registration& selection, std::string_view text) {
  selection.filter.clear();
  selection.parsed_filter.reset();
  if (text.empty()) return;
  auto parsed = std::make_shared<const query::Filter>(query::Filter::parse(text, now().unix_nanos()));
  selection.filter = std::string(text);
  if (text.find("time:now") == std::string_view::npos) selection.parsed_filter = std::move(parsed);
}

struct Hub::Core {
  HubStats stats;
  std::shared_mutex mutex;  // subs: shared while fanning out, exclusive to add or drop
  std::list<std::shared_ptr<Subscription>> subs;
  std::atomic<std::size_t> count{0};  // subs.size(), read without the lock
};

Hub::Admission::~Admission() {
  end_replay();
  --core_->stats.open_streams;
}

void Hub::Admission::end_replay() noexcept {
  if (replay_) --core_->stats.replaying;
  replay_ = false;
}

struct Hub::Subscription {
  struct Held {
    std::string key;  // replay_key
    std::string id;
    std::int64_t ns;
    http::SharedBytes message;
  };

  std::shared_ptr<http::ResponseStream> out;
  StreamRequest request;
  std::shared_ptr<Admission> admission;
  HubStats& stats;
  std::size_t limit;  // the stream's buffer bound, also for the events held during a replay
  std::list<std::shared_ptr<Subscription>>::iterator entry;  // in Core::subs while `listed`
  bool listed = false;                                        // guarded by Core::mutex

  std::mutex mutex;  // the fields below, and the order of pushes
  bool replaying = false;
  std::vector<Held> held;  // live events that came during the replay
  std::size_t held_bytes = 0;
  // What a replay sent that may still come live, as "{id}\x01{thing}\x01{name}" (ids start
  // with their time, so the set is in time order): written by the replaying thread alone while
  // `replaying`, read under `mutex` after. Not the last id per shadow: history may show an event
  // after a later one of its shadow (on DynamoDB, whose time index shows an event a moment after
  // its commit), and that event must still be sent. Only what is likely to come live again is
  // kept (replay_window_ns, at most `limit` bytes): what is left out may come twice, never not at
  // all.
  std::set<std::string> replayed;
  std::size_t replayed_bytes = 0;
  std::int64_t replay_window_ns = 0;
  // A resumed stream of one shadow on a store only this process writes: the client has every
  // event up to this id, its resume point (empty elsewhere: the replay reaches back instead).
  std::string shadow_floor;

  static std::string replay_key(std::string_view id, std::string_view thing, std::string_view name) {
    std::string key(id);
    key += '\x01';
    key += thing;
    key += '\x01';
    key += name;
    return key;
  }
  // Whether a live event of a resumed stream is one the client has.
  bool has(std::string_view id, std::int64_t ns, const std::string& key) {
    if (!shadow_floor.empty() && id <= shadow_floor) return true;
    if (replayed.empty()) return false;
    // Ids older than the window cannot come again: forget them.
    replayed.erase(replayed.begin(), replayed.lower_bound(event_id_time_prefix(saturating_sub(ns, replay_window_ns))));
    return replayed.contains(key);
  }

  Subscription(std::shared_ptr<http::ResponseStream> o, StreamRequest r, std::shared_ptr<Admission> a, HubStats& s,
               std::size_t l)
      : out(std::move(o)), request(std::move(r)), admission(std::move(a)), stats(s), limit(l) {}

  bool follows(const notify::FeedWrite& w) const {
    if (request.shadow && (w.thing != request.shadow->thing || w.name != request.shadow->name)) return false;
    if (!request.scope.empty() &&
        std::none_of(request.scope.begin(), request.scope.end(), [&](const ThingPattern& p) { return p.matches(w.thing); })) {
      return false;
    }
    return notify::wants(request.selection, w);
  }

  // With `mutex` held: sends a message (an event unless a comment), or ends the stream when the
  // client is too slow for it.
  void send(const http::SharedBytes& m, bool event = true) {
    switch (out->push(m)) {
      case http::ResponseStream::Push::queued: stats.messages += event ? 1 : 0; break;
      case http::ResponseStream::Push::full: overflow(); break;
      case http::ResponseStream::Push::ended: break;
    }
  }
  void overflow() {
    if (out->ended()) return;
    ++stats.overflows;
    out->finish(kOverflow);
  }

  // A live event: held during a replay, else sent unless the replay sent it (a poll may find
  // events again that a replay has sent: HubOptions::poll).
  void deliver(const notify::FeedWrite& w, const http::SharedBytes& m) {
    std::lock_guard lock(mutex);
    if (!replaying) {
      if ((!shadow_floor.empty() || !replayed.empty()) && has(w.id, w.timestamp_ns, replay_key(w.id, w.thing, w.name))) return;
      return send(m);
    }
    if (!held.empty() && held_bytes + m->size() > limit) return overflow();  // one larger than the bound is held
    held_bytes += m->size();
    held.push_back({replay_key(w.id, w.thing, w.name), std::string(w.id), w.timestamp_ns, m});
  }

  // A replayed event, sent at the client's pace; false when the stream ended.
  bool send_paced(std::string text) {
    const http::SharedBytes m = std::make_shared<const std::string>(std::move(text));
    const auto deadline = std::chrono::steady_clock::now() + kReplayPatience;
    for (;;) {
      switch (out->push(m)) {
        case http::ResponseStream::Push::queued: ++stats.messages; return true;
        case http::ResponseStream::Push::ended: return false;
        case http::ResponseStream::Push::full: break;
      }
      if (std::chrono::steady_clock::now() > deadline) {
        std::lock_guard lock(mutex);
        overflow();
        return false;
      }
      // Room for it, or (a message larger than the bound) nothing waiting.
      out->wait_below(m->size() < limit ? limit - m->size() : 0, std::chrono::seconds(1));
    }
  }

  // After the replay: the held events the replay did not send, then live.
  void go_live() {
    std::lock_guard lock(mutex);
    for (const Held& h : held) {
      if (!has(h.id, h.ns, h.key)) send(h.message);
    }
    held.clear();
    held_bytes = 0;
    replaying = false;
  }
};

Hub::Hub(Engine& engine, HubOptions options)
    : engine_(engine), options_(options), core_(std::make_shared<Core>()) {
  if (options_.poll) {
    options_.reach_back = std::max(options_.reach_back, options_.poll->settle);
    poller_ = std::thread([this] { poll_loop(); });
  }
  engine_.add_write_listener(*this);
  beater_ = std::thread([this] { heartbeats(); });
}

Hub::~Hub() {
  {
    std::lock_guard lock(beat_mutex_);
    stopping_ = true;
  }
  beat_.notify_all();
  beater_.join();
  if (poller_.joinable()) poller_.join();
  engine_.remove_write_listener(*this);
  std::vector<std::shared_ptr<Subscription>> open;
  {
    std::unique_lock lock(core_->mutex);
    open.assign(core_->subs.begin(), core_->subs.end());
    for (const auto& sub : open) sub->listed = false;
    core_->subs.clear();
    core_->count = 0;
  }
  for (const auto& sub : open) sub->out->finish({});
}

const HubStats& Hub::stats() const noexcept { return core_->stats; }

std::shared_ptr<Hub::Admission> Hub::admit(bool replay) {
  HubStats& stats = core_->stats;
  // Takes one of `limit` places counted by `count`.
  auto take = [](std::atomic<std::uint64_t>& count, std::size_t limit) {
    for (std::uint64_t n = count.load(); n < limit;) {
      if (count.compare_exchange_weak(n, n + 1)) return true;
    }
    return false;
  };
  if (!replay || take(stats.replaying, options_.max_replays)) {
    if (take(stats.open_streams, options_.max_streams)) return std::make_shared<Admission>(core_, replay);
    if (replay) --stats.replaying;
  }
  ++stats.refused_streams;
  return nullptr;
}

void Hub::serve(std::shared_ptr<http::ResponseStream> stream, StreamRequest request, std::shared_ptr<Admission> admission) {
  auto sub = std::make_shared<Subscription>(stream, std::move(request), std::move(admission), core_->stats,
                                            options_.stream_buffer);
  const std::optional<ResumePoint> after = sub->request.after;
  sub->replaying = after.has_value();
  {
    std::unique_lock lock(core_->mutex);
    sub->entry = core_->subs.insert(core_->subs.end(), sub);
    sub->listed = true;
    ++core_->count;
  }
  // Dropped when the stream ends, whoever ends it (the client, an overflow, the server's stop).
  stream->on_end([core = std::weak_ptr<Core>(core_), weak = std::weak_ptr<Subscription>(sub)] {
    auto c = core.lock();
    auto s = weak.lock();
    if (!c || !s) return;
    std::unique_lock lock(c->mutex);
    if (!s->listed) return;  // dropped by ~Hub
    c->subs.erase(s->entry);
    s->listed = false;
    --c->count;
  });
  if (after) {
    try {
      replay(*sub, *after);
    } catch (const std::exception& e) {  // the store failed: the client resumes later
      if (options_.on_error) options_.on_error("a stream's replay failed", e.what());
      stream->finish({});
    }
    sub->admission->end_replay();
    sub->go_live();
  }
}

void Hub::replay(Subscription& sub, const ResumePoint& point) {
  ++core_->stats.replays;
  const EngineOptions& engine = engine_.options();
  const std::int64_t now = engine.clock();
  // A replayed event may also come live while its commit trails its time, or (polling) while the
  // poll reads recent events again and sweeps settled ones (a late commit swept later may come
  // twice).
  const auto ns = [](std::chrono::milliseconds d) { return std::chrono::duration_cast<std::chrono::nanoseconds>(d).count(); };
  const std::chrono::milliseconds window = options_.reach_back + (options_.poll ? options_.poll->settle : std::chrono::milliseconds(0));
  sub.replay_window_ns = std::min<std::int64_t>(ns(window) + 2 * std::min<std::int64_t>(core_->stats.max_commit_lag_ns.load(), ns(window)),
                                                std::numeric_limits<std::int64_t>::max() / 4);
  // Every event after the horizon is still kept (an event expires retention after its time);
  // without history nothing is.
  const std::int64_t horizon =
      engine.keeps_history() ? saturating_sub(now, std::chrono::duration_cast<std::chrono::nanoseconds>(engine.history_retention).count())
                     : now;
  bool gap = point.ns < horizon;
  auto announce_gap = [&](std::string_view oldest) {
    gap = false;
    std::string m = "event: gap\ndata: {\"oldest\":";
    m += oldest.empty() ? "null" : "\"" + std::string(oldest) + "\"";
    m += "}\n\n";
    return sub.send_paced(m);
  };
  // With a filter: each replayed shadow as it is now, read on its first event.
  std::map<ShadowKey, ShadowRecord> current;
  const TimestampKeys& keys = engine.document.timestamp_keys;
  // Sends one history event if the stream wants it; false when the stream ended.
  auto emit = [&](const ShadowKey& key, const HistoryEvent& e) {
    notify::FeedEntryText entry("{\"event\":" + e.json + "}");
    const notify::FeedWrite& w = entry.write();
    if (!sub.follows(w)) return true;
    if (!sub.request.selection.filter.empty()) {
      // History keeps no whole state: the filter judges the shadow as it is now, read once per
      // shadow during the replay (docs/streams.md). A store that fails ends the stream (below).
      auto it = current.find(key);
      if (it == current.end()) it = current.emplace(key, engine_.store().read(key)).first;
      if (!passes(sub.request.selection, query::Subject(it->first, it->second, keys), w.timestamp_ns, options_)) return true;
    }
    if (gap && !announce_gap(e.id)) return false;
    if (e.timestamp_ns >= saturating_sub(now, sub.replay_window_ns) && sub.replayed_bytes < sub.limit) {
      std::string k = Subscription::replay_key(e.id, key.thing, key.name);
      sub.replayed_bytes += k.size() + 32;
      sub.replayed.insert(std::move(k));
    }
    return sub.send_paced(message(w, notify::build_event(sub.request.selection, entry, options_.stream_buffer / 2)));
  };
  // From far enough back that a write which committed after the client's last event but took
  // an earlier time is not missed (docs/streams.md).
  const std::int64_t reach_since = saturating_sub(
      point.ns, std::max<std::int64_t>(ns(options_.reach_back), 2 * core_->stats.max_commit_lag_ns.load()));
  Store& store = engine_.store();
  if (sub.request.shadow) {
    const ShadowKey& key = *sub.request.shadow;
    HistoryQuery q;
    q.descending = false;
    q.limit = kReplayPage;
    q.max_bytes = options_.stream_buffer;
    if (options_.poll) {
      // Several processes write the store, whose live events come from a time index that shows
      // an event a moment after its commit: the client may lack one older than its resume
      // point, so reach back as across shadows.
      q.since_ns = reach_since;
    } else if (point.id.empty()) {
      q.since_ns = point.ns == std::numeric_limits<std::int64_t>::max() ? point.ns : point.ns + 1;
      sub.shadow_floor = event_id_time_prefix(point.ns) + "~";  // above every id at the point's time ('#' < '~')
    } else {
      q.after_id = point.id;
      sub.shadow_floor = point.id;
    }
    for (;;) {
      std::vector<HistoryEvent> page = store.history(key, q);
      if (page.empty()) break;
      for (const HistoryEvent& e : page) {
        if (!emit(key, e)) return;
      }
      q.after_id = page.back().id;
    }
  } else {
    std::optional<ShadowHistoryEvent> last;
    for (;;) {
      std::vector<ShadowHistoryEvent> page = store.history_since(reach_since, last ? &*last : nullptr, kReplayPage);
      if (page.empty()) break;
      for (const ShadowHistoryEvent& e : page) {
        if (!emit(e.key, e.event)) return;
      }
      last = std::move(page.back());
    }
  }
  if (gap) announce_gap({});
}

void Hub::on_write(const WriteNotice& notice) noexcept {
  if (core_->count.load(std::memory_order_relaxed) == 0 || notice.change.empty()) return;
  try {
    const notify::FeedEntryText entry{std::string(notice.change)};
    const std::int64_t lag = engine_.options().clock() - entry.write().timestamp_ns;
    auto raise = [lag](std::atomic<std::int64_t>& max) {
      for (std::int64_t seen = max.load(); lag > seen;) {
        if (max.compare_exchange_weak(seen, lag)) break;
      }
    };
    raise(core_->stats.max_commit_lag_ns);
    // Polling, the hook only measures how far commits trail their times (the poll's window).
    if (options_.poll) return raise(poll_lag_ns_);
    fan_out(entry, notice.key, [&] { return notice.after; });
  } catch (const std::exception& e) {  // a malformed entry: the engine's mistake; nothing to send
    if (options_.on_error) options_.on_error("a live event could not be built", e.what());
  }
}

void Hub::fan_out(const notify::FeedEntryText& entry, const ShadowKey& key, const std::function<ShadowRecord()>& after,
                  bool reads_store) {
  const notify::FeedWrite& w = entry.write();
  // Rendered once per kind of stream (sections × include) that wants the write.
  std::array<http::SharedBytes, 3 * 8> rendered;
  // The shadow for streams with a filter: built for the first one.
  std::optional<ShadowRecord> record;
  std::optional<query::Subject> subject;
  bool unjudged = false;  // the shadow could not be read: filters let the event through
  if (reads_store) {
    bool filtered = false;
    {
      std::shared_lock lock(core_->mutex);
      filtered = std::any_of(core_->subs.begin(), core_->subs.end(), [&](const auto& sub) {
        return !sub->request.selection.filter.empty() && sub->follows(w);
      });
    }
    try {
      if (filtered) subject.emplace(key, record.emplace(after()), engine_.options().document.timestamp_keys);
    } catch (const std::exception& e) {  // an event too many beats one lost, as a filter that cannot be judged
      unjudged = true;
      if (options_.on_error) options_.on_error("a stream's filter could not be judged; the event is sent", e.what());
    }
  }
  std::shared_lock lock(core_->mutex);
  for (const auto& sub : core_->subs) {
    if (!sub->follows(w)) continue;
    if (!sub->request.selection.filter.empty() && !unjudged) {
      if (!subject) subject.emplace(key, record.emplace(after()), engine_.options().document.timestamp_keys);
      if (!passes(sub->request.selection, *subject, w.timestamp_ns, options_)) continue;
    }
    const notify::Registration& r = sub->request.selection;
    http::SharedBytes& m = rendered[static_cast<std::size_t>(r.sections) * 8 + (r.include_old ? 4 : 0) + (r.include_new ? 2 : 0) +
                              (r.include_diff ? 1 : 0)];
    // An event past half the buffer goes without old and new ("truncated"), as notifications
    // do past a target's limit, so that one large write cannot overflow every stream for good.
    if (!m) m = std::make_shared<const std::string>(message(w, notify::build_event(r, entry, options_.stream_buffer / 2)));
    sub->deliver(w, m);
  }
}

// The poll (HubOptions::poll): while a stream is open, every `interval` it reads the store's
// history across shadows of the last `recent` while, and (the sweeps) the events that became
// `settle` old and `late` old since the previous poll, and sends each event it has not seen yet.
// Seen events are remembered until the late sweep has passed them. When the first stream opens the poll starts
// by taking what is already there as seen, except the last `recent` while (so a write that
// committed just after the stream opened but took its time before is sent): a new stream may get
// events of up to `recent` before it opened, as at-least-once allows.
void Hub::poll_loop() {
  const HubOptions::Poll& poll = *options_.poll;
  auto ns = [](std::chrono::milliseconds d) { return std::chrono::duration_cast<std::chrono::nanoseconds>(d).count(); };
  using Seen = std::tuple<std::int64_t, std::string, std::string, std::string>;  // time, thing, name, id
  std::set<Seen> seen;
  constexpr std::int64_t kIdle = std::numeric_limits<std::int64_t>::min();
  std::int64_t swept_to = kIdle;  // the sweep has read every event up to this time; kIdle: idle
  std::int64_t late_swept_to = kIdle;  // and the late sweep
  std::int64_t lag_peak = 0;             // commit lag seen lately, decaying by 1/32 a poll
  Store& store = engine_.store();
  constexpr std::size_t kPage = 1000;
  // Reads the events from `since` to `until`, page by page, into `out`.
  auto read = [&](std::int64_t since, std::int64_t until, std::vector<ShadowHistoryEvent>& out) {
    std::optional<ShadowHistoryEvent> last;
    for (;;) {
      std::vector<ShadowHistoryEvent> page = store.history_since(since, last ? &*last : nullptr, kPage);
      for (ShadowHistoryEvent& e : page) {
        if (e.event.timestamp_ns > until) return;
        out.push_back(std::move(e));
      }
      if (page.size() < kPage) return;
      last = out.back();
    }
  };
  std::unique_lock beat_lock(beat_mutex_);
  while (!beat_.wait_for(beat_lock, poll.interval, [&] { return stopping_; })) {
    if (core_->count.load() == 0) {
      swept_to = late_swept_to = kIdle;
      seen.clear();
      continue;
    }
    beat_lock.unlock();
    try {
      const std::int64_t now = engine_.options().clock();
      // The window read again: `recent`, or twice the longest time this process's writes took
      // from their times to their commits lately (a loaded table: others' take as long), at
      // most half of `settle`.
      lag_peak = std::max<std::int64_t>(poll_lag_ns_.exchange(0), lag_peak - lag_peak / 32);
      const std::int64_t window = std::clamp<std::int64_t>(2 * lag_peak, ns(poll.recent), ns(poll.settle) / 2);
      std::vector<ShadowHistoryEvent> events;
      if (swept_to == kIdle) {
        read(now - ns(poll.settle), now - window - 1, events);
        for (const ShadowHistoryEvent& e : events) seen.emplace(e.event.timestamp_ns, e.key.thing, e.key.name, e.event.id);
        events.clear();
        swept_to = late_swept_to = now - ns(poll.settle);
      }
      const std::int64_t settled = now - ns(poll.settle);
      const std::int64_t late = now - ns(poll.late);
      if (late > late_swept_to) read(late_swept_to, late, events);
      if (settled > swept_to) read(swept_to, settled, events);
      read(now - window, std::numeric_limits<std::int64_t>::max(), events);
      ++core_->stats.polls;
      for (const ShadowHistoryEvent& e : events) {
        if (!seen.emplace(e.event.timestamp_ns, e.key.thing, e.key.name, e.event.id).second) continue;
        try {
          const notify::FeedEntryText entry("{\"event\":" + e.event.json + "}");
          // History keeps no whole state: a filter judges the shadow as it is now, as in a replay.
          fan_out(entry, e.key, [&] { return store.read(e.key); }, true);
        } catch (const std::exception& error) {
          if (options_.on_error) options_.on_error("a polled event could not be sent to live streams", error.what());
        }
      }
      swept_to = std::max(swept_to, settled);
      late_swept_to = std::max(late_swept_to, late);
      seen.erase(seen.begin(), seen.lower_bound(Seen{late_swept_to, {}, {}, {}}));
    } catch (const std::exception& e) {  // the store failed: the next poll reads the same again
      ++core_->stats.poll_failures;
      if (options_.on_error) options_.on_error("polling history for live streams failed", e.what());
    }
    beat_lock.lock();
  }
}

void Hub::heartbeats() {
  std::unique_lock beat_lock(beat_mutex_);
  const auto keep_alive = std::make_shared<const std::string>(kKeepAlive);
  while (!beat_.wait_for(beat_lock, options_.heartbeat, [&] { return stopping_; })) {
    std::shared_lock lock(core_->mutex);
    for (const auto& sub : core_->subs) {
      std::lock_guard sub_lock(sub->mutex);
      if (!sub->replaying) sub->send(keep_alive, false);  // a replay sends enough
    }
  }
}

void Hub::render_metrics(std::string& out) const {
  const HubStats& s = core_->stats;
  auto sample = [&](const char* name, const char* type, const char* help, std::uint64_t value) {
    prometheus::append_metric(out, type, name, help, value);
  };
  sample("shadowd_streams_open", "gauge", "Live change streams (SSE) open.", s.open_streams.load());
  sample("shadowd_streams_refused_total", "counter", "Streams refused with 503: --max-streams were open, or (resuming ones) a quarter of --workers were replaying.", s.refused_streams.load());
  sample("shadowd_stream_messages_total", "counter", "Events sent on live streams, replayed ones included.", s.messages.load());
  sample("shadowd_stream_overflows_total", "counter", "Streams closed with event: overflow for a slow reader.", s.overflows.load());
  sample("shadowd_stream_replays_total", "counter", "Streams that resumed from an event id or a time.", s.replays.load());
  if (options_.poll) {
    sample("shadowd_stream_polls_total", "counter", "Polls of the store's history for live streams (DynamoDB).", s.polls.load());
    sample("shadowd_stream_poll_failures_total", "counter", "Polls of the store's history that failed (tried again).",
           s.poll_failures.load());
  }
}

}  // namespace deviceshadow::live
