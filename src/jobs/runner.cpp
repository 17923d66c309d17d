#include "jobs/runner.hpp"

#include "deviceshadow/error.hpp"
#include "deviceshadow/json.hpp"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <random>

namespace deviceshadow::jobs {
namespace {

constexpr std::size_t kSample = 100;
constexpr int kMaxJudgements = 5;  // reads and judgements of one target before it fails on conflicts
constexpr std::uint64_t kReadBlock = 4;     // targets an unpaced job's worker reads at once
constexpr std::uint64_t kChunkPages = 10;  // pages of targets between progress records, unpaced

std::string random_hex(int digits) {
  static thread_local std::mt19937_64 random{std::random_device{}()};
  std::string out;
  for (int i = 0; i < digits; ++i) out += "0123456789abcdef"[random() % 16];
  return out;
}

// 16 hex digits of the creation time in ns, '-', 8 random hex digits: ids sort by creation.
// A job id starts with its creation time: every id of a job created before `ns` sorts below it.
std::string job_id_time(std::int64_t ns) {
  char time[17];
  std::snprintf(time, sizeof time, "%016llx", static_cast<unsigned long long>(ns));
  return time;
}

std::string new_job_id(std::int64_t now_ns) { return job_id_time(now_ns) + "-" + random_hex(8); }

// A selection that began this long ago has ended: the examine budget bounds it to minutes.
constexpr std::chrono::hours kSelectionBound{1};
// How long a cancel waits for the local runner to stop (the writes it has begun to finish).
constexpr std::chrono::seconds kCancelWait{10};

enum class Outcome { pending, succeeded, failed, skipped };

// Whether the job's write to `key` is already stored: the desired section was last written with
// the job's token, or the shadow's history since the job began holds an event with it (history
// is stored in the write's transaction). For the targets whose outcome a crash left unrecorded.
bool already_written(Store& store, const ShadowKey& key, const ShadowRecord& record, const std::string& token,
                     std::int64_t since_ns) {
  if (record.desired.client_token == token && record.desired.timestamp_ns >= since_ns) return true;
  HistoryQuery q;
  q.limit = 100;
  q.descending = false;
  q.since_ns = since_ns;
  while (true) {
    std::vector<HistoryEvent> events = store.history(key, q);
    for (const HistoryEvent& e : events) {
      const json::value v = parse_json(e.json, 512);
      const json::value* t = v.is_object() ? v.get_object().if_contains("clientToken") : nullptr;
      if (t && t->is_string() && t->get_string() == token) return true;
    }
    if (events.size() < q.limit) return false;
    q.after_id = events.back().id;
  }
}

// Spreads the writes of a job with ratePerSecond over time, across its workers.
class Pacer {
 public:
  explicit Pacer(std::optional<double> rate)
      : interval_(rate ? std::chrono::nanoseconds(static_cast<std::int64_t>(1e9 / *rate)) : std::chrono::nanoseconds(0)) {}
  // Waits for the next slot; false (without waiting it out) once `stopped()` holds.
  template <class Stopped>
  bool wait(const Stopped& stopped) {
    if (interval_.count() == 0) return true;
    std::chrono::steady_clock::time_point slot;
    {
      std::lock_guard lock(mutex_);
      slot = std::max(next_, std::chrono::steady_clock::now());
      next_ = slot + interval_;
    }
    while (std::chrono::steady_clock::now() < slot) {
      if (stopped()) return false;
      std::this_thread::sleep_for(std::min<std::chrono::steady_clock::duration>(slot - std::chrono::steady_clock::now(),
                                                                                std::chrono::milliseconds(50)));
    }
    return true;
  }

 private:
  std::chrono::nanoseconds interval_;
  std::mutex mutex_;
  std::chrono::steady_clock::time_point next_{};
};

}  // namespace

struct JobRunner::Running {
  JobRecord record;                 // as last stored
  std::atomic<bool> stop{false};    // cancelled: take no more targets
  std::atomic<bool> cancelled{false};
  std::atomic<bool> done{false};
  std::thread thread;
};

JobRunner::JobRunner(Engine& engine, JobStore& store, JobOptions options)
    : engine_(engine), store_(store), options_(std::move(options)) {
  if (options_.owner.empty()) options_.owner = "runner-" + random_hex(12);
  options_.parallelism = std::max<std::size_t>(1, options_.parallelism);
  options_.page_size = std::max<std::size_t>(1, options_.page_size);
}

JobRunner::~JobRunner() {
  std::map<std::string, std::shared_ptr<Running>, std::less<>> running;
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
    running = running_;
  }
  wake_.notify_all();
  if (supervisor_.joinable()) supervisor_.join();
  for (auto& [id, r] : running) {
    if (r->thread.joinable()) r->thread.join();
  }
}

void JobRunner::start() {
  // Target lists a crash left during a selection, before their job was stored.
  const std::int64_t bound = engine_.options().clock() - std::chrono::nanoseconds(kSelectionBound).count();
  store_.remove_orphan_targets(job_id_time(std::max<std::int64_t>(bound, 0)));
  take_up_jobs();
  supervisor_ = std::thread([this] { supervise(); });
}

void JobRunner::supervise() {
  std::unique_lock lock(mutex_);
  while (!wake_.wait_for(lock, options_.poll, [&] { return stopping_.load(); })) {
    lock.unlock();
    try {
      take_up_jobs();
    } catch (const std::exception& e) {
      if (options_.on_error) options_.on_error("", e.what());
    }
    lock.lock();
  }
}

void JobRunner::take_up_jobs() {
  std::vector<JobRecord> active = store_.active_jobs();
  std::lock_guard lock(mutex_);
  for (auto it = running_.begin(); it != running_.end();) {  // reap the finished
    if (!it->second->done) {
      ++it;
      continue;
    }
    if (it->second->thread.joinable()) it->second->thread.join();
    it = running_.erase(it);
  }
  const std::int64_t now = engine_.options().clock();
  for (JobRecord& job : active) {
    if (stopping_ || running_.contains(job.id)) continue;
    if (!options_.exclusive_store && !job.owner.empty() && job.owner != options_.owner && job.lease_expires_ns > now) {
      continue;  // another runner holds it
    }
    JobProgress p = progress_of(job.progress);
    ++p.runs;
    JobRecord claimed = job;
    claimed.progress = render_progress(p);
    claimed.owner = options_.owner;
    claimed.lease_expires_ns = now + std::chrono::nanoseconds(options_.lease).count();
    claimed.revision = job.revision + 1;
    if (store_.update_job(claimed, job.revision)) launch(std::move(claimed));
  }
}

// Needs mutex_ held.
void JobRunner::launch(JobRecord job) {
  auto r = std::make_shared<Running>();
  r->record = std::move(job);
  running_[r->record.id] = r;
  r->thread = std::thread([this, r] {
    try {
      run(*r);
    } catch (const std::exception& e) {  // the store failed: a later poll takes the job up again
      if (options_.on_error) options_.on_error(r->record.id, e.what());
    }
    {
      std::lock_guard lock(mutex_);
      r->done = true;
    }
    finished_.notify_all();
  });
}

std::uint64_t JobRunner::select(const JobSpec& spec, std::span<const ThingPattern> scope,
                                const std::function<void(const ShadowKey&)>& each) {
  const query::Filter filter = query::Filter::parse(spec.filter, engine_.options().clock());
  const std::uint64_t max = options_.limits.max_targets;
  std::uint64_t n = 0;
  query::scan(engine_.store(), engine_.options().document.timestamp_keys, {filter, scope, std::nullopt, true},
              {.budget = options_.examine_budget, .budget_always = true, .indexes = options_.indexes}, [&](const query::Subject& s) {
                if (++n > max) {
                  throw Error(ErrorCode::invalid_request,
                              "this job would target more than " + std::to_string(max) +
                                  " shadows, the most one job may; narrow the filter or split the job",
                              ErrorDetails{.field = "filter", .limit = max});
                }
                each(s.key());
                return true;
              });
  return n;
}

DryRun JobRunner::dry_run(const JobSpec& spec, std::span<const ThingPattern> scope) {
  DryRun out;
  out.targets = select(spec, scope, [&](const ShadowKey& key) {
    if (out.sample.size() < kSample) out.sample.push_back(key);
  });
  return out;
}

JobRecord JobRunner::create(JobSpec spec, std::span<const ThingPattern> scope) {
  spec.scope.assign(scope.begin(), scope.end());
  std::lock_guard creating(create_mutex_);
  // Refused before selecting anything when this process can tell; the store counts again,
  // exactly, when the job is stored.
  if (store_.active_jobs().size() >= options_.max_active) throw TooManyJobs(options_.max_active);
  const std::int64_t now = engine_.options().clock();
  const std::string id = new_job_id(now);
  if (spec.client_token.empty()) spec.client_token = "job:" + id;
  JobProgress p;
  p.created_ns = now;
  p.runs = 1;
  try {
    std::vector<ShadowKey> page;
    std::uint64_t pages = 0;
    p.targets = select(spec, scope, [&](const ShadowKey& key) {
      page.push_back(key);
      if (page.size() == options_.page_size) {
        store_.put_targets(id, pages++, page);
        page.clear();
      }
    });
    if (!page.empty()) store_.put_targets(id, pages, page);
  } catch (...) {
    store_.remove_job(id);  // the pages stored so far
    throw;
  }
  if (p.targets == 0) {
    p.status = JobStatus::succeeded;
    p.finished_ns = now;
  }
  JobRecord job{id, render_spec(spec), render_progress(p), !p.finished(), 1, options_.owner,
                now + std::chrono::nanoseconds(options_.lease).count()};
  std::lock_guard lock(mutex_);
  try {
    store_.create_job(job, options_.max_active);
  } catch (const TooManyJobs&) {
    try {
      store_.remove_job(id);  // the target pages
    } catch (const std::exception& e) {  // left for remove_orphan_targets
      if (options_.on_error) options_.on_error(id, std::string("its target pages stay after its refusal: ") + e.what());
    }
    throw;
  }
  if (job.active) launch(job);
  return job;
}

std::optional<JobRecord> JobRunner::get(std::string_view id) { return store_.job(id); }

std::vector<JobRecord> JobRunner::list(std::string_view before, std::size_t limit) { return store_.jobs(before, limit); }

JobRecord JobRunner::cancel(std::string_view id) {
  while (true) {
    std::optional<JobRecord> job = store_.job(id);
    if (!job) throw Error::not_found("no job " + std::string(id));
    JobProgress p = progress_of(job->progress);
    if (p.finished()) return *job;
    p.status = JobStatus::cancelled;
    p.finished_ns = engine_.options().clock();
    p.reason = "cancelled";
    JobRecord next = *job;
    next.progress = render_progress(p);
    next.active = false;
    next.revision = job->revision + 1;
    if (!store_.update_job(next, job->revision)) continue;
    std::unique_lock lock(mutex_);
    const auto it = running_.find(id);
    if (it == running_.end() || it->second->done) {
      lock.unlock();
      store_.remove_targets(id);  // a local runner drops them once it stops
      return next;
    }
    // This process runs it: the answer waits for the targets being written to finish and be
    // counted in the stored job (a crash after the answer loses no count).
    const std::shared_ptr<Running> r = it->second;
    r->cancelled = true;
    r->stop = true;
    if (!finished_.wait_for(lock, kCancelWait, [&] { return r->done.load(); })) return next;
    lock.unlock();
    return store_.job(id).value_or(next);
  }
}

void JobRunner::run(Running& r) {
  JobRecord& rec = r.record;
  const JobSpec spec = spec_of(rec.spec);
  JobProgress p = progress_of(rec.progress);
  Store& shadows = engine_.store();
  const TimestampKeys& keys = engine_.options().document.timestamp_keys;
  const bool shared = shadows.shares_versions();
  const std::size_t page_size = options_.page_size;
  // A resumed job: the targets of the chunk it stopped in (at most kChunkPages pages from `next`)
  // may have been written without their outcome recorded; each is checked before it is written
  // (already_written).
  const std::uint64_t check_until = p.runs > 1 ? std::min(p.targets, p.next + kChunkPages * page_size) : 0;
  // Targets between two progress records: a second's worth when paced, else kChunkPages pages
  // (few records, and few waits for a chunk's slowest write).
  const std::uint64_t chunk = spec.rate ? std::clamp<std::uint64_t>(static_cast<std::uint64_t>(std::ceil(*spec.rate)), 1, page_size)
                                        : kChunkPages * page_size;
  Pacer pacer(spec.rate);
  SectionUpdate desired;
  desired.mode = spec.mode;
  if (spec.desired) {
    desired.state = *spec.desired;
  } else {
    desired.remove = true;
  }
  const auto lease_ns = std::chrono::nanoseconds(options_.lease).count();

  // Records the progress (renewing the lease); false when the job is no longer this runner's.
  auto save = [&]() -> bool {
    while (true) {
      JobRecord next = rec;
      next.progress = render_progress(p);
      next.active = !p.finished();
      next.revision = rec.revision + 1;
      next.lease_expires_ns = engine_.options().clock() + lease_ns;
      if (store_.update_job(next, rec.revision)) {
        rec = std::move(next);
        return true;
      }
      std::optional<JobRecord> stored = store_.job(rec.id);
      if (!stored) return false;
      const JobProgress theirs = progress_of(stored->progress);
      if (theirs.status == JobStatus::cancelled) {  // cancel() ended it: its status, our counts
        p.status = JobStatus::cancelled;
        p.finished_ns = theirs.finished_ns;
        p.reason = theirs.reason;
        r.stop = true;
      } else if (!options_.exclusive_store && stored->owner != options_.owner) {
        return false;  // the lease was lost and the job taken over
      }
      rec = std::move(*stored);
    }
  };

  // One target at its turn: judged by `filter` on `read` (else on a read of its own) and
  // written conditionally on the version judged; re-read and re-judged after a conflict.
  auto judge_and_write = [&](const query::Filter& filter, const ShadowKey& key, std::optional<ShadowRecord> read,
                             bool check, std::optional<Error>& error) {
    try {
      for (int attempt = 1;; ++attempt) {
        const ShadowRecord record = read ? std::move(*read) : shadows.read(key);
        read.reset();
        if (check && already_written(shadows, key, record, spec.client_token, p.created_ns)) return Outcome::succeeded;
        if (!record.exists() || !filter.matches(query::Subject(key, record, keys))) return Outcome::skipped;
        ShadowUpdate update;
        update.key = key;
        update.desired = desired;
        update.version = shadow_version(record, shared);  // conditional on what was judged
        update.client_token = spec.client_token;
        update.base = &record;
        try {
          engine_.update(update);
          return Outcome::succeeded;
        } catch (const Error& e) {
          if (e.code() != ErrorCode::version_conflict) throw;
          if (attempt == kMaxJudgements) {
            throw Error::version_conflict(e.details().current_version.value_or(0),
                                          "the shadow changed at each of " + std::to_string(kMaxJudgements) +
                                              " attempts to judge and write it");
          }
        }
      }
    } catch (const Error& e) {
      error = e;
    } catch (const std::exception& e) {
      error = Error(ErrorCode::internal, e.what());
    }
    return Outcome::failed;
  };

  std::vector<ShadowKey> page, keys_of_chunk;  // the last page read; the chunk's targets
  std::uint64_t loaded = UINT64_MAX;
  bool aborted = false, lost = false;
  while (p.next < p.targets && !r.stop && !stopping_ && !p.finished()) {
    const std::uint64_t begin = p.next;
    const std::uint64_t end = std::min(p.targets, begin + chunk);
    keys_of_chunk.clear();
    for (std::uint64_t i = begin; i < end && !lost;) {
      const std::uint64_t page_no = i / page_size;
      if (page_no != loaded) {
        page = store_.targets(rec.id, page_no);
        loaded = page_no;
      }
      const std::uint64_t from = i - page_no * page_size, to = std::min<std::uint64_t>(page.size(), end - page_no * page_size);
      if (from >= to) {
        lost = true;
        break;
      }
      keys_of_chunk.insert(keys_of_chunk.end(), page.begin() + from, page.begin() + to);
      i += to - from;
    }
    if (lost) break;
    std::vector<Outcome> outcomes(end - begin, Outcome::pending);
    std::vector<std::optional<Error>> errors(end - begin);
    std::atomic<std::uint64_t> taken{begin};
    std::atomic<std::uint64_t> failures{p.failed};
    std::atomic<bool> abort{false};
    // A worker takes a block of targets and reads them with one store read; a paced job reads
    // each target at its turn (block of 1), so that it is judged as it is then.
    const std::uint64_t block = spec.rate ? 1 : kReadBlock;
    // On a shared store the chunk also ends a third of the lease after it began, so that the
    // progress record renews the lease long before it ends. Blocks are taken in order and each
    // is finished, so the targets done stay one run from `begin`.
    const auto renew_by = std::chrono::steady_clock::now() + options_.lease / 3;
    // A cancel in another process (shadowd sharing the store) is seen by reading the job again,
    // by one worker about every second: the job stops within about a second, not at the chunk's
    // end. Then it ends as cancelled, as a local cancel ends it. An exclusive store is not read.
    using Ticks = std::chrono::steady_clock::duration;
    std::atomic<Ticks::rep> next_look{0};
    auto cancelled_elsewhere = [&] {
      if (options_.exclusive_store) return false;
      const Ticks::rep now = std::chrono::steady_clock::now().time_since_epoch().count();
      Ticks::rep due = next_look.load();
      const Ticks::rep then = now + std::chrono::duration_cast<Ticks>(std::chrono::seconds(1)).count();
      if (now < due || !next_look.compare_exchange_strong(due, then)) return false;
      if (due == 0) return false;  // the chunk's start: the job was just read or saved
      try {
        const std::optional<JobRecord> stored = store_.job(rec.id);
        if (stored && progress_of(stored->progress).status == JobStatus::cancelled) {
          r.cancelled = true;
          r.stop = true;
        }
      } catch (const std::exception&) {  // the store failing: the next save tells
      }
      return r.stop.load();
    };
    auto time_left = [&] { return options_.exclusive_store || std::chrono::steady_clock::now() < renew_by; };
    auto work = [&] {
      std::vector<ShadowKey> keys_read;
      for (std::uint64_t first;
           !r.stop && !stopping_ && !abort && time_left() && !cancelled_elsewhere() &&
           (first = taken.fetch_add(block)) < end;) {
        const std::uint64_t last = std::min(end, first + block);
        // A target whose slot comes after the job was cancelled or aborted stays pending.
        if (!pacer.wait([&] { return r.stop || stopping_ || abort; }) || abort) return;
        keys_read.assign(keys_of_chunk.begin() + (first - begin), keys_of_chunk.begin() + (last - begin));
        // time:now is the moment the block is read (the filter parsed: it was at the job's start).
        const query::Filter filter = query::Filter::parse(spec.filter, engine_.options().clock());
        std::vector<ShadowRecord> records;
        try {
          records = shadows.read(keys_read);
        } catch (const std::exception&) {  // each target is read again on its own, and fails alone
        }
        for (std::uint64_t i = first; i < last; ++i) {
          if (i > first && (r.stop || stopping_ || abort)) return;  // the rest stay pending
          const ShadowKey& key = keys_read[i - first];
          std::optional<ShadowRecord> read;
          if (!records.empty()) read = std::move(records[i - first]);
          outcomes[i - begin] = judge_and_write(filter, key, read, i < check_until, errors[i - begin]);
          if (outcomes[i - begin] == Outcome::failed && spec.abort_after_failures &&
              ++failures >= *spec.abort_after_failures) {
            abort = true;
          }
        }
      }
    };
    {
      std::vector<std::jthread> helpers;
      const std::size_t n = std::min<std::uint64_t>(options_.parallelism, end - begin);
      for (std::size_t t = 1; t < n; ++t) helpers.emplace_back(work);
      work();
    }
    // Count the outcomes. `next` moves past the run of targets done from `begin`. A job that
    // ends here (cancelled, or past its failures) counts every target done; one that stops to
    // resume (shadowd stopping) leaves those after a target left pending to be checked, and
    // counted, when it resumes (check_until): a target is never judged twice in one run.
    const bool ends = r.cancelled || abort;
    bool run = true;
    for (std::uint64_t i = begin; i < end; ++i) {
      run = run && outcomes[i - begin] != Outcome::pending;
      if (run) {
        ++p.next;
      } else if (!ends) {
        break;
      }
      switch (outcomes[i - begin]) {
        case Outcome::succeeded: ++p.succeeded; break;
        case Outcome::skipped: ++p.skipped; break;
        case Outcome::failed:
          ++p.failed;
          if (p.errors.size() < kMaxJobErrors) p.errors.push_back(render_target_error(keys_of_chunk[i - begin], *errors[i - begin]));
          break;
        case Outcome::pending: break;
      }
    }
    if (spec.abort_after_failures && p.failed >= *spec.abort_after_failures) aborted = true;
    if (aborted) break;
    if (!save()) return;
  }
  if (p.finished()) {
    // cancelled (recorded by cancel(), merged by save())
  } else if (r.cancelled) {
    p.status = JobStatus::cancelled;
    p.reason = "cancelled";
  } else if (aborted) {
    p.status = JobStatus::failed;
    p.reason = "aborted after " + std::to_string(p.failed) + " failed targets (abortAfterFailures)";
  } else if (lost) {
    p.status = JobStatus::failed;
    p.reason = "the target list of the job is missing from the store";
  } else if (p.next >= p.targets) {
    p.status = p.failed ? JobStatus::failed : JobStatus::succeeded;
    if (p.failed) p.reason = std::to_string(p.failed) + " targets failed";
  } else {
    save();  // stopping: resumed at the next start
    return;
  }
  if (!p.finished_ns) p.finished_ns = engine_.options().clock();
  if (save()) store_.remove_targets(rec.id);
}

}  // namespace deviceshadow::jobs
