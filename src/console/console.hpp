// The web console: its static files (console/ in the repository), built into shadowd at build
// time (scripts/embed-console.py) and served under /console/ without a token, since they hold
// no data: everything the console shows it reads from API v1 with the user's token.
#pragma once

#include "http/server.hpp"

#include <span>
#include <string>
#include <string_view>

namespace deviceshadow::http {
class Metrics;
}

namespace deviceshadow::console {

// One file of the console, as the build embedded it.
struct Asset {
  std::string_view name;          // served as /console/<name>; index.html also as /console/
  std::string_view content_type;  // with its charset for text
  std::string_view etag;          // quoted hash of the bytes, changes whenever they do
  std::string_view body;
};

// Every embedded file (generated).
std::span<const Asset> assets() noexcept;

// Serves GET and HEAD of /console/<file>: each with its Content-Type, `Cache-Control: no-cache`
// and its ETag (a browser revalidates and gets 304 while the file is unchanged, and never runs
// a stale console after an upgrade), a Content-Security-Policy that lets the page load and
// connect to this server's origin only, and `X-Content-Type-Options: nosniff`. /console
// redirects to /console/; other files are 404, other methods 405, with API v1's error body.
// Thread-safe.
class Console final : public http::Service {
 public:
  explicit Console(http::Metrics& metrics) : metrics_(metrics) {}
  // Whether `target` (raw, with its query) is the console's: /console or below /console/.
  static bool serves(std::string_view target) noexcept;

  http::HttpResponse handle(const http::HttpRequest& request) override;
  http::HttpResponse refuse(int status, const std::string& message) const override;
  // Its files are built in: every request runs on the I/O thread.
  std::optional<http::HttpResponse> handle_inline(const http::HttpRequest& request) override { return handle(request); }

 private:
  http::Metrics& metrics_;
};

}  // namespace deviceshadow::console
