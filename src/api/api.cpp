#include "api/api.hpp"
#include "api/handlers.hpp"

#include "deviceshadow/error.hpp"
#include "deviceshadow/render.hpp"
#include "deviceshadow/timestamp.hpp"
#include "deviceshadow/uri.hpp"
#include "deviceshadow/validation.hpp"
#include "notify/dispatcher.hpp"
#include "api/openapi.hpp"

#include <charconv>
#include <chrono>
#include <map>

namespace deviceshadow::api {

using http::allow_only;
using http::parse_uint;
using http::RequestTarget;
using http::split_target;

// Every route, in the order route() tries them. Adding one here and in route() is not enough:
// tests/api/openapi_test.cpp fails until docs/openapi.yaml documents it too.
constexpr Route kRoutes[] = {
    {"/healthz", "GET"},
    {"/readyz", "GET"},
    {"/metrics", "GET"},
    {"/v1/openapi.json", "GET"},
    {"/v1/things", "GET"},
    {"/v1/things/{thing}/shadows", "GET"},
    {"/v1/things/{thing}/shadows/{name}", "GET, DELETE"},
    {"/v1/things/{thing}/shadows/{name}/{section}", "POST, DELETE"},
    {"/v1/things/{thing}/shadows/{name}/history", "GET"},
    {"/v1/things/{thing}/shadows/{name}/history/bounds", "GET"},
    {"/v1/things/{thing}/shadows/{name}/diff", "GET"},
    {"/v1/things/{thing}/shadows/{name}/events", "GET"},
    {"/v1/events", "GET"},
    {"/v1/registrations", "GET"},
    {"/v1/registrations/{id}", "GET, PUT, DELETE"},
    {"/v1/registrations/{id}/dead-letters", "GET, DELETE"},
    {"/v1/registrations/{id}/dead-letters/redrive", "POST"},
    {"/v1/registrations/{id}/dead-letters/{eventId}", "DELETE"},
    {"/v1/batch/get", "POST"},
    {"/v1/batch/update", "POST"},
    {"/v1/shadows", "GET"},
    {"/v1/shadows/search", "POST"},
    {"/v1/shadows/count", "GET"},
    {"/v1/shadows/aggregate", "POST"},
    {"/v1/index", "GET, PUT"},
    {"/v1/jobs", "GET, POST"},
    {"/v1/jobs/{id}", "GET"},
    {"/v1/jobs/{id}/cancel", "POST"},
};

HttpResponse json_response(int status, std::string body) { return {status, "application/json", std::move(body), {}}; }

namespace {

HttpResponse error_response(const Error& e) {
  HttpResponse r = json_response(http_status(e.code()), render_error(e));
  if (e.code() == ErrorCode::unauthorized) r.headers.emplace_back("WWW-Authenticate", "Bearer");
  return r;
}

json::object parse_body_object(const std::string& body, const Limits& limits, std::size_t envelope_depth) {
  if (body.empty()) throw Error::invalid_request("the request body must be a JSON object");
  json::value v = parse_request_json(body, limits.max_depth, envelope_depth);
  if (!v.is_object()) throw Error::invalid_request("the request body must be a JSON object");
  return std::move(v.get_object());
}

std::string string_member(const json::object& o, std::string_view key, bool required) {
  const json::value* v = o.if_contains(key);
  if (!v) {
    if (required) throw Error::invalid_request(std::string(key) + " is required", std::string(key));
    return {};
  }
  if (!v->is_string()) throw Error::invalid_request(std::string(key) + " must be a string", std::string(key));
  return std::string(v->get_string());
}

// Reads the update request fields (state, version, clientToken, tz, mode, acknowledge) from `o`
// into `r`; `extra` names envelope members (batch operations) that are allowed besides them.
void read_update_fields(const json::object& o, UpdateRequest& r, std::initializer_list<std::string_view> extra) {
  for (const auto& m : o) {
    std::string_view k(m.key().data(), m.key().size());
    static constexpr std::string_view known[] = {"state", "version", "clientToken", "tz", "mode", "acknowledge"};
    if (std::find(std::begin(known), std::end(known), k) == std::end(known) &&
        std::find(extra.begin(), extra.end(), k) == extra.end()) {
      throw Error::invalid_request("unknown member '" + std::string(k) + "'", std::string(k));
    }
  }
  const json::value* state = o.if_contains("state");
  if (!state) throw Error::invalid_request("state is required", "state");
  if (!state->is_object()) throw Error::invalid_request("state must be a JSON object", "state");
  r.state = state->get_object();
  if (const json::value* v = o.if_contains("version")) {
    if (v->is_int64() && v->get_int64() >= 0) {
      r.version = static_cast<std::uint64_t>(v->get_int64());
    } else if (v->is_uint64()) {
      r.version = v->get_uint64();
    } else {
      throw Error::invalid_request("version must be a non-negative integer", "version");
    }
  }
  r.client_token = string_member(o, "clientToken", false);
  if (o.contains("tz")) r.tz = string_member(o, "tz", false);
  if (o.contains("mode")) {
    auto mode = parse_merge_mode(string_member(o, "mode", false));
    if (!mode) throw Error::invalid_request("mode must be server_is_master or client_is_master", "mode");
    r.mode = *mode;
  }
  if (const json::value* v = o.if_contains("acknowledge")) {
    if (!v->is_bool()) throw Error::invalid_request("acknowledge must be true or false", "acknowledge");
    r.acknowledge = v->get_bool();
  }
}

void append_item_error(std::string& out, const std::string& thing, const std::string& name, const Error& e) {
  out += "{\"thing\":";
  append_json_string(out, thing);
  out += ",\"name\":";
  append_json_string(out, name);
  out += ",\"error\":";
  std::string rendered = render_error(e);  // {"error":{…}}
  out.append(rendered, 9, rendered.size() - 10);
  out += '}';
}

}  // namespace

std::size_t parse_limit(const std::map<std::string, std::string>& query) {
  auto it = query.find("limit");
  if (it == query.end()) return kDefaultPageLimit;
  return checked_limit(parse_uint(it->second, "limit"));
}

std::size_t checked_limit(std::uint64_t limit) {
  if (limit < 1 || limit > kMaxPageLimit) {
    throw Error::invalid_request("limit must be between 1 and " + std::to_string(kMaxPageLimit), "limit");
  }
  return static_cast<std::size_t>(limit);
}

bool parse_flag(const std::string& text, const char* field) {
  if (text != "true" && text != "false") throw Error::invalid_request(std::string(field) + " must be true or false", field);
  return text == "true";
}

// since/until: RFC 3339 or an epoch number (same magnitude rules as timestamped values).
std::int64_t parse_time(const std::string& text, const char* field) {
  std::optional<Timestamp> t = parse_rfc3339(text);  // 'T' or 't' or ' ' between date and time
  if (!t && !text.empty() && (std::isdigit(static_cast<unsigned char>(text[0])) || text[0] == '-')) {
    try {
      t = parse_timestamp(parse_json(text));
    } catch (const Error&) {
    }
  }
  if (!t) throw Error::invalid_request(std::string(field) + " must be an RFC 3339 time or an epoch number", field);
  return t->unix_nanos();
}

std::span<const Route> Api::routes() noexcept { return kRoutes; }

Api::Api(Engine& engine, const Authenticator* auth, Metrics& metrics, Logger& logger, notify::Dispatcher* dispatcher,
         ApiOptions options)
    : engine_(engine), auth_(auth), metrics_(metrics), logger_(logger), dispatcher_(dispatcher), options_(options) {}

HttpResponse Api::refuse(int status, const std::string& message) const {
  return json_response(status, render_error(Error(http::refusal_code(status), message)));
}

std::optional<HttpResponse> Api::handle_inline(const HttpRequest& request) {
  const std::string_view path = std::string_view(request.target).substr(0, request.target.find('?'));
  if (path == "/healthz" || path == "/v1/openapi.json") return handle(request);
  // /v1/things/{thing}/shadows/{name}: the names are percent-encoded, so hold no '/'.
  constexpr std::string_view kThings = "/v1/things/";
  if (!options_.inline_reads || request.method != "GET" || !path.starts_with(kThings)) return std::nullopt;
  const std::string_view rest = path.substr(kThings.size());
  const std::size_t thing_end = rest.find('/');
  if (thing_end == std::string_view::npos || !rest.substr(thing_end).starts_with("/shadows/") ||
      rest.find('/', thing_end + 9) != std::string_view::npos) {
    return std::nullopt;
  }
  return respond(request, true);
}

HttpResponse Api::handle(const HttpRequest& request) { return *respond(request, false); }

std::optional<HttpResponse> Api::respond(const HttpRequest& request, bool must_not_wait) {
  auto start = std::chrono::steady_clock::now();
  metrics_.request_started();
  Context ctx{request, {}, {}};
  ctx.must_not_wait = must_not_wait;
  HttpResponse response;
  try {
    RequestTarget target = split_target(request.target);
    ctx.segments = std::move(target.segments);
    ctx.query = std::move(target.query);
    // Public: the API's description (how to call it, nothing of its data) and the probes, which
    // load balancers and Kubernetes send without a token (/readyz only says whether the store
    // answers; --private-readyz keeps it behind a token).
    const std::vector<std::string>& s = ctx.segments;
    const bool is_public = (s.size() == 2 && s[0] == "v1" && s[1] == "openapi.json") ||
                           (s.size() == 1 && s[0] == "healthz") ||
                           (s.size() == 1 && s[0] == "readyz" && !options_.private_readyz);
    if (auth_ && !is_public) {
      ctx.token = auth_->authenticate(request.authorization);
      if (!ctx.token) throw Error(ErrorCode::unauthorized, "a valid Authorization: Bearer token is required");
    }
    response = route(ctx);
    // Reads may be shed when too many response bytes wait for slow clients; writes never.
    response.sheddable = request.method == "GET" || ctx.route == "/v1/batch/get";
  } catch (const WouldWait&) {
    metrics_.request_handed_on();
    return std::nullopt;
  } catch (const Error& e) {
    if (ctx.route == "unmatched" && (e.code() == ErrorCode::unauthorized || e.code() == ErrorCode::forbidden)) {
      ctx.route = http::route_label(kRoutes, ctx.segments);  // refused before routing
    }
    response = error_response(e);
    if (e.code() == ErrorCode::method_not_allowed) response.headers.emplace_back("Allow", ctx.allow);
    if (std::uint64_t suppressed = 0; response.status >= 500 && failure_log_.admit(suppressed)) {
      logger_.log(LogLevel::error, "request failed",
                  {{"method", request.method}, {"target", request.target}, {"error", e.what()},
                   {"suppressed", std::to_string(suppressed)}});
    }
  } catch (const std::exception& e) {
    response = error_response(Error(ErrorCode::internal, "internal error"));
    if (std::uint64_t suppressed = 0; failure_log_.admit(suppressed)) {
      logger_.log(LogLevel::error, "unexpected exception",
                  {{"method", request.method}, {"target", request.target}, {"error", e.what()},
                   {"suppressed", std::to_string(suppressed)}});
    }
  }
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  metrics_.request_finished(ctx.route, request.method, response.status, seconds);
  if (logger_.enabled(LogLevel::debug)) {
    logger_.log(LogLevel::debug, "request", {{"method", request.method}, {"target", request.target},
                                             {"status", std::to_string(response.status)}});
  }
  return response;
}

HttpResponse Api::route(Context& ctx) {
  const std::vector<std::string>& s = ctx.segments;
  const std::string& m = ctx.request.method;
  // The request matched `path`, one of kRoutes: a method the route lacks is a 405.
  auto only = [&](std::string_view path) {
    const Route* r = std::find_if(std::begin(kRoutes), std::end(kRoutes), [&](const Route& known) { return known.path == path; });
    if (r == std::end(kRoutes)) throw std::logic_error("route " + std::string(path) + " is missing from kRoutes");
    ctx.route = r->path;
    if (r->allows(m)) return;
    ctx.allow = r->methods;
    throw Error(ErrorCode::method_not_allowed, "method " + m + " is not allowed here; allowed: " + ctx.allow);
  };
  if (s.size() == 1 && (s[0] == "healthz" || s[0] == "readyz")) {
    only(s[0] == "healthz" ? "/healthz" : "/readyz");
    if (s[0] == "readyz") {
      if (auto why = engine_.store().unready()) throw Error(ErrorCode::unavailable, "not ready: " + *why);
    }
    return json_response(200, R"({"status":"ok"})");
  }
  if (s.size() == 2 && s[0] == "v1" && s[1] == "openapi.json") {
    only("/v1/openapi.json");
    return json_response(200, std::string(openapi_json()));
  }
  if (s.size() == 1 && s[0] == "metrics") {
    only("/metrics");
    if (ctx.token && ctx.token->role != Role::admin) throw Error(ErrorCode::forbidden, "metrics need an admin token");
    std::string text = metrics_.render(engine_.stats());
    return {200, "text/plain; version=0.0.4", std::move(text), {}};
  }
  if (s.size() >= 2 && s[0] == "v1" && s[1] == "things") {
    if (s.size() == 2) {
      only("/v1/things");
      return list_things(ctx);
    }
    if (s.size() >= 4 && s[3] == "shadows") {
      if (s.size() == 4) {
        only("/v1/things/{thing}/shadows");
        return list_shadows(ctx);
      }
      if (s.size() == 5) {
        only("/v1/things/{thing}/shadows/{name}");
        return m == "GET" ? get_shadow(ctx) : remove(ctx, std::nullopt);
      }
      if (s.size() == 6 && (s[5] == "reported" || s[5] == "desired")) {
        only("/v1/things/{thing}/shadows/{name}/{section}");
        Section section = *parse_section(s[5]);
        return m == "POST" ? update(ctx, section) : remove(ctx, section);
      }
      if (s.size() == 6 && s[5] == "history") {
        only("/v1/things/{thing}/shadows/{name}/history");
        return history(ctx);
      }
      if (s.size() == 7 && s[5] == "history" && s[6] == "bounds") {
        only("/v1/things/{thing}/shadows/{name}/history/bounds");
        return history_bounds(ctx);
      }
      if (s.size() == 6 && s[5] == "diff") {
        only("/v1/things/{thing}/shadows/{name}/diff");
        return diff(ctx);
      }
      if (s.size() == 6 && s[5] == "events") {
        only("/v1/things/{thing}/shadows/{name}/events");
        return events(ctx);
      }
    }
  }
  if (s.size() == 2 && s[0] == "v1" && s[1] == "events") {
    only("/v1/events");
    return events(ctx);
  }
  if (s.size() >= 2 && s[0] == "v1" && s[1] == "registrations" && dispatcher_) {
    if (s.size() == 2) {
      only("/v1/registrations");
    } else if (s.size() == 3) {
      only("/v1/registrations/{id}");
    } else if (s.size() == 4 && s[3] == "dead-letters") {
      only("/v1/registrations/{id}/dead-letters");
    } else if (s.size() == 5 && s[3] == "dead-letters" && s[4] == "redrive") {
      only("/v1/registrations/{id}/dead-letters/redrive");
    } else if (s.size() == 5 && s[3] == "dead-letters") {
      only("/v1/registrations/{id}/dead-letters/{eventId}");
    } else {
      throw Error::not_found("no such endpoint: " + m + " " + std::string(ctx.request.target.substr(0, ctx.request.target.find('?'))));
    }
    return registrations(ctx);
  }
  if (s.size() == 3 && s[0] == "v1" && s[1] == "batch" && (s[2] == "get" || s[2] == "update")) {
    only(s[2] == "get" ? "/v1/batch/get" : "/v1/batch/update");
    return s[2] == "get" ? batch_get(ctx) : batch_update(ctx);
  }
  if (s.size() == 2 && s[0] == "v1" && s[1] == "shadows") {
    only("/v1/shadows");
    return search(ctx);
  }
  if (s.size() == 3 && s[0] == "v1" && s[1] == "shadows" && (s[2] == "search" || s[2] == "count")) {
    only(s[2] == "search" ? "/v1/shadows/search" : "/v1/shadows/count");
    return s[2] == "search" ? search(ctx) : count(ctx);
  }
  if (s.size() == 3 && s[0] == "v1" && s[1] == "shadows" && s[2] == "aggregate") {
    only("/v1/shadows/aggregate");
    return aggregate(ctx);
  }
  if (s.size() == 2 && s[0] == "v1" && s[1] == "index") {
    only("/v1/index");
    return index(ctx);
  }
  if (s.size() >= 2 && s[0] == "v1" && s[1] == "jobs" && s.size() <= 4) {
    if (s.size() == 2) {
      only("/v1/jobs");
    } else if (s.size() == 3) {
      only("/v1/jobs/{id}");
    } else if (s[3] == "cancel") {
      only("/v1/jobs/{id}/cancel");
    } else {
      throw Error::not_found("no such endpoint: " + m + " " + std::string(ctx.request.target.substr(0, ctx.request.target.find('?'))));
    }
    return jobs(ctx);
  }
  throw Error::not_found("no such endpoint: " + ctx.request.method + " " + std::string(ctx.request.target.substr(0, ctx.request.target.find('?'))));
}

void Api::authorize(Context& ctx, Action action, std::string_view thing) const {
  if (!ctx.token) return;
  if (!ctx.token->may(action)) throw Error(ErrorCode::forbidden, "this token's role may not do that");
  if (!thing.empty() && !ctx.token->covers(thing)) {
    throw Error(ErrorCode::forbidden, "this token does not cover thing " + std::string(thing));
  }
}

HttpResponse Api::get_shadow(Context& ctx) {
  for (const char* p : {"asOf", "asOfEvent", "reportedVersion", "desiredVersion"}) {
    if (!ctx.query.contains(p)) continue;
    if (ctx.must_not_wait) throw WouldWait{};  // reads history
    return get_shadow_as_of(ctx);
  }
  allow_only(ctx.query, {"metadata"});
  bool metadata = false;
  if (auto it = ctx.query.find("metadata"); it != ctx.query.end()) metadata = parse_flag(it->second, "metadata");
  ShadowKey key{ctx.segments[2], ctx.segments[4]};
  validate_thing(key.thing);
  authorize(ctx, Action::read, key.thing);
  std::optional<ShadowView> view = ctx.must_not_wait ? engine_.try_get(key) : engine_.get(key);
  if (!view) throw WouldWait{};
  return json_response(200, render_shadow(*view, metadata ? &engine_.options().document.timestamp_keys : nullptr));
}

HttpResponse Api::update(Context& ctx, Section section) {
  allow_only(ctx.query, {});
  UpdateRequest r;
  r.key = {ctx.segments[2], ctx.segments[4]};
  r.section = section;
  validate_thing(r.key.thing);
  authorize(ctx, section == Section::reported ? Action::write_reported : Action::write_desired, r.key.thing);
  read_update_fields(parse_body_object(ctx.request.body, engine_.options().document.limits, 2), r, {});
  return json_response(200, render_update_result(engine_.update(r)));
}

HttpResponse Api::remove(Context& ctx, std::optional<Section> section) {
  allow_only(ctx.query, {"version"});
  ShadowKey key{ctx.segments[2], ctx.segments[4]};
  validate_thing(key.thing);
  authorize(ctx, Action::remove, key.thing);
  std::optional<std::uint64_t> version;
  if (auto it = ctx.query.find("version"); it != ctx.query.end()) version = parse_uint(it->second, "version");
  return json_response(200, render_delete_result(engine_.remove(key, section, version)));
}

HttpResponse Api::list_shadows(Context& ctx) {
  allow_only(ctx.query, {"limit", "cursor"});
  const std::string& thing = ctx.segments[2];
  validate_thing(thing);
  authorize(ctx, Action::list, thing);
  return json_response(200, render_shadow_list(thing, engine_.list_shadows(thing, parse_limit(ctx.query), ctx.query["cursor"])));
}

HttpResponse Api::list_things(Context& ctx) {
  allow_only(ctx.query, {"prefix", "limit", "cursor"});
  authorize(ctx, Action::list, "");
  const std::string& prefix = ctx.query["prefix"];
  const std::string& cursor = ctx.query["cursor"];
  const std::size_t limit = parse_limit(ctx.query);
  // A token limited to some things lists only those, reading nothing outside them.
  ThingList list = ctx.token && !ctx.token->patterns.empty()
                       ? engine_.list_things(prefix, limit, cursor, ctx.token->patterns)
                       : engine_.list_things(prefix, limit, cursor);
  return json_response(200, render_thing_list(list));
}

namespace {

// The items of a batch request: the array member `name` of its body, at most max_batch_items long.
const json::array& batch_array(const json::object& body, const char* name, const char* not_an_array,
                               const Limits& limits) {
  const json::value* items = body.if_contains(name);
  if (!items || !items->is_array()) throw Error::invalid_request(not_an_array, name);
  if (items->get_array().size() > limits.max_batch_items) {
    throw Error::invalid_request("a batch holds at most " + std::to_string(limits.max_batch_items) + " items", name);
  }
  return items->get_array();
}

}  // namespace

HttpResponse Api::batch_get(Context& ctx) {
  allow_only(ctx.query, {});
  const Limits& limits = engine_.options().document.limits;
  json::object body = parse_body_object(ctx.request.body, limits, 3);
  const json::array& items = batch_array(body, "shadows", "shadows must be an array of {thing, name}", limits);
  // The response holds at most about max_page_bytes of shadows; the items past it are answered
  // with a retryable error instead of being read.
  const std::size_t budget = engine_.options().max_page_bytes;
  std::string out = "{\"shadows\":[";
  bool first = true;
  for (const json::value& item : items) {
    if (!first) out += ',';
    first = false;
    std::string thing, name = std::string(kDefaultShadowName);
    try {
      if (!item.is_object()) throw Error::invalid_request("each item must be an object {thing, name}");
      thing = string_member(item.get_object(), "thing", true);
      if (item.get_object().contains("name")) name = string_member(item.get_object(), "name", true);
      if (out.size() > budget) {
        throw Error(ErrorCode::unavailable, "this response reached its limit of " + std::to_string(budget) +
                                                " bytes; ask for this shadow in another request");
      }
      authorize(ctx, Action::read, thing);
      append_shadow(out, engine_.get({thing, name}));
    } catch (const Error& e) {
      append_item_error(out, thing, name, e);
    }
  }
  out += "]}";
  return json_response(200, std::move(out));
}

HttpResponse Api::batch_update(Context& ctx) {
  allow_only(ctx.query, {});
  const Limits& limits = engine_.options().document.limits;
  json::object body = parse_body_object(ctx.request.body, limits, 4);
  const json::array& list = batch_array(body, "operations", "operations must be an array", limits);
  // Parse and authorize every operation first; run the valid ones together in parallel.
  std::vector<std::optional<Error>> early(list.size());
  std::vector<UpdateRequest> requests;
  std::vector<std::size_t> slot;  // request index -> operation index
  std::vector<std::pair<std::string, std::string>> names(list.size());
  for (std::size_t i = 0; i < list.size(); ++i) {
    try {
      if (!list[i].is_object()) throw Error::invalid_request("each operation must be an object");
      const json::object& o = list[i].get_object();
      UpdateRequest r;
      r.key.thing = names[i].first = string_member(o, "thing", true);
      r.key.name = names[i].second = o.contains("name") ? string_member(o, "name", true) : std::string(kDefaultShadowName);
      auto section = parse_section(string_member(o, "section", true));
      if (!section) throw Error::invalid_request("section must be reported or desired", "section");
      r.section = *section;
      read_update_fields(o, r, {"thing", "name", "section"});
      authorize(ctx, r.section == Section::reported ? Action::write_reported : Action::write_desired, r.key.thing);
      requests.push_back(std::move(r));
      slot.push_back(i);
    } catch (const Error& e) {
      if (names[i].second.empty()) names[i].second = kDefaultShadowName;
      early[i] = e;
    }
  }
  std::vector<Outcome<UpdateResult>> results = engine_.batch_update(requests);
  std::vector<const Outcome<UpdateResult>*> by_operation(list.size(), nullptr);
  for (std::size_t j = 0; j < results.size(); ++j) by_operation[slot[j]] = &results[j];
  std::string out = "{\"results\":[";
  for (std::size_t i = 0; i < list.size(); ++i) {
    if (i) out += ',';
    if (early[i]) {
      append_item_error(out, names[i].first, names[i].second, *early[i]);
    } else if (const auto* r = std::get_if<UpdateResult>(by_operation[i])) {
      append_update_result(out, *r);
    } else {
      append_item_error(out, names[i].first, names[i].second, std::get<Error>(*by_operation[i]));
    }
  }
  out += "]}";
  return json_response(200, std::move(out));
}

}  // namespace deviceshadow::api

namespace deviceshadow::api {
namespace {

std::string render_status(const notify::RegistrationStatus& st) {
  json::object o;
  o["pending"] = st.pending;
  o["lagSeconds"] = st.lag_seconds;
  o["delivered"] = st.delivered;
  o["failed"] = st.failed;
  o["deadLetters"] = st.dead_letters;
  if (st.last_error) o["lastError"] = *st.last_error;
  return to_json(o);
}

// {"ids":[…]}, or an empty body or {} for all (nullopt); an empty list names none.
std::optional<std::vector<std::string>> read_event_ids(const std::string& body, const Limits& limits) {
  if (body.empty()) return std::nullopt;
  const json::object o = parse_body_object(body, limits, 2);
  for (const auto& m : o) {
    if (m.key() != "ids") throw Error::invalid_request("unknown member '" + std::string(m.key()) + "'", std::string(m.key()));
  }
  const json::value* list = o.if_contains("ids");
  if (!list) return std::nullopt;
  if (!list->is_array()) throw Error::invalid_request("ids must be an array of event ids", "ids");
  std::vector<std::string> ids;
  for (const json::value& id : list->get_array()) {
    if (!id.is_string()) throw Error::invalid_request("ids must be an array of event ids", "ids");
    ids.emplace_back(id.get_string());
  }
  return ids;
}

}  // namespace

// The notification registrations (admin only): /v1/registrations[/{id}[/dead-letters[/…]]].
HttpResponse Api::registrations(Context& ctx) {
  if (ctx.token && ctx.token->role != Role::admin) throw Error(ErrorCode::forbidden, "registrations need an admin token");
  const std::vector<std::string>& s = ctx.segments;
  const std::string& m = ctx.request.method;
  if (s.size() == 2) {
    allow_only(ctx.query, {});
    std::string out = "{\"registrations\":[";
    for (const notify::Registration& r : dispatcher_->list()) {
      if (out.back() != '[') out += ',';
      out += notify::render_registration_public(r);
    }
    return json_response(200, out + "]}");
  }
  const std::string& id = s[2];
  if (!notify::valid_registration_id(id)) {
    throw Error::invalid_request("a registration id is 1-64 characters from A-Z a-z 0-9 _ . -", "id");
  }
  auto not_found = [&] { return Error::not_found("no registration " + id); };
  if (s.size() == 3) {
    allow_only(ctx.query, {});
    if (m == "PUT") return json_response(200, notify::render_registration_public(dispatcher_->put(id, ctx.request.body)));
    if (m == "DELETE") {
      if (!dispatcher_->remove(id)) throw not_found();
      return json_response(200, "{\"deleted\":" + to_json(json::value(id)) + "}");
    }
    std::optional<notify::Registration> r = dispatcher_->get(id);
    std::optional<notify::RegistrationStatus> st = dispatcher_->status(id);
    if (!r || !st) throw not_found();
    std::string out = notify::render_registration_public(*r);
    out.pop_back();
    return json_response(200, out + ",\"status\":" + render_status(*st) + "}");
  }
  if (!dispatcher_->get(id)) throw not_found();
  if (s.size() == 5 && s[4] == "redrive") {
    allow_only(ctx.query, {});
    const std::size_t n = dispatcher_->redrive(id, read_event_ids(ctx.request.body, engine_.options().document.limits));
    return json_response(202, "{\"redriven\":" + std::to_string(n) + "}");
  }
  if (m == "DELETE") {
    allow_only(ctx.query, {});
    std::optional<std::vector<std::string>> ids;
    if (s.size() == 5) ids.emplace({s[4]});
    const std::size_t n = dispatcher_->delete_dead_letters(id, ids);
    if (s.size() == 5 && n == 0) throw Error::not_found("no dead letter " + s[4] + " of registration " + id);
    return json_response(200, "{\"deleted\":" + std::to_string(n) + "}");
  }
  allow_only(ctx.query, {"limit", "cursor"});
  const std::size_t limit = parse_limit(ctx.query);
  std::string after = ctx.query.contains("cursor") ? decode_cursor(ctx.query.at("cursor")) : "";
  // A page ends at `limit` letters or, like a history page, once its letters reach
  // max_page_bytes (the first always goes in). They are read a few at a time, so that a page of
  // large events is never read whole.
  constexpr std::size_t kChunk = 16;
  const std::size_t budget = engine_.options().max_page_bytes;
  std::string out = "{\"deadLetters\":[";
  std::string item;
  std::size_t kept = 0, bytes = 0;
  bool more = false;
  while (!more) {
    const std::size_t wanted = std::min(limit + 1 - kept, kChunk);
    std::vector<DeadLetter> letters = dispatcher_->dead_letters(id, after, wanted);
    for (const DeadLetter& d : letters) {
      item = "{\"event\":" + (d.event.empty() ? std::string("null") : d.event) + ",\"attempts\":" +
             std::to_string(d.attempts) + ",\"lastError\":";
      append_json_string(item, to_valid_utf8(d.last_error));
      item += ",\"failedAt\":";
      append_json_string(item, format_rfc3339(Timestamp::from_unix_nanos(d.failed_ns)));
      item += '}';
      if (kept == limit || (kept > 0 && bytes + item.size() > budget)) {
        more = true;  // this one is for the next page
        break;
      }
      if (kept++) out += ',';
      out += item;
      bytes += item.size();
      after = d.event_id;
    }
    if (letters.size() < wanted) break;  // none left
  }
  out += ']';
  if (more) {
    out += ",\"cursor\":";
    append_json_string(out, encode_cursor(after));
  }
  return json_response(200, out + "}");
}

}  // namespace deviceshadow::api
