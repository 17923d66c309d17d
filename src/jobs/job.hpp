// A bulk job's request, progress and public view (docs/jobs.md): parsed and validated from the
// API's JSON, stored as JSON in a JobRecord (job_store.hpp), rendered for GET /v1/jobs. Pure:
// no store, no clock.
#pragma once

#include "deviceshadow/document.hpp"
#include "deviceshadow/engine.hpp"
#include "deviceshadow/error.hpp"
#include "deviceshadow/job_store.hpp"

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace deviceshadow::jobs {

// The limits a job request is checked against (documented in docs/jobs.md).
struct JobLimits {
  std::uint64_t max_targets = 1000000;  // shadows one job may target (400 past it, dry run too)
  double max_rate = 100000;             // ratePerSecond at most
  double min_rate = 0.1;                // ratePerSecond at least
};

// What a job does, as asked in POST /v1/jobs.
struct JobSpec {
  std::string filter;                   // the fleet-query filter (docs/queries.md), validated
  std::optional<json::object> desired;  // the state a desired write merges; nullopt: delete desired
  MergeMode mode = MergeMode::server_is_master;
  std::string client_token;             // "" until the id is known: then "job:<id>"
  bool dry_run = false;                 // not stored
  std::optional<double> rate;           // targets per second at most; nullopt: as fast as it goes
  std::optional<std::uint64_t> abort_after_failures;  // stop once this many targets failed
  std::vector<ThingPattern> scope;      // the patterns of the token that started it (empty: as "*")
};

// Whether a token limited to `token` things (empty: every thing) covers every thing a job of
// `scope` may target: then it may see and cancel the job. An empty scope counts as "*": only an
// unlimited token, or one with the pattern "*", covers it.
bool covers(std::span<const ThingPattern> token, std::span<const ThingPattern> scope);

// Parses and validates a request body: unknown members, types, ranges, the filter (parsed with
// time:now at now_ns) and the desired state (validate_state, as a desired write does). Throws
// Error (invalid_request naming the member, invalid_filter, invalid_json, too_deep, …).
JobSpec parse_job_request(std::string_view body, const DocumentOptions& document, const JobLimits& limits,
                          std::int64_t now_ns);
// The spec as stored in JobRecord::spec and back (without dry_run).
std::string render_spec(const JobSpec& spec);
JobSpec spec_of(std::string_view stored);

enum class JobStatus { running, succeeded, failed, cancelled };
std::string_view to_string(JobStatus status) noexcept;

inline constexpr std::size_t kMaxJobErrors = 100;

struct JobProgress {
  JobStatus status = JobStatus::running;
  std::uint64_t targets = 0;
  std::uint64_t succeeded = 0, failed = 0, skipped = 0;
  // Targets [0, next) have their outcome counted; the runner takes `next` when it resumes.
  std::uint64_t next = 0;
  std::uint64_t runs = 0;  // how many times a runner took the job up (1: never resumed)
  std::int64_t created_ns = 0;
  std::int64_t finished_ns = 0;  // 0 while running
  std::string reason;            // why it failed or was cancelled, when it ended early
  std::vector<std::string> errors;  // the first kMaxJobErrors: {"thing","name","error":{…}} each

  bool finished() const noexcept { return status != JobStatus::running; }
};
std::string render_progress(const JobProgress& progress);
JobProgress progress_of(std::string_view stored);

// The public view of a job (GET /v1/jobs/{id}, and each of a listing), with its first errors.
std::string render_job(const JobRecord& job);
// One failed target as JobProgress::errors keeps it.
std::string render_target_error(const ShadowKey& key, const Error& error);

}  // namespace deviceshadow::jobs
