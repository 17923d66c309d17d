#include "console/console.hpp"

#include "deviceshadow/error.hpp"
#include "deviceshadow/render.hpp"
#include "http/metrics.hpp"

#include <algorithm>
#include <chrono>

namespace deviceshadow::console {
namespace {

using http::HttpRequest;
using http::HttpResponse;

// Scripts, styles, images and API calls from this origin only; no inline script or style, no
// plug-ins, no framing, no <base> and no form posts elsewhere.
constexpr std::string_view kPolicy =
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; "
    "object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'";

void secure(HttpResponse& r) {
  r.headers.emplace_back("Content-Security-Policy", std::string(kPolicy));
  r.headers.emplace_back("X-Content-Type-Options", "nosniff");
  r.headers.emplace_back("Referrer-Policy", "no-referrer");
}

HttpResponse error_response(const Error& e) {
  HttpResponse r{http_status(e.code()), "application/json", render_error(e), {}};
  secure(r);
  return r;
}

const Asset* find_asset(std::string_view name) {
  if (name.empty()) name = "index.html";
  auto all = assets();
  auto it = std::find_if(all.begin(), all.end(), [&](const Asset& a) { return a.name == name; });
  return it == all.end() ? nullptr : &*it;
}

// Whether an If-None-Match header lists `etag` (or is "*").
bool matches(const std::string* if_none_match, std::string_view etag) {
  if (!if_none_match) return false;
  std::string_view list = *if_none_match;
  while (!list.empty()) {
    std::size_t comma = list.find(',');
    std::string_view tag = list.substr(0, comma);
    tag.remove_prefix(std::min(tag.find_first_not_of(" \t"), tag.size()));
    tag = tag.substr(0, tag.find_last_not_of(" \t") + 1);
    if (tag.starts_with("W/")) tag.remove_prefix(2);
    if (tag == etag || tag == "*") return true;
    list = comma == std::string_view::npos ? std::string_view{} : list.substr(comma + 1);
  }
  return false;
}

HttpResponse serve(const HttpRequest& request, std::string_view path) {
  if (request.method != "GET" && request.method != "HEAD") {
    HttpResponse r = error_response(Error(ErrorCode::method_not_allowed, "the console's files answer GET and HEAD only"));
    r.headers.emplace_back("Allow", "GET, HEAD");
    return r;
  }
  if (path == "/console") {
    HttpResponse r{301, "text/plain; charset=utf-8", "see /console/\n", {{"Location", "/console/"}}};
    secure(r);
    return r;
  }
  const Asset* asset = find_asset(path.substr(std::string_view("/console/").size()));
  if (!asset) throw Error(ErrorCode::not_found, "the console has no file " + std::string(path));
  HttpResponse r;
  r.content_type = std::string(asset->content_type);
  r.headers.emplace_back("ETag", std::string(asset->etag));
  r.headers.emplace_back("Cache-Control", "no-cache");
  if (matches(request.header("If-None-Match"), asset->etag)) {
    r.status = 304;
  } else {
    r.body = std::string(asset->body);
  }
  secure(r);
  return r;
}

}  // namespace

bool Console::serves(std::string_view target) noexcept {
  const std::string_view path = target.substr(0, target.find('?'));
  return path == "/console" || path.starts_with("/console/");
}

HttpResponse Console::handle(const HttpRequest& request) {
  const auto start = std::chrono::steady_clock::now();
  metrics_.request_started();
  const std::string_view target = request.target;
  HttpResponse response;
  try {
    response = serve(request, target.substr(0, target.find('?')));
  } catch (const Error& e) {
    response = error_response(e);
  } catch (const std::exception&) {
    response = error_response(Error(ErrorCode::internal, "internal error"));
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  metrics_.request_finished("/console/", request.method, response.status, seconds);
  return response;
}

HttpResponse Console::refuse(int status, const std::string& message) const {
  return error_response(Error(http::refusal_code(status), message));
}

}  // namespace deviceshadow::console
