// History and time travel endpoints of API v1: the history journal, as-of reads of a shadow,
// the bounds of its history and the net change between two moments (docs/api.md, "History"
// and "Time travel").
#include "api/handlers.hpp"

#include "deviceshadow/error.hpp"
#include "deviceshadow/render.hpp"
#include "deviceshadow/time_travel.hpp"
#include "deviceshadow/timestamp.hpp"
#include "deviceshadow/validation.hpp"

namespace deviceshadow::api {
namespace {

using http::allow_only;
using http::parse_uint;

void append_time(std::string& out, const char* name, std::int64_t ns) {
  out += '"';
  out += name;
  out += "\":";
  append_json_string(out, format_rfc3339(Timestamp::from_unix_nanos(ns)));
}

// {"id","timestamp"[,"reportedVersion","desiredVersion"]}
void append_mark(std::string& out, const EventMark& m, bool with_versions) {
  out += "{\"id\":";
  append_json_string(out, m.id);
  out += ',';
  append_time(out, "timestamp", m.timestamp_ns);
  if (with_versions) {
    out += ",\"reportedVersion\":" + std::to_string(m.reported_version);
    out += ",\"desiredVersion\":" + std::to_string(m.desired_version);
  }
  out += '}';
}

// GET …/history?format=series&path=…: {"series":[{"timestamp","version","value"?,"ts"?}],"cursor"?}
HttpResponse series_response(Engine& engine, std::map<std::string, std::string>& query, const ShadowKey& key,
                             std::optional<std::int64_t> since, std::optional<std::int64_t> until) {
  SeriesRequest q;
  auto path = query.find("path");
  if (path == query.end()) throw Error::invalid_request("a series needs path, a JSON Pointer into the state", "path");
  q.path = path->second;
  if (auto it = query.find("section"); it != query.end()) {
    if (it->second != "reported" && it->second != "desired") throw Error::invalid_request("section must be reported or desired", "section");
    q.section = it->second == "reported" ? Section::reported : Section::desired;
  }
  q.since_ns = since;
  q.until_ns = until;
  q.limit = parse_limit(query);
  q.cursor = query["cursor"];
  const Series series = shadow_series(engine, key, q);
  std::string out = "{\"series\":[";
  for (std::size_t i = 0; i < series.points.size(); ++i) {
    const SeriesPoint& p = series.points[i];
    out += i ? ",{" : "{";
    append_time(out, "timestamp", p.timestamp_ns);
    out += ",\"version\":" + std::to_string(p.version);
    if (p.value) {
      out += ",\"value\":";
      append_json(out, *p.value);
    }
    if (p.ts) {
      out += ",\"ts\":";
      append_json_string(out, format_rfc3339(*p.ts));
    }
    out += '}';
  }
  out += ']';
  if (!series.cursor.empty()) {
    out += ",\"cursor\":";
    append_json_string(out, series.cursor);
  }
  out += '}';
  return json_response(200, std::move(out));
}

}  // namespace

HttpResponse Api::history(Context& ctx) {
  const auto format = ctx.query.find("format");
  if (format != ctx.query.end() && format->second != "events" && format->second != "series") {
    throw Error::invalid_request("format must be events or series", "format");
  }
  const bool series = format != ctx.query.end() && format->second == "series";
  if (series) {
    allow_only(ctx.query, {"format", "path", "section", "limit", "cursor", "since", "until"});
  } else {
    allow_only(ctx.query, {"format", "limit", "cursor", "order", "since", "until"});
  }
  ShadowKey key{ctx.segments[2], ctx.segments[4]};
  validate_thing(key.thing);
  authorize(ctx, Action::history, key.thing);
  std::optional<std::int64_t> since, until;
  if (auto it = ctx.query.find("since"); it != ctx.query.end()) since = parse_time(it->second, "since");
  if (auto it = ctx.query.find("until"); it != ctx.query.end()) until = parse_time(it->second, "until");
  if (series) return series_response(engine_, ctx.query, key, since, until);
  HistoryRequest q;
  q.limit = parse_limit(ctx.query);
  q.cursor = ctx.query["cursor"];
  if (auto it = ctx.query.find("order"); it != ctx.query.end()) {
    if (it->second != "asc" && it->second != "desc") throw Error::invalid_request("order must be asc or desc", "order");
    q.descending = it->second == "desc";
  }
  q.since_ns = since;
  q.until_ns = until;
  return json_response(200, render_history_page(engine_.history(key, q)));
}

// GET …/shadows/{name} with one of asOf, asOfEvent, reportedVersion, desiredVersion: the
// ordinary GET body as of then, plus "asOf" (the time of the last event applied) and "event".
HttpResponse Api::get_shadow_as_of(Context& ctx) {
  allow_only(ctx.query, {"metadata", "asOf", "asOfEvent", "reportedVersion", "desiredVersion"});
  bool metadata = false;
  if (auto it = ctx.query.find("metadata"); it != ctx.query.end()) metadata = parse_flag(it->second, "metadata");
  Moment moment;
  int given = 0;
  for (const auto& [name, value] : ctx.query) {
    if (name == "metadata") continue;
    ++given;
    if (name == "asOf") {
      moment.kind = Moment::Kind::time;
      moment.time_ns = parse_time(value, "asOf");
    } else if (name == "asOfEvent") {
      moment.kind = Moment::Kind::event;
      moment.event_id = value;
    } else {
      moment.kind = name == "reportedVersion" ? Moment::Kind::reported_version : Moment::Kind::desired_version;
      moment.version = parse_uint(value, name);
    }
  }
  if (given > 1) throw Error::invalid_request("give one of asOf, asOfEvent, reportedVersion, desiredVersion");
  ShadowKey key{ctx.segments[2], ctx.segments[4]};
  validate_thing(key.thing);
  authorize(ctx, Action::read, key.thing);
  authorize(ctx, Action::history, key.thing);
  const PastShadow past = shadow_as_of(engine_, key, moment, metadata);
  std::string out = render_shadow(past.view, metadata ? &engine_.options().document.timestamp_keys : nullptr);
  out.pop_back();
  out += ',';
  append_time(out, "asOf", past.event.timestamp_ns);
  out += ",\"event\":";
  append_json_string(out, past.event.id);
  out += '}';
  return json_response(200, std::move(out));
}

HttpResponse Api::history_bounds(Context& ctx) {
  allow_only(ctx.query, {});
  ShadowKey key{ctx.segments[2], ctx.segments[4]};
  validate_thing(key.thing);
  authorize(ctx, Action::history, key.thing);
  const HistoryBounds b = deviceshadow::history_bounds(engine_, key);
  std::string out = "{\"oldest\":";
  append_mark(out, b.oldest, true);
  out += ",\"newest\":";
  append_mark(out, b.newest, true);
  out += b.complete ? ",\"complete\":true}" : ",\"complete\":false}";
  return json_response(200, std::move(out));
}

HttpResponse Api::diff(Context& ctx) {
  allow_only(ctx.query, {"from", "to"});
  ShadowKey key{ctx.segments[2], ctx.segments[4]};
  validate_thing(key.thing);
  authorize(ctx, Action::history, key.thing);
  auto from = ctx.query.find("from");
  if (from == ctx.query.end()) throw Error::invalid_request("from is required: a time or an event id", "from");
  std::optional<Moment> to;
  if (auto it = ctx.query.find("to"); it != ctx.query.end()) to = parse_moment(it->second, "to");
  const ShadowDiff d = shadow_diff(engine_, key, parse_moment(from->second, "from"), to);
  std::string out = "{\"from\":";
  append_mark(out, d.from, false);
  out += ",\"to\":";
  append_mark(out, d.to, false);
  out += ",\"changes\":[";
  for (std::size_t i = 0; i < d.changes.size(); ++i) {
    if (i) out += ',';
    append_json(out, d.changes[i]);
  }
  out += "]}";
  return json_response(200, std::move(out));
}

}  // namespace deviceshadow::api
