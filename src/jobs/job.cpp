#include "jobs/job.hpp"

#include "deviceshadow/error.hpp"
#include "deviceshadow/json.hpp"
#include "deviceshadow/render.hpp"
#include "deviceshadow/timestamp.hpp"
#include "deviceshadow/validation.hpp"
#include "query/filter.hpp"

#include <algorithm>
#include <cmath>

namespace deviceshadow::jobs {
namespace {

// A member's number as a double, or invalid_request naming it.
double number(const json::value& v, const char* name) {
  if (v.is_int64()) return static_cast<double>(v.get_int64());
  if (v.is_uint64()) return static_cast<double>(v.get_uint64());
  if (v.is_double()) return v.get_double();
  throw Error::invalid_request(std::string(name) + " must be a number", name);
}

std::string text(const json::value& v, const char* name) {
  if (!v.is_string()) throw Error::invalid_request(std::string(name) + " must be a string", name);
  return std::string(v.get_string());
}

std::string rfc3339(std::int64_t ns) { return format_rfc3339(Timestamp::from_unix_nanos(ns)); }

const json::object& as_object(const json::value& v) {
  if (!v.is_object()) throw Error(ErrorCode::internal, "a stored job is not a JSON object");
  return v.get_object();
}

}  // namespace

JobSpec parse_job_request(std::string_view body, const DocumentOptions& document, const JobLimits& limits,
                          std::int64_t now_ns) {
  if (body.empty()) throw Error::invalid_request("the request body must be a JSON object");
  const json::value parsed = parse_json(body, document.limits.max_depth + 10);
  if (!parsed.is_object()) throw Error::invalid_request("the request body must be a JSON object");
  const json::object& o = parsed.get_object();
  JobSpec spec;
  bool has_filter = false, has_delete = false;
  for (const auto& m : o) {
    const std::string_view k = m.key();
    const json::value& v = m.value();
    if (k == "filter") {
      spec.filter = text(v, "filter");
      has_filter = true;
    } else if (k == "desired") {
      if (!v.is_object()) throw Error::invalid_request("desired must be a JSON object (the state to desire)", "desired");
      spec.desired = v.get_object();
    } else if (k == "delete") {
      if (text(v, "delete") != "desired") throw Error::invalid_request("delete must be \"desired\"", "delete");
      has_delete = true;
    } else if (k == "mode") {
      auto mode = parse_merge_mode(text(v, "mode"));
      if (!mode) throw Error::invalid_request("mode must be server_is_master or client_is_master", "mode");
      spec.mode = *mode;
    } else if (k == "clientToken") {
      spec.client_token = text(v, "clientToken");
      if (spec.client_token.empty()) throw Error::invalid_request("clientToken must not be empty", "clientToken");
      validate_client_token(spec.client_token);
    } else if (k == "dryRun") {
      if (!v.is_bool()) throw Error::invalid_request("dryRun must be true or false", "dryRun");
      spec.dry_run = v.get_bool();
    } else if (k == "ratePerSecond") {
      const double rate = number(v, "ratePerSecond");
      if (!(rate >= limits.min_rate && rate <= limits.max_rate)) {
        throw Error::invalid_request("ratePerSecond must be between " + to_json(json::value(limits.min_rate)) + " and " +
                                         to_json(json::value(limits.max_rate)),
                                     "ratePerSecond");
      }
      spec.rate = rate;
    } else if (k == "abortAfterFailures") {
      if (!v.is_int64() || v.get_int64() < 1 || static_cast<std::uint64_t>(v.get_int64()) > limits.max_targets) {
        throw Error::invalid_request("abortAfterFailures must be an integer between 1 and " + std::to_string(limits.max_targets),
                                     "abortAfterFailures");
      }
      spec.abort_after_failures = static_cast<std::uint64_t>(v.get_int64());
    } else {
      throw Error::invalid_request("unknown member '" + std::string(k) + "'", std::string(k));
    }
  }
  if (!has_filter) throw Error::invalid_request("filter is required: the shadows the job writes", "filter");
  if (spec.filter.empty()) throw Error::invalid_request("filter must not be empty", "filter");
  query::Filter::parse(spec.filter, now_ns);  // invalid_filter with the offset
  if (spec.desired && has_delete) throw Error::invalid_request("give desired or delete, not both", "delete");
  if (!spec.desired && !has_delete) throw Error::invalid_request("desired (a state) or delete: \"desired\" is required", "desired");
  if (spec.desired) {
    if (spec.desired->empty()) throw Error::invalid_request("desired must not be empty", "desired");
    // A state no section may hold would fail at every target: measured as an empty section holds
    // it once merged (its null members delete, and are not held).
    validate_state(*spec.desired, document);  // as a desired write checks
    json::object held;
    merge_section(held, *spec.desired, spec.mode, Section::desired, document.timestamp_keys);
    if (const std::size_t size = to_json(held).size(); size > document.limits.max_state_bytes) {
      throw Error::too_large("desired state", size, document.limits.max_state_bytes);
    }
  }
  return spec;
}

std::string render_spec(const JobSpec& spec) {
  json::object o;
  o["filter"] = spec.filter;
  if (spec.desired) {
    o["desired"] = *spec.desired;
  } else {
    o["delete"] = "desired";
  }
  o["mode"] = to_string(spec.mode);
  o["clientToken"] = spec.client_token;
  if (spec.rate) o["ratePerSecond"] = *spec.rate;
  if (spec.abort_after_failures) o["abortAfterFailures"] = *spec.abort_after_failures;
  if (!spec.scope.empty()) {
    json::array& scope = o["scope"].emplace_array();
    for (const ThingPattern& p : spec.scope) scope.emplace_back(json::object{{"text", p.text}, {"prefix", p.prefix}});
  }
  return to_json(o);
}

bool covers(std::span<const ThingPattern> token, std::span<const ThingPattern> scope) {
  if (token.empty()) return true;
  static const ThingPattern every_thing{"", true};
  if (scope.empty()) scope = {&every_thing, 1};
  return std::all_of(scope.begin(), scope.end(), [&](const ThingPattern& q) {
    return std::any_of(token.begin(), token.end(), [&](const ThingPattern& p) {
      return p.prefix ? q.text.starts_with(p.text) : !q.prefix && q.text == p.text;
    });
  });
}

JobSpec spec_of(std::string_view stored) {
  const json::value v = parse_stored_json(stored);
  const json::object& o = as_object(v);
  JobSpec spec;
  spec.filter = o.at("filter").as_string();
  if (const json::value* d = o.if_contains("desired")) spec.desired = d->as_object();
  spec.mode = parse_merge_mode(o.at("mode").as_string()).value_or(MergeMode::server_is_master);
  spec.client_token = o.at("clientToken").as_string();
  if (const json::value* r = o.if_contains("ratePerSecond")) spec.rate = r->to_number<double>();
  if (const json::value* a = o.if_contains("abortAfterFailures")) spec.abort_after_failures = a->to_number<std::uint64_t>();
  if (const json::value* scope = o.if_contains("scope")) {
    for (const json::value& p : scope->as_array()) {
      if (const json::string* text = p.if_string()) {  // stored as "text*" by an earlier build
        const bool prefix = text->ends_with('*');
        spec.scope.push_back({std::string(text->data(), text->size() - prefix), prefix});
        continue;
      }
      const json::object& pattern = p.as_object();
      spec.scope.push_back({std::string(pattern.at("text").as_string()), pattern.at("prefix").as_bool()});
    }
  }
  return spec;
}

std::string_view to_string(JobStatus status) noexcept {
  switch (status) {
    case JobStatus::running: return "running";
    case JobStatus::succeeded: return "succeeded";
    case JobStatus::failed: return "failed";
    case JobStatus::cancelled: return "cancelled";
  }
  return "running";
}

std::string render_progress(const JobProgress& p) {
  json::object o;
  o["status"] = to_string(p.status);
  o["targets"] = p.targets;
  o["succeeded"] = p.succeeded;
  o["failed"] = p.failed;
  o["skipped"] = p.skipped;
  o["next"] = p.next;
  o["runs"] = p.runs;
  o["created"] = p.created_ns;
  o["finished"] = p.finished_ns;
  o["reason"] = p.reason;
  std::string out = to_json(o);
  out.pop_back();
  out += ",\"errors\":[";
  for (std::size_t i = 0; i < p.errors.size(); ++i) out += (i ? "," : "") + p.errors[i];
  return out + "]}";
}

JobProgress progress_of(std::string_view stored) {
  const json::value v = parse_stored_json(stored);
  const json::object& o = as_object(v);
  JobProgress p;
  const std::string_view status = o.at("status").as_string();
  for (JobStatus s : {JobStatus::running, JobStatus::succeeded, JobStatus::failed, JobStatus::cancelled}) {
    if (status == to_string(s)) p.status = s;
  }
  p.targets = o.at("targets").to_number<std::uint64_t>();
  p.succeeded = o.at("succeeded").to_number<std::uint64_t>();
  p.failed = o.at("failed").to_number<std::uint64_t>();
  p.skipped = o.at("skipped").to_number<std::uint64_t>();
  p.next = o.at("next").to_number<std::uint64_t>();
  p.runs = o.at("runs").to_number<std::uint64_t>();
  p.created_ns = o.at("created").to_number<std::int64_t>();
  p.finished_ns = o.at("finished").to_number<std::int64_t>();
  p.reason = o.at("reason").as_string();
  for (const json::value& e : o.at("errors").as_array()) p.errors.push_back(to_json(e));
  return p;
}

std::string render_job(const JobRecord& job) {
  const JobProgress p = progress_of(job.progress);
  JobSpec spec = spec_of(job.spec);
  spec.scope.clear();  // who may see the job: not part of the request shown
  std::string out = "{\"id\":";
  append_json_string(out, job.id);
  out += ",\"status\":";
  append_json_string(out, to_string(p.status));
  out += ",\"targets\":" + std::to_string(p.targets) + ",\"succeeded\":" + std::to_string(p.succeeded) +
         ",\"failed\":" + std::to_string(p.failed) + ",\"skipped\":" + std::to_string(p.skipped) + ",\"createdAt\":";
  append_json_string(out, rfc3339(p.created_ns));
  if (p.finished()) {
    out += ",\"finishedAt\":";
    append_json_string(out, rfc3339(p.finished_ns));
  }
  if (!p.reason.empty()) {
    out += ",\"reason\":";
    append_json_string(out, p.reason);
  }
  // The request as accepted, after the progress.
  std::string request = render_spec(spec);
  out += ',';
  out.append(request, 1, request.size() - 2);
  out += ",\"errors\":[";
  for (std::size_t i = 0; i < p.errors.size(); ++i) out += (i ? "," : "") + p.errors[i];
  return out + "]}";
}

std::string render_target_error(const ShadowKey& key, const Error& error) {
  std::string out = "{\"thing\":";
  append_json_string(out, key.thing);
  out += ",\"name\":";
  append_json_string(out, key.name);
  out += ',';
  std::string rendered = render_error(error);  // {"error":{…}}
  out.append(rendered, 1, rendered.size() - 2);
  return out + "}";
}

}  // namespace deviceshadow::jobs
