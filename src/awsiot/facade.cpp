#include "awsiot/facade.hpp"

#include "awsiot/documents.hpp"

#include "deviceshadow/error.hpp"
#include "deviceshadow/json.hpp"
#include "deviceshadow/validation.hpp"

#include <charconv>
#include <chrono>

namespace deviceshadow::awsiot {

using http::HttpResponse;

struct Facade::Context {
  const http::HttpRequest& request;
  http::RequestTarget target;
  std::string route = "unmatched";
  const http::Grant* grant = nullptr;  // null: the facade is open
  ShadowKey key;                         // of a shadow route
  bool classic = false;                  // the key is the classic shadow's
  bool must_not_wait = false;            // on an I/O thread: a handler that would wait throws WouldWait
};

namespace {

constexpr std::string_view kListPrefix = "/api/things/shadow/ListNamedShadowsForThing/";

constexpr http::Route kRoutes[] = {
    {"/things/{thing}/shadow", "GET, POST, DELETE"},
    {"/api/things/shadow/ListNamedShadowsForThing/{thing}", "GET"},
};

constexpr std::size_t kMaxPageSize = 100;  // AWS's limit for ListNamedShadowsForThing

// AWS's rendering of an error: the exception name in x-amzn-ErrorType, {"code","message"}.
HttpResponse error_response(const AwsShadowError& aws) {
  return {aws.status, "application/json", render_error_body(aws), {{"x-amzn-ErrorType", std::string(aws.type) + ":"}}};
}

HttpResponse error_response(const Error& e) { return error_response(aws_shadow_error(e)); }

HttpResponse json_response(std::string body) { return {200, "application/json", std::move(body), {}}; }

}  // namespace

std::span<const http::Route> Facade::routes() noexcept { return kRoutes; }

bool Facade::serves(std::string_view target) noexcept {
  const std::string_view path = target.substr(0, target.find('?'));
  return path.starts_with("/things/") || path.starts_with(kListPrefix);
}

Facade::Facade(Engine& engine, FacadeAuth auth, http::Metrics& metrics, http::Logger& logger, FacadeOptions options)
    : engine_(engine), auth_(auth), metrics_(metrics), logger_(logger), options_(std::move(options)) {}

HttpResponse Facade::refuse(int status, const std::string& message) const {
  AwsShadowError aws = aws_shadow_error(Error(http::refusal_code(status), message));
  aws.status = status;  // the body's code too (431, say, where the error code maps to 400)
  return error_response(aws);
}

std::optional<HttpResponse> Facade::handle_inline(const http::HttpRequest& request) {
  // /things/{thing}/shadow: the thing is percent-encoded, so holds no '/'.
  const std::string_view path = std::string_view(request.target).substr(0, request.target.find('?'));
  constexpr std::string_view kThings = "/things/";
  if (!options_.inline_reads || request.method != "GET" || !path.starts_with(kThings)) return std::nullopt;
  const std::string_view rest = path.substr(kThings.size());
  if (rest.find('/') == std::string_view::npos || rest.substr(rest.find('/')) != "/shadow") return std::nullopt;
  return respond(request, true);
}

HttpResponse Facade::handle(const http::HttpRequest& request) { return *respond(request, false); }

std::optional<HttpResponse> Facade::respond(const http::HttpRequest& request, bool must_not_wait) {
  const auto start = std::chrono::steady_clock::now();
  metrics_.request_started();
  Context ctx{request, {}};
  ctx.must_not_wait = must_not_wait;
  HttpResponse response;
  try {
    ctx.target = http::split_target(request.target);
    authenticate(ctx);
    response = route(ctx);
    response.sheddable = request.method == "GET";
  } catch (const WouldWait&) {
    metrics_.request_handed_on();
    return std::nullopt;
  } catch (const Error& e) {
    if (ctx.route == "unmatched" && (e.code() == ErrorCode::unauthorized || e.code() == ErrorCode::forbidden)) {
      ctx.route = http::route_label(kRoutes, ctx.target.segments);  // refused before routing
    }
    response = error_response(e);
    if (e.code() == ErrorCode::method_not_allowed) {
      for (const http::Route& r : kRoutes) {
        if (r.path == ctx.route) response.headers.emplace_back("Allow", std::string(r.methods));
      }
    }
    if (std::uint64_t suppressed = 0; response.status >= 500 && failure_log_.admit(suppressed)) {
      logger_.log(http::LogLevel::error, "request failed",
                  {{"method", request.method}, {"target", request.target}, {"error", e.what()},
                   {"suppressed", std::to_string(suppressed)}});
    }
  } catch (const std::exception& e) {
    response = error_response(Error(ErrorCode::internal, "internal error"));
    if (std::uint64_t suppressed = 0; failure_log_.admit(suppressed)) {
      logger_.log(http::LogLevel::error, "unexpected exception",
                  {{"method", request.method}, {"target", request.target}, {"error", e.what()},
                   {"suppressed", std::to_string(suppressed)}});
    }
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  metrics_.request_finished(ctx.route, request.method, response.status, seconds);
  return response;
}

void Facade::authenticate(Context& ctx) const {
  if (auth_.verifier) {
    const Verification v = auth_.verifier->verify(ctx.request, std::chrono::system_clock::now());
    if (!v.ok()) {
      if (std::uint64_t suppressed = 0; refusal_log_.admit(suppressed)) {
        logger_.log(http::LogLevel::info, "signature refused",
                    {{"target", ctx.request.target}, {"why", v.detail}, {"suppressed", std::to_string(suppressed)}});
      }
      throw Error(ErrorCode::forbidden, "the request signature is not valid: " + v.detail);
    }
    ctx.grant = v.principal;
  } else if (auth_.tokens) {
    ctx.grant = auth_.tokens->authenticate(ctx.request.authorization);
    if (!ctx.grant) throw Error(ErrorCode::unauthorized, "a valid Authorization: Bearer token is required");
  }
}

void Facade::authorize(const Context& ctx, http::Action action, std::string_view thing) const {
  if (!ctx.grant) return;
  if (!ctx.grant->may(action)) throw Error(ErrorCode::forbidden, "this key's role may not do that");
  if (!ctx.grant->covers(thing)) throw Error(ErrorCode::forbidden, "this key does not cover thing " + std::string(thing));
}

HttpResponse Facade::route(Context& ctx) {
  const std::vector<std::string>& s = ctx.target.segments;
  const std::string& m = ctx.request.method;
  auto only = [&](const http::Route& r) {
    ctx.route = r.path;
    if (!r.allows(m)) throw Error(ErrorCode::method_not_allowed, "Method " + m + " is not allowed here");
  };
  if (s.size() == 3 && s[0] == "things" && s[2] == "shadow") {
    only(kRoutes[0]);
    http::allow_only(ctx.target.query, {"name"});
    auto name = ctx.target.query.find("name");
    ctx.classic = name == ctx.target.query.end();
    ctx.key = {s[1], ctx.classic ? options_.classic_shadow : name->second};
    validate_thing(ctx.key.thing);
    validate_shadow_name(ctx.key.name);
    try {
      return m == "GET" ? get(ctx) : m == "POST" ? update(ctx) : remove(ctx);
    } catch (const Error& e) {
      if (e.code() != ErrorCode::not_found) throw;
      throw shadow_not_found(ctx.key, ctx.classic);
    }
  }
  if (s.size() == 5 && s[0] == "api" && s[1] == "things" && s[2] == "shadow" && s[3] == "ListNamedShadowsForThing") {
    only(kRoutes[1]);
    return list(ctx);
  }
  throw Error::not_found("No such resource: " + std::string(ctx.request.target.substr(0, ctx.request.target.find('?'))));
}

HttpResponse Facade::get(Context& ctx) {
  authorize(ctx, http::Action::read, ctx.key.thing);
  std::optional<ShadowView> view = ctx.must_not_wait ? engine_.try_get(ctx.key) : engine_.get(ctx.key);
  if (!view) throw WouldWait{};
  return json_response(render_document(*view, engine_.store().shares_versions(),
                                       engine_.options().document.timestamp_keys, now_seconds()));
}

HttpResponse Facade::update(Context& ctx) {
  UpdateRequestBody request =
      read_update_request(ctx.request.body, engine_.options().document.limits, options_.acknowledge);
  request.update.key = ctx.key;
  request.update.source = WriteSource::aws_http;
  if (request.update.reported) authorize(ctx, http::Action::write_reported, ctx.key.thing);
  if (request.update.desired) authorize(ctx, http::Action::write_desired, ctx.key.thing);
  const UpdateResult result = engine_.update(request.update);
  return json_response(render_accepted(request.body.at("state"), result.shadow.record, engine_.store().shares_versions(),
                                       engine_.options().document.timestamp_keys, request.update.client_token));
}

HttpResponse Facade::remove(Context& ctx) {
  authorize(ctx, http::Action::remove, ctx.key.thing);
  const DeleteResult result = engine_.remove(ctx.key, std::nullopt, std::nullopt, WriteSource::aws_http);
  return json_response(render_deleted(result.record, engine_.store().shares_versions(), now_seconds(), ""));
}

HttpResponse Facade::list(Context& ctx) {
  http::allow_only(ctx.target.query, {"nextToken", "pageSize"});
  const std::string& thing = ctx.target.segments[4];
  validate_thing(thing);
  authorize(ctx, http::Action::list, thing);
  std::size_t page = 25;
  if (auto it = ctx.target.query.find("pageSize"); it != ctx.target.query.end()) {
    const std::uint64_t n = http::parse_uint(it->second, "pageSize");
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
