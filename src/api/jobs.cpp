// Bulk jobs (docs/jobs.md): POST /v1/jobs (start, or a dry run), GET /v1/jobs[/{id}], POST
// /v1/jobs/{id}/cancel. Starting needs a role that may write desired (and delete, for a job
// deleting desired), cancelling one that may write desired; reading, one that may read. A token limited to some things selects
// targets among those only, and sees and cancels only the jobs started within them.
#include "api/api.hpp"
#include "api/handlers.hpp"

#include "deviceshadow/error.hpp"
#include "deviceshadow/json.hpp"
#include "jobs/runner.hpp"
#include "query/cursor.hpp"

#include <algorithm>

namespace deviceshadow::api {
namespace {

// A page of jobs for a token limited to some things is gathered from reads of kJobsPerRead
// jobs, examining kMaxJobsExamined at most per request.
constexpr std::size_t kJobsPerRead = 100, kMaxJobsExamined = 1000;

// Job ids as the runner makes them: 16 hex digits, '-', 8 hex digits.
void check_job_id(const std::string& id) {
  bool valid = id.size() == 25;
  for (std::size_t i = 0; valid && i < id.size(); ++i) {
    const char c = id[i];
    valid = i == 16 ? c == '-' : (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
  }
  if (!valid) throw Error::invalid_request("not a job id: " + id.substr(0, 64), "id");
}

}  // namespace

HttpResponse Api::jobs(Context& ctx) {
  if (!options_.jobs) {
    throw Error::invalid_request("bulk jobs are not available on this store");
  }
  jobs::JobRunner& runner = *options_.jobs;
  const std::vector<std::string>& s = ctx.segments;
  std::span<const ThingPattern> scope = ctx.token ? std::span<const ThingPattern>(ctx.token->patterns) : std::span<const ThingPattern>();
  if (s.size() == 2 && ctx.request.method == "POST") {
    http::allow_only(ctx.query, {});
    authorize(ctx, Action::write_desired, "");
    const jobs::JobSpec spec = jobs::parse_job_request(ctx.request.body, engine_.options().document,
                                                      runner.options().limits, engine_.options().clock());
    if (!spec.desired) authorize(ctx, Action::remove, "");
    if (spec.dry_run) {
      const jobs::DryRun dry = runner.dry_run(spec, scope);
      std::string out = "{\"dryRun\":true,\"targets\":" + std::to_string(dry.targets) + ",\"sample\":[";
      for (std::size_t i = 0; i < dry.sample.size(); ++i) {
        out += i ? ",{\"thing\":" : "{\"thing\":";
        append_json_string(out, dry.sample[i].thing);
        out += ",\"name\":";
        append_json_string(out, dry.sample[i].name);
        out += '}';
      }
      return json_response(200, out + "]}");
    }
    const JobRecord job = runner.create(spec, scope);
    return json_response(202, jobs::render_job(job));
  }
  // A token limited to some things sees (and cancels) only the jobs started within them.
  auto visible = [&](const JobRecord& job) { return jobs::covers(scope, jobs::spec_of(job.spec).scope); };
  if (s.size() == 2) {
    http::allow_only(ctx.query, {"limit", "cursor"});
    authorize(ctx, Action::read, "");
    const std::size_t limit = parse_limit(ctx.query);
    const bool sees_every_job = scope.empty() || std::any_of(scope.begin(), scope.end(), [](const ThingPattern& p) {
                                  return p.prefix && p.text.empty();
                                });
    // A limited token's cursor is sealed (as a query's, bound to the token): the job where its
    // page stopped may be one it cannot see, whose id (and so its time) it must not learn.
    const std::string binding = query::cursor_binding("jobs", "", ctx.token ? ctx.token->sha256_hex : "");
    std::string before;
    if (auto c = ctx.query.find("cursor"); c != ctx.query.end()) {
      before = sees_every_job ? decode_cursor(c->second) : cursor_key().open(c->second, binding).thing;
    }
    std::vector<JobRecord> list;
    std::optional<std::string> resume;  // where the next page starts, when there may be one
    if (sees_every_job) {
      list = runner.list(before, limit + 1);
    } else {  // examines a bounded number of jobs: a page may hold fewer than `limit`, with a cursor
      for (std::size_t examined = 0; list.size() <= limit; examined += kJobsPerRead) {
        if (examined == kMaxJobsExamined) {
          resume = before;
          break;
        }
        std::vector<JobRecord> page = runner.list(before, kJobsPerRead);
        for (JobRecord& job : page) {
          if (list.size() > limit) break;
          before = job.id;
          if (visible(job)) list.push_back(std::move(job));
        }
        if (page.size() < kJobsPerRead) break;
      }
    }
    if (list.size() > limit) {
      list.resize(limit);
      resume = list.back().id;
    }
    std::string out = "{\"jobs\":[";
    for (std::size_t i = 0; i < list.size(); ++i) out += (i ? "," : "") + jobs::render_job(list[i]);
    out += ']';
    if (resume) {
      out += ",\"cursor\":";
      append_json_string(out, sees_every_job ? encode_cursor(*resume) : cursor_key().seal({*resume, ""}, binding));
    }
    return json_response(200, out + "}");
  }
  http::allow_only(ctx.query, {});
  check_job_id(s[2]);
  authorize(ctx, s.size() == 4 ? Action::write_desired : Action::read, "");
  std::optional<JobRecord> job = runner.get(s[2]);
  if (!job || !visible(*job)) throw Error::not_found("no job " + s[2]);
  return json_response(200, jobs::render_job(s.size() == 4 ? runner.cancel(s[2]) : *job));
}

}  // namespace deviceshadow::api
