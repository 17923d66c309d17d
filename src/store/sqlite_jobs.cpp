// The SQLite store's bulk jobs (JobStore): the jobs table and each job's target pages
// (job_targets, [[thing, name], …] JSON per page), on the same writer and readers as its shadows.
#include "store/sqlite.hpp"
#include "store/target_pages.hpp"

#include "deviceshadow/json.hpp"

namespace deviceshadow {
namespace {

using sqlite::Query;
using Connection = sqlite::Connection;

constexpr const char* kCreateJob =
    "INSERT OR IGNORE INTO jobs(id, spec, progress, active, revision, owner, lease_expires) "
    "VALUES (?1, ?2, ?3, ?4, 1, ?5, ?6)";
constexpr const char* kUpdateJob =
    "UPDATE jobs SET spec = ?2, progress = ?3, active = ?4, revision = ?7 + 1, owner = ?5, lease_expires = ?6 "
    "WHERE id = ?1 AND revision = ?7";
constexpr const char* kJob = "SELECT id, spec, progress, active, revision, owner, lease_expires FROM jobs WHERE id = ?1";
constexpr const char* kJobsNewest =
    "SELECT id, spec, progress, active, revision, owner, lease_expires FROM jobs ORDER BY id DESC LIMIT ?1";
constexpr const char* kJobsBefore =
    "SELECT id, spec, progress, active, revision, owner, lease_expires FROM jobs WHERE id < ?2 ORDER BY id DESC "
    "LIMIT ?1";
constexpr const char* kActiveJobs =
    "SELECT id, spec, progress, active, revision, owner, lease_expires FROM jobs WHERE active = 1 ORDER BY id";
// The active jobs but ?1: a resent creation of an active job is not refused by its own count.
constexpr const char* kCountActiveJobs = "SELECT count(*) FROM jobs WHERE active = 1 AND id <> ?1";
constexpr const char* kRemoveJob = "DELETE FROM jobs WHERE id = ?1";
constexpr const char* kPutTargets = "INSERT OR REPLACE INTO job_targets(job, page, targets) VALUES (?1, ?2, ?3)";
constexpr const char* kTargets = "SELECT targets FROM job_targets WHERE job = ?1 AND page = ?2";
constexpr const char* kRemoveTargets = "DELETE FROM job_targets WHERE job = ?1";
constexpr const char* kRemoveOrphanTargets =
    "DELETE FROM job_targets WHERE job < ?1 AND NOT EXISTS (SELECT 1 FROM jobs WHERE id = job_targets.job)";

JobRecord job_of(const Query& q) {
  return {q.text(0), q.text(1), q.text(2), q.integer(3) != 0, static_cast<std::uint64_t>(q.integer(4)), q.text(5),
          q.integer(6)};
}

std::vector<JobRecord> all(Query& q) {
  std::vector<JobRecord> out;
  while (q.step()) out.push_back(job_of(q));
  return out;
}

Query& bind_job(Query& q, const JobRecord& job) {
  return q.bind(1, job.id).bind(2, job.spec).bind(3, job.progress).bind(4, std::int64_t{job.active}).bind(5, job.owner)
      .bind(6, job.lease_expires_ns);
}

}  // namespace

void SqliteStore::create_job(const JobRecord& job, std::size_t max_active) {
  bool full = false, created = false;
  run_on_writer([&](Connection& c) {
    if (job.active) {
      Query count(c.statement(kCountActiveJobs));
      count.bind(1, job.id);
      full = count.step() && static_cast<std::uint64_t>(count.integer(0)) >= max_active;
      if (full) return;
    }
    Query q(c.statement(kCreateJob));
    bind_job(q, job).run();
    created = sqlite3_changes(c.db()) > 0;
  });
  if (full) throw TooManyJobs(max_active);
  JobRecord stored = job;
  stored.revision = 1;
  if (!created && this->job(job.id) != stored) throw Error::version_conflict(0, "job " + job.id + " exists");
}

bool SqliteStore::update_job(const JobRecord& job, std::uint64_t expected_revision) {
  bool updated = false;
  run_on_writer([&](Connection& c) {
    Query q(c.statement(kUpdateJob));
    bind_job(q, job).bind(7, static_cast<std::int64_t>(expected_revision)).run();
    updated = sqlite3_changes(c.db()) > 0;
  });
  return updated;
}

std::optional<JobRecord> SqliteStore::job(std::string_view id) {
  return with_reader([&](Connection& c) -> std::optional<JobRecord> {
    Query q(c.statement(kJob));
    q.bind(1, id);
    if (!q.step()) return std::nullopt;
    return job_of(q);
  });
}

std::vector<JobRecord> SqliteStore::jobs(std::string_view before, std::size_t limit) {
  return with_reader([&](Connection& c) {
    Query q(c.statement(before.empty() ? kJobsNewest : kJobsBefore));
    q.bind(1, static_cast<std::int64_t>(limit));
    if (!before.empty()) q.bind(2, before);
    return all(q);
  });
}

std::vector<JobRecord> SqliteStore::active_jobs() {
  return with_reader([&](Connection& c) {
    Query q(c.statement(kActiveJobs));
    return all(q);
  });
}

void SqliteStore::remove_job(std::string_view id) {
  run_on_writer([&](Connection& c) {
    Query(c.statement(kRemoveTargets)).bind(1, id).run();
    Query(c.statement(kRemoveJob)).bind(1, id).run();
  });
}

void SqliteStore::put_targets(std::string_view job, std::uint64_t page, std::span<const ShadowKey> targets) {
  const std::string list = encode_target_page(targets);
  run_on_writer([&](Connection& c) {
    Query(c.statement(kPutTargets)).bind(1, job).bind(2, static_cast<std::int64_t>(page)).bind(3, list).run();
  });
}

std::vector<ShadowKey> SqliteStore::targets(std::string_view job, std::uint64_t page) {
  std::string list = with_reader([&](Connection& c) {
    Query q(c.statement(kTargets));
    q.bind(1, job).bind(2, static_cast<std::int64_t>(page));
    return q.step() ? q.text(0) : std::string("[]");
  });
  return decode_target_page(list);
}

void SqliteStore::remove_targets(std::string_view job) {
  run_on_writer([&](Connection& c) { Query(c.statement(kRemoveTargets)).bind(1, job).run(); });
}

void SqliteStore::remove_orphan_targets(std::string_view before) {
  run_on_writer([&](Connection& c) { Query(c.statement(kRemoveOrphanTargets)).bind(1, before).run(); });
}

}  // namespace deviceshadow
