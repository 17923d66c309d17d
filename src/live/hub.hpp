// Live change streams (docs/streams.md): the hub that fans every stored write out to the open
// Server-Sent Events streams that want it, and replays history to a stream that resumes.
//
// Live events come from one of two sources. On a store only this process writes (SQLite, memory)
// from the engine's write hook (WriteListener): it is told of each stored write on the writing
// thread while that shadow's other writers wait, so one shadow's writes arrive in version order,
// and it is told of every write this process stores, so nothing committed after a stream
// subscribed can pass it by. On a store several processes write (DynamoDB) from a poll of the
// store's history across shadows (HubOptions::poll, Store::history_since), once per process while
// a stream is open: each poll reads again the most recent events, and every event once more when
// it has settled, de-duplicated by id, so that a write that commits later than its time says is
// still found. A resuming stream subscribes first, then replays history,
// and holds the live events that arrive meanwhile; it sends them after the replay, leaving out
// those up to its resume point (one shadow, on a store only this process writes) and those the
// replay already sent (by id, kept while they could still come live). Replayed
// events come from history, which keeps each write's change event but not the sections' whole
// states: they carry "diff" and "truncated": true instead of "old" and "new" (docs/streams.md).
// A stream with a filter gets a live write when the shadow as the write left it (the hook's
// `after`) passes; a replayed one when the shadow as it is now (read once per shadow during the
// replay) passes, since history keeps no whole state.
#pragma once

#include "deviceshadow/engine.hpp"
#include "http/request.hpp"
#include "notify/registration.hpp"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

namespace deviceshadow::notify {
class FeedEntryText;
}

namespace deviceshadow::live {

struct HubOptions {
  std::chrono::milliseconds heartbeat{15000};           // a ": keep-alive" comment this often
  std::size_t stream_buffer = std::size_t{1} << 20;     // bytes that may wait for a client
  std::size_t max_streams = 1000;                       // open at once
  // Resuming streams replaying at once: a replay holds an HTTP worker thread at its client's
  // pace, so slow resuming clients must not take every worker from the API.
  std::size_t max_replays = 16;
  // How far before a resume time a replay across shadows (and, polling, of one shadow) starts: a
  // write takes its timestamp before it commits, so one that committed after an event a client
  // saw may carry an earlier time (docs/streams.md). The hub widens it to twice the longest
  // timestamp-to-commit time it has seen.
  std::chrono::milliseconds reach_back{5000};
  // Set: live events come from polling the store's history across shadows instead of the
  // engine's write hook, so that writes of other processes on a shared store are seen.
  struct Poll {
    std::chrono::milliseconds interval{200};  // between polls, while a stream is open
    // Each poll reads the events of this last while again (or of twice the longest time this
    // process's writes lately took from their times to their commits, up to half of settle): a
    // write whose commit trails its time by less than that comes within one interval.
    std::chrono::milliseconds recent{1000};
    // Every event is read once more when it is this old: a write whose commit trails its time by
    // less than this (and the index behind the commit) comes at the latest then.
    std::chrono::milliseconds settle{10000};
    // And a last time when it is this old: a write whose commit trailed its time by more than
    // `settle` (a store call retried for long, an index far behind) comes then. Longer than any
    // write can take (the DynamoDB client gives up on a call within a minute).
    std::chrono::milliseconds late{120000};
  };
  std::optional<Poll> poll;
  // Told what failed, and why: polling the store, a replay, an event that could not be built or
  // sent, a filter that could not be judged. Called on the thread that failed. Must not throw.
  std::function<void(std::string_view what, std::string_view error)> on_error;
};

// Counters since the hub started (relaxed).
struct HubStats {
  std::atomic<std::uint64_t> open_streams{0};
  std::atomic<std::uint64_t> refused_streams{0};  // over max_streams or max_replays
  std::atomic<std::uint64_t> replaying{0};        // streams replaying now
  std::atomic<std::uint64_t> messages{0};         // events sent, replayed ones included
  std::atomic<std::uint64_t> overflows{0};        // streams closed for a slow reader
  std::atomic<std::uint64_t> replays{0};          // streams that resumed from a point
  std::atomic<std::int64_t> max_commit_lag_ns{0}; // longest time from a write's timestamp to its hook
  std::atomic<std::uint64_t> polls{0};            // polls of the store's history (HubOptions::poll)
  std::atomic<std::uint64_t> poll_failures{0};    // polls the store failed (tried again next time)
};

// Where a stream resumes: after an event id ("{20-digit ns}#{letter}{version}") or a time.
struct ResumePoint {
  std::int64_t ns = 0;  // the time: the id's, or the one given
  std::string id;       // empty when a time was given
};
// Parses `after` or Last-Event-ID; throws Error::invalid_request naming `field`.
ResumePoint parse_resume_point(std::string_view text, std::string_view field);

// Sets the filter (docs/queries.md) a stream's shadow must pass after each write it gets; empty:
// none. Throws Error::invalid_filter (offset, expected) when it does not parse. time:now is each
// write's time: a filter naming it is parsed again per write.
void set_filter(notify::Registration& selection, std::string_view text);

// What one stream follows.
struct StreamRequest {
  std::optional<ShadowKey> shadow;    // nullopt: every shadow the scope covers
  notify::Registration selection;     // sections, match, paths, include (notify::parse_selection), filter
  std::vector<ThingPattern> scope;    // the things the caller may read; empty: every thing
  std::optional<ResumePoint> after;   // replay what came after it first
};

class Hub final : private WriteListener {
 public:
  struct Core;  // what streams share with the hub (they may outlive it): stats, subscriptions
  // A place among the open streams, held while one is open, and for a resuming stream a place
  // among the replays until its replay ends.
  class Admission {
   public:
    Admission(std::shared_ptr<Core> core, bool replay) : core_(std::move(core)), replay_(replay) {}
    ~Admission();
    Admission(const Admission&) = delete;
    Admission& operator=(const Admission&) = delete;
    void end_replay() noexcept;

   private:
    std::shared_ptr<Core> core_;
    bool replay_;
  };

  // Listens to `engine`'s writes from now on (or, with options.poll, polls its store's history
  // while a stream is open); destroy the hub after writes end.
  Hub(Engine& engine, HubOptions options);
  ~Hub() override;
  Hub(const Hub&) = delete;
  Hub& operator=(const Hub&) = delete;

  // A place for a new stream (a resuming one: `replay`), or nullptr when max_streams are open
  // or, for a resuming one, max_replays are replaying.
  std::shared_ptr<Admission> admit(bool replay);
  // Serves `request` on `stream` until the stream ends: replays (blocking the caller, a worker,
  // at the client's pace), then leaves the stream to the live events and returns.
  void serve(std::shared_ptr<http::ResponseStream> stream, StreamRequest request, std::shared_ptr<Admission> admission);

  const HubOptions& options() const noexcept { return options_; }
  const HubStats& stats() const noexcept;
  // The counters in Prometheus text format.
  void render_metrics(std::string& out) const;

 private:
  struct Subscription;
  void on_write(const WriteNotice& write) noexcept override;
  // Sends one write (its feed entry) to every stream that wants it; `after` gives the shadow the
  // filters judge, asked only for a stream with a filter, once. `reads_store`: `after` reads the
  // store, so it is asked before the streams' lock is taken (opening and ending streams must not
  // wait on a store read).
  void fan_out(const notify::FeedEntryText& entry, const ShadowKey& key, const std::function<ShadowRecord()>& after,
               bool reads_store = false);
  void replay(Subscription& sub, const ResumePoint& point);
  void heartbeats();
  void poll_loop();

  Engine& engine_;
  HubOptions options_;
  std::shared_ptr<Core> core_;
  std::mutex beat_mutex_;
  std::condition_variable beat_;
  bool stopping_ = false;
  std::thread beater_;
  std::thread poller_;  // with options.poll
  std::atomic<std::int64_t> poll_lag_ns_{0};  // with options.poll: the longest commit lag since the last poll
};

}  // namespace deviceshadow::live
