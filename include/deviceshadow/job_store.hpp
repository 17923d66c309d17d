// The bulk-job storage interface (docs/jobs.md): each job's record and its target list, kept
// in pages, beside the shadows so that a job survives a crash or restart and resumes. The memory,
// SQLite and DynamoDB backends implement it in the same object as their Store
// (StoreBackend::job_store, in *_jobs.cpp); a backend without it returns nullptr there.
//
// Every JobStore is safe for concurrent use from many threads without external locking.
#pragma once

#include "deviceshadow/error.hpp"
#include "deviceshadow/store.hpp"

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace deviceshadow {

// A job as stored. The store keeps `spec` and `progress` whole and knows nothing of their
// content, which the job runner (src/jobs) writes and reads.
struct JobRecord {
  std::string id;                     // sorts by creation time
  std::string spec;                   // JSON: the job as accepted
  std::string progress;               // JSON: status, counters, errors, the next target to take
  bool active = false;                // not finished yet (running, or cancel asked)
  std::uint64_t revision = 0;         // 1 when created, +1 at every update
  std::string owner;                  // the runner holding the job's lease ("": none)
  std::int64_t lease_expires_ns = 0;  // the lease ends then unless renewed

  friend bool operator==(const JobRecord&, const JobRecord&) = default;
};

// The refusal of an active job past the jobs running at once (--max-jobs): 429. Its own type,
// so that it is told apart from a store that is throttled.
class TooManyJobs : public Error {
 public:
  explicit TooManyJobs(std::size_t max_active)
      : Error(ErrorCode::throttled,
              "at most " + std::to_string(max_active) + " jobs run at once; wait for one to finish or cancel one") {}
};

class JobStore {
 public:
  virtual ~JobStore() = default;

  // Stores a new job (revision 1). Throws Error::version_conflict(0) if another job has its id
  // (one stored exactly as `job` is, at revision 1, is taken for this one: a resent request), and
  // TooManyJobs when the job is active and `max_active` jobs are active already: counted
  // with the creation, atomically, among every process on the store.
  virtual void create_job(const JobRecord& job, std::size_t max_active) = 0;
  // Replaces the job with `job` (whose revision must be expected_revision + 1) if the stored
  // one is at expected_revision; returns false, storing nothing, otherwise or if none exists.
  virtual bool update_job(const JobRecord& job, std::uint64_t expected_revision) = 0;
  virtual std::optional<JobRecord> job(std::string_view id) = 0;
  // Jobs newest first (ids descending), ids < before ("": from the newest), at most limit.
  virtual std::vector<JobRecord> jobs(std::string_view before, std::size_t limit) = 0;
  // Every job with active set, in id order.
  virtual std::vector<JobRecord> active_jobs() = 0;
  // Drops the job and its targets (a job that could not start); nothing if it does not exist.
  virtual void remove_job(std::string_view id) = 0;

  // The target list, written once at the job's start in pages numbered from 0, each stored
  // durably before put_targets returns; read back one page at a time (empty past the last).
  virtual void put_targets(std::string_view job, std::uint64_t page, std::span<const ShadowKey> targets) = 0;
  virtual std::vector<ShadowKey> targets(std::string_view job, std::uint64_t page) = 0;
  // Drops the job's target list (once the job has finished).
  virtual void remove_targets(std::string_view job) = 0;
  // Drops the target lists of job ids below `before` that have no job: what a crash left while
  // a job's targets were being selected, before the job was stored. DynamoDB keeps them (finding
  // them would read the whole table).
  virtual void remove_orphan_targets(std::string_view before) = 0;
};

}  // namespace deviceshadow
