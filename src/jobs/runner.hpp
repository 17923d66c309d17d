// The bulk-job runner (docs/jobs.md): selects a job's targets with the fleet-query code, stores
// them in pages, and writes each target as an ordinary desired write through the Engine, paced,
// recording progress in the JobStore so that a job resumes after a crash or restart with no
// target written twice and none forgotten.
//
// A JobRunner is safe for concurrent use from many threads. Depends on the engine, query and
// the JobStore; nothing below it knows of it.
#pragma once

#include "deviceshadow/engine.hpp"
#include "deviceshadow/job_store.hpp"
#include "jobs/job.hpp"
#include "query/search.hpp"

#include <atomic>
#include <chrono>
#include <functional>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <vector>

namespace deviceshadow::jobs {

struct JobOptions {
  JobLimits limits;
  std::size_t max_active = 4;     // jobs running at once; another is refused with 429
  // Targets of one job written at once: as many as 8 clients of /v1/batch/update keep in flight
  // (8 operations each), so that group commit fills its transactions alike.
  std::size_t parallelism = 64;
  std::size_t page_size = 1000;   // targets per stored page (and at most per progress record)
  std::size_t examine_budget = 5000000;  // shadows the selection may examine
  query::IndexKeeper* indexes = nullptr;  // the declared indexes the selection reads once ready; null: none
  // A runner's hold on a job, renewed at each progress record (on a shared store at least every
  // third of it); another runner takes the job over once it has not been renewed for this long.
  std::chrono::milliseconds lease{30000};
  std::chrono::milliseconds poll{1000};    // how often the runner looks for jobs to take up
  // One process uses the store (memory, SQLite): active jobs are taken up at start without
  // waiting for the previous runner's lease to end, and no other process cancels them.
  bool exclusive_store = true;
  std::string owner;  // this runner's name in leases; random when empty
  // Called when a job fails to run for a reason not its targets' (the store failing), or with
  // `job` empty when the jobs to take up could not be read or claimed; must not throw.
  std::function<void(const std::string& job, const std::string& error)> on_error;
};

struct DryRun {
  std::uint64_t targets = 0;
  std::vector<ShadowKey> sample;  // the first 100
};

class JobRunner {
 public:
  JobRunner(Engine& engine, JobStore& store, JobOptions options = {});
  // Stops: every job stops before its next target with its progress recorded, to be resumed.
  ~JobRunner();
  JobRunner(const JobRunner&) = delete;
  JobRunner& operator=(const JobRunner&) = delete;

  // Takes up the store's active jobs (resuming them) and keeps looking for more every poll.
  void start();

  const JobOptions& options() const noexcept { return options_; }

  // The targets `spec` would have now, within `scope` (a token's patterns; empty: every thing).
  // Throws invalid_request (limit) past max_targets.
  DryRun dry_run(const JobSpec& spec, std::span<const ThingPattern> scope);
  // Selects and stores the targets, stores the job and starts it; returns it as stored. Throws
  // throttled when max_active jobs are running, invalid_request past max_targets.
  JobRecord create(JobSpec spec, std::span<const ThingPattern> scope);
  std::optional<JobRecord> get(std::string_view id);
  std::vector<JobRecord> list(std::string_view before, std::size_t limit);
  // Ends a running job as cancelled (its targets not yet written are not written); a finished
  // job is returned as it is. A job this runner runs is returned once it has stopped, with the
  // targets written meanwhile counted (waiting at most a few seconds). Throws not_found.
  JobRecord cancel(std::string_view id);

 private:
  struct Running;
  void supervise();
  void take_up_jobs();
  void launch(JobRecord job);
  void run(Running& running);
  // Calls `each` with each target of `spec` in (thing, name) order; returns how many.
  std::uint64_t select(const JobSpec& spec, std::span<const ThingPattern> scope,
                       const std::function<void(const ShadowKey&)>& each);

  Engine& engine_;
  JobStore& store_;
  JobOptions options_;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::condition_variable finished_;  // a running job's thread ended (Running::done)
  std::atomic<bool> stopping_{false};
  std::map<std::string, std::shared_ptr<Running>, std::less<>> running_;  // by job id
  std::mutex create_mutex_;  // one creation at a time, so that max_active holds
  std::thread supervisor_;
};

}  // namespace deviceshadow::jobs
