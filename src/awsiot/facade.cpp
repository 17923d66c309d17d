#include "awsiot/facade.hpp"

#include "deviceshadow/error.hpp"
#include "deviceshadow/json.hpp"
#include "deviceshadow/timestamp.hpp"
#include "deviceshadow/validation.hpp"

#include <charconv>
#include <chrono>

namespace deviceshadow::awsiot {

using server::HttpResponse;

struct Facade::Context {
  const server::HttpRequest& request;
  server::RequestTarget target;
  std::string route = "unmatched";
  const server::Grant* grant = nullptr;  // null: the facade is open
  ShadowKey key;                         // of a shadow route
  bool classic = false;                  // the key is the classic shadow's
};

namespace {

constexpr std::string_view kListPrefix = "/api/things/shadow/ListNamedShadowsForThing/";

constexpr server::Route kRoutes[] = {
    {"/things/{thing}/shadow", "GET, POST, DELETE"},
    {"/api/things/shadow/ListNamedShadowsForThing/{thing}", "GET"},
};

constexpr std::size_t kMaxPageSize = 100;  // AWS's limit for ListNamedShadowsForThing

// AWS's rendering of an error: the exception name in x-amzn-ErrorType, {"code","message"}.
HttpResponse aws_error(int status, std::string_view type, std::string_view message) {
  std::string body = "{\"code\":" + std::to_string(status) + ",\"message\":";
  append_json_string(body, message);
  body += '}';
  return {status, "application/json", std::move(body), {{"x-amzn-ErrorType", std::string(type) + ":"}}};
}

HttpResponse aws_error(const Error& e) {
  switch (e.code()) {
    case ErrorCode::invalid_json: return aws_error(400, "InvalidRequestException", "Payload contains invalid json");
    case ErrorCode::invalid_request:
    case ErrorCode::invalid_name:
    case ErrorCode::invalid_timestamp:
    case ErrorCode::too_deep: return aws_error(400, "InvalidRequestException", e.what());
    case ErrorCode::unauthorized: return aws_error(401, "UnauthorizedException", e.what());
    case ErrorCode::forbidden: return aws_error(403, "ForbiddenException", e.what());
    case ErrorCode::not_found: return aws_error(404, "ResourceNotFoundException", e.what());
    case ErrorCode::method_not_allowed: return aws_error(405, "MethodNotAllowedException", e.what());
    case ErrorCode::version_conflict: return aws_error(409, "ConflictException", "Version conflict");
    case ErrorCode::document_too_large:
      return aws_error(413, "RequestEntityTooLargeException", "The payload exceeds the maximum size allowed");
    case ErrorCode::throttled: return aws_error(429, "ThrottlingException", "Rate exceeded");
    case ErrorCode::unavailable: return aws_error(503, "ServiceUnavailableException", e.what());
    case ErrorCode::internal: break;
  }
  return aws_error(500, "InternalFailureException", "Internal failure");
}

HttpResponse json_response(std::string body) { return {200, "application/json", std::move(body), {}}; }

std::int64_t epoch_seconds(std::int64_t unix_ns) { return unix_ns / 1'000'000'000; }
std::int64_t now_seconds() { return epoch_seconds(now().unix_nanos()); }

// AWS's metadata of a state: the state's shape with {"timestamp": seconds} at every leaf (a
// scalar, null, an empty object, a timestamped value), arrays as arrays of metadata.
void append_metadata(std::string& out, const json::value& v, std::int64_t seconds, const TimestampKeys& keys) {
  if (const json::object* o = v.if_object(); o && !o->empty() && !keys.find(*o)) {
    out += '{';
    for (const json::key_value_pair& m : *o) {
      if (out.back() != '{') out += ',';
      append_json_string(out, std::string_view(m.key().data(), m.key().size()));
      out += ':';
      append_metadata(out, m.value(), seconds, keys);
    }
    out += '}';
  } else if (const json::array* a = v.if_array()) {
    out += '[';
    for (const json::value& e : *a) {
      if (out.back() != '[') out += ',';
      append_metadata(out, e, seconds, keys);
    }
    out += ']';
  } else {
    out += "{\"timestamp\":" + std::to_string(seconds) + "}";
  }
}

std::uint64_t parse_count(const std::string& text, std::string_view what) {
  std::uint64_t v = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size() || text.empty()) {
    throw Error::invalid_request(std::string(what) + " must be a non-negative integer");
  }
  return v;
}

void allow_only(const std::map<std::string, std::string>& query, std::initializer_list<std::string_view> names) {
  for (const auto& [key, value] : query) {
    if (std::find(names.begin(), names.end(), key) == names.end()) {
      throw Error::invalid_request("Unknown query parameter: " + key);
    }
  }
}

}  // namespace

std::span<const server::Route> Facade::routes() noexcept { return kRoutes; }

bool Facade::serves(std::string_view target) noexcept {
  const std::string_view path = target.substr(0, target.find('?'));
  return path.starts_with("/things/") || path.starts_with(kListPrefix);
}

Facade::Facade(Engine& engine, FacadeAuth auth, server::Metrics& metrics, server::Logger& logger, FacadeOptions options)
    : engine_(engine), auth_(auth), metrics_(metrics), logger_(logger), options_(std::move(options)) {}

HttpResponse Facade::handle(const server::HttpRequest& request) {
  const auto start = std::chrono::steady_clock::now();
  metrics_.request_started();
  Context ctx{request, {}};
  HttpResponse response;
  try {
    ctx.target = server::split_target(request.target);
    authenticate(ctx);
    response = route(ctx);
    response.sheddable = request.method == "GET";
  } catch (const Error& e) {
    response = aws_error(e);
    if (e.code() == ErrorCode::method_not_allowed) {
      for (const server::Route& r : kRoutes) {
        if (r.path == ctx.route) response.headers.emplace_back("Allow", std::string(r.methods));
      }
    }
    if (response.status >= 500) {
      logger_.log(server::LogLevel::error, "request failed",
                  {{"method", request.method}, {"target", request.target}, {"error", e.what()}});
    }
  } catch (const std::exception& e) {
    response = aws_error(Error(ErrorCode::internal, "internal error"));
    logger_.log(server::LogLevel::error, "unexpected exception",
                {{"method", request.method}, {"target", request.target}, {"error", e.what()}});
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  metrics_.request_finished(ctx.route, request.method, response.status, seconds);
  return response;
}

void Facade::authenticate(Context& ctx) const {
  if (auth_.verifier) {
    const Verification v = auth_.verifier->verify(ctx.request, std::chrono::system_clock::now());
    if (!v.ok()) {
      logger_.log(server::LogLevel::info, "signature refused", {{"target", ctx.request.target}, {"why", v.detail}});
      throw Error(ErrorCode::forbidden, "the request signature is not valid: " + v.detail);
    }
    ctx.grant = v.principal;
  } else if (auth_.tokens) {
    ctx.grant = auth_.tokens->authenticate(ctx.request.authorization);
    if (!ctx.grant) throw Error(ErrorCode::unauthorized, "a valid Authorization: Bearer token is required");
  }
}

void Facade::authorize(const Context& ctx, server::Action action, std::string_view thing) const {
  if (!ctx.grant) return;
  if (!ctx.grant->may(action)) throw Error(ErrorCode::forbidden, "this key's role may not do that");
  if (!ctx.grant->covers(thing)) throw Error(ErrorCode::forbidden, "this key does not cover thing " + std::string(thing));
}

HttpResponse Facade::route(Context& ctx) {
  const std::vector<std::string>& s = ctx.target.segments;
  const std::string& m = ctx.request.method;
  auto only = [&](const server::Route& r) {
    ctx.route = r.path;
    if (!r.allows(m)) throw Error(ErrorCode::method_not_allowed, "Method " + m + " is not allowed here");
  };
  if (s.size() == 3 && s[0] == "things" && s[2] == "shadow") {
    only(kRoutes[0]);
    allow_only(ctx.target.query, {"name"});
    auto name = ctx.target.query.find("name");
    ctx.classic = name == ctx.target.query.end();
    ctx.key = {s[1], ctx.classic ? options_.classic_shadow : name->second};
    validate_thing(ctx.key.thing);
    validate_shadow_name(ctx.key.name);
    try {
      return m == "GET" ? get(ctx) : m == "POST" ? update(ctx) : remove(ctx);
    } catch (const Error& e) {
      if (e.code() != ErrorCode::not_found) throw;
      // AWS names the shadow, or the thing for its classic shadow.
      throw Error::not_found("No shadow exists with name: '" + (ctx.classic ? ctx.key.thing : ctx.key.name) + "'");
    }
  }
  if (s.size() == 5 && s[0] == "api" && s[1] == "things" && s[2] == "shadow" && s[3] == "ListNamedShadowsForThing") {
    only(kRoutes[1]);
    return list(ctx);
  }
  throw Error::not_found("No such resource: " + std::string(ctx.request.target.substr(0, ctx.request.target.find('?'))));
}

HttpResponse Facade::get(Context& ctx) {
  authorize(ctx, server::Action::read, ctx.key.thing);
  const ShadowView view = engine_.get(ctx.key);
  const TimestampKeys& keys = engine_.options().document.timestamp_keys;
  // A section is shown when it is live and not empty, as AWS omits empty sections.
  json::value states[2];
  bool shown[2] = {false, false};
  for (Section s : {Section::desired, Section::reported}) {
    const SectionRecord& r = view.record.section(s);
    const int i = s == Section::desired ? 0 : 1;
    if (!r.exists() || r.state_json == "{}") continue;
    states[i] = parse_json(r.state_json);
    shown[i] = true;
  }
  std::string out = "{\"state\":{";
  for (Section s : {Section::desired, Section::reported}) {
    const int i = s == Section::desired ? 0 : 1;
    if (!shown[i]) continue;
    if (out.back() != '{') out += ',';
    out += '"';
    out += to_string(s);
    out += "\":";
    out += view.record.section(s).state_json;
  }
  if (!view.delta.empty()) {
    if (out.back() != '{') out += ',';
    out += "\"delta\":" + to_json(view.delta);
  }
  out += "},\"metadata\":{";
  for (Section s : {Section::desired, Section::reported}) {
    const int i = s == Section::desired ? 0 : 1;
    if (!shown[i]) continue;
    if (out.back() != '{') out += ',';
    out += '"';
    out += to_string(s);
    out += "\":";
    append_metadata(out, states[i], epoch_seconds(view.record.section(s).timestamp_ns), keys);
  }
  out += "},\"version\":" + std::to_string(shadow_version(view.record, engine_.store().shares_versions()));
  out += ",\"timestamp\":" + std::to_string(now_seconds()) + "}";
  return json_response(std::move(out));
}

HttpResponse Facade::update(Context& ctx) {
  const Limits& limits = engine_.options().document.limits;
  if (ctx.request.body.empty()) throw Error(ErrorCode::invalid_json, "empty body");
  // {"state":{"desired":{…}}}: two levels above a section's state.
  json::value parsed = parse_json(ctx.request.body, limits.max_depth + 2 + 8);
  if (!parsed.is_object()) throw Error(ErrorCode::invalid_json, "the body is not a JSON object");
  const json::object& body = parsed.get_object();

  ShadowUpdate u;
  u.key = ctx.key;
  u.acknowledge = options_.acknowledge;
  u.replace_arrays = true;  // AWS replaces arrays whole
  u.always_store = true;    // every accepted update moves the version, as on AWS
  for (const json::key_value_pair& m : body) {
    const std::string_view k(m.key().data(), m.key().size());
    if (k != "state" && k != "version" && k != "clientToken") {
      throw Error::invalid_request("Unknown member in the request: " + std::string(k));
    }
  }
  const json::value* state = body.if_contains("state");
  if (!state) throw Error::invalid_request("Missing required node: state");
  if (state->is_null()) {  // empties both sections; the shadow stays
    u.reported = SectionUpdate{{}, MergeMode::client_is_master, false};
    u.desired = SectionUpdate{{}, MergeMode::client_is_master, false};
  } else if (const json::object* o = state->if_object()) {
    for (const json::key_value_pair& m : *o) {
      const std::string_view k(m.key().data(), m.key().size());
      const std::optional<Section> s = parse_section(k);
      if (!s) throw Error::invalid_request("State contains an invalid node: '" + std::string(k) + "'");
      std::optional<SectionUpdate>& part = *s == Section::reported ? u.reported : u.desired;
      if (m.value().is_null()) {
        part = SectionUpdate{{}, MergeMode::server_is_master, true};
      } else if (m.value().is_object()) {
        part = SectionUpdate{m.value().get_object(), MergeMode::server_is_master, false};
      } else {
        throw Error::invalid_request("Invalid " + std::string(k) + " node: it must be an object or null");
      }
    }
    if (!u.reported && !u.desired) throw Error::invalid_request("Missing required node: state.desired or state.reported");
  } else {
    throw Error::invalid_request("State node must be an object or null");
  }
  if (const json::value* v = body.if_contains("version")) {
    if (v->is_int64() && v->get_int64() >= 0) {
      u.version = static_cast<std::uint64_t>(v->get_int64());
    } else if (v->is_uint64()) {
      u.version = v->get_uint64();
    } else {
      throw Error::invalid_request("Invalid version: it must be a non-negative integer");
    }
  }
  if (const json::value* token = body.if_contains("clientToken")) {
    if (!token->is_string()) throw Error::invalid_request("Invalid clientToken: it must be a string");
    u.client_token = std::string(token->get_string());
  }
  if (u.reported) authorize(ctx, server::Action::write_reported, ctx.key.thing);
  if (u.desired) authorize(ctx, server::Action::write_desired, ctx.key.thing);

  const UpdateResult result = engine_.update(u);
  const ShadowRecord& record = result.shadow.record;
  const std::int64_t seconds = epoch_seconds(std::max(record.reported.timestamp_ns, record.desired.timestamp_ns));
  // The accepted document: the request's state, with metadata of the leaves it touched.
  std::string out = "{\"state\":" + to_json(*state) + ",\"metadata\":";
  if (state->is_object()) {
    append_metadata(out, *state, seconds, engine_.options().document.timestamp_keys);
  } else {
    out += "{}";
  }
  out += ",\"version\":" + std::to_string(shadow_version(record, engine_.store().shares_versions()));
  out += ",\"timestamp\":" + std::to_string(seconds);
  if (!u.client_token.empty()) {
    out += ",\"clientToken\":";
    append_json_string(out, u.client_token);
  }
  out += '}';
  return json_response(std::move(out));
}

HttpResponse Facade::remove(Context& ctx) {
  authorize(ctx, server::Action::remove, ctx.key.thing);
  const DeleteResult result = engine_.remove(ctx.key);
  std::string out = "{\"version\":" + std::to_string(shadow_version(result.record, engine_.store().shares_versions()));
  out += ",\"timestamp\":" + std::to_string(now_seconds()) + "}";
  return json_response(std::move(out));
}

HttpResponse Facade::list(Context& ctx) {
  allow_only(ctx.target.query, {"nextToken", "pageSize"});
  const std::string& thing = ctx.target.segments[4];
  validate_thing(thing);
  authorize(ctx, server::Action::list, thing);
  std::size_t page = 25;
  if (auto it = ctx.target.query.find("pageSize"); it != ctx.target.query.end()) {
    const std::uint64_t n = parse_count(it->second, "pageSize");
    if (n < 1 || n > kMaxPageSize) throw Error::invalid_request("pageSize must be between 1 and 100");
    page = static_cast<std::size_t>(n);
  }
  std::string cursor;
  if (auto it = ctx.target.query.find("nextToken"); it != ctx.target.query.end()) cursor = it->second;
  // One more than a page, less the classic shadow, which AWS does not list as named.
  ShadowList found = engine_.list_shadows(thing, page + 1, cursor);
  std::erase_if(found.shadows, [&](const ShadowSummary& s) { return s.name == options_.classic_shadow; });
  const bool more = found.shadows.size() > page || !found.cursor.empty();
  if (found.shadows.size() > page) found.shadows.resize(page);
  std::string out = "{\"results\":[";
  for (const ShadowSummary& s : found.shadows) {
    if (out.back() != '[') out += ',';
    append_json_string(out, s.name);
  }
  out += ']';
  if (more) {  // the page may hold only the classic shadow: go on after it then
    out += ",\"nextToken\":";
    append_json_string(out, found.shadows.empty() ? found.cursor : encode_cursor(found.shadows.back().name));
  }
  out += ",\"timestamp\":" + std::to_string(now_seconds()) + "}";
  return json_response(std::move(out));
}

}  // namespace deviceshadow::awsiot
