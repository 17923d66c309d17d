// Live change streams (docs/streams.md): GET /v1/things/{thing}/shadows/{name}/events and
// GET /v1/events answer text/event-stream, served by the live hub (src/live). Everything a
// request can get wrong is answered before the stream starts.
#include "api/api.hpp"
#include "api/handlers.hpp"

#include "deviceshadow/error.hpp"
#include "deviceshadow/render.hpp"
#include "deviceshadow/validation.hpp"
#include "live/hub.hpp"

#include <algorithm>

namespace deviceshadow::api {

using http::allow_only;

namespace {

// "a,b,c" as a JSON array of its non-empty items.
json::array comma_list(std::string_view text) {
  json::array out;
  for (std::size_t at = 0; at <= text.size();) {
    const std::size_t end = std::min(text.find(',', at), text.size());
    if (end > at) out.emplace_back(text.substr(at, end - at));
    at = end + 1;
  }
  return out;
}

}  // namespace

HttpResponse Api::events(Context& ctx) {
  const bool one_shadow = ctx.segments.size() == 6;
  if (one_shadow) {
    allow_only(ctx.query, {"sections", "paths", "include", "filter", "after"});
  } else {
    allow_only(ctx.query, {"match", "sections", "paths", "include", "filter", "after"});
  }
  live::StreamRequest request;
  if (one_shadow) {
    request.shadow = ShadowKey{ctx.segments[2], ctx.segments[4]};
    validate_thing(request.shadow->thing);
    validate_shadow_name(request.shadow->name);
    authorize(ctx, Action::read, request.shadow->thing);
  } else {
    authorize(ctx, Action::read, "");
    if (ctx.token) request.scope = ctx.token->patterns;  // only the things the token covers
  }
  // A parameter given empty (`?match=`) is as if not given.
  auto given = [&](const char* name) -> const std::string* {
    auto it = ctx.query.find(name);
    return it != ctx.query.end() && !it->second.empty() ? &it->second : nullptr;
  };
  json::object selection;
  for (const char* name : {"match", "sections"}) {
    if (const std::string* v = given(name)) selection[name] = *v;
  }
  for (const char* name : {"paths", "include"}) {
    if (const std::string* v = given(name)) selection[name] = comma_list(*v);
  }
  request.selection = notify::parse_selection(selection);
  // One that does not parse is 400 invalid_filter here, before the stream starts.
  if (const std::string* filter = given("filter")) live::set_filter(request.selection, *filter);
  // A browser's reconnect sends the last id it saw with the URL it first opened: the header wins.
  if (const std::string* last = ctx.request.header("Last-Event-ID"); last && !last->empty()) {
    request.after = live::parse_resume_point(*last, "Last-Event-ID");
  } else if (const std::string* after = given("after")) {
    request.after = live::parse_resume_point(*after, "after");
  }
  // A point past the server's clock (a client's clock ahead, an id from elsewhere) has nothing
  // after it to replay: the stream goes live from its start, as one without a point.
  if (request.after && request.after->ns > engine_.options().clock()) request.after.reset();

  live::Hub* hub = options_.streams;
  if (!hub) throw Error::invalid_request(options_.streams_off);
  std::shared_ptr<live::Hub::Admission> admission = hub->admit(request.after.has_value());
  if (!admission) {
    HttpResponse busy{503, "application/json",
                      render_error(Error(ErrorCode::unavailable, "too many open or replaying streams; retry in a moment")),
                      {{"Retry-After", "1"}}};
    return busy;
  }
  HttpResponse response{200, "text/event-stream", {}, {{"Cache-Control", "no-cache"}, {"X-Accel-Buffering", "no"}}};
  response.stream_buffer = hub->options().stream_buffer;
  response.stream = [hub, request = std::move(request), admission = std::move(admission)](
                        std::shared_ptr<http::ResponseStream> stream) mutable {
    hub->serve(std::move(stream), std::move(request), std::move(admission));
  };
  return response;
}

}  // namespace deviceshadow::api
