// The ceiling for the HTTP benchmark: shadowd's own transport (Beast, same options) with a
// handler that returns a fixed 200. It never blocks, so it runs on the I/O thread like
// shadowd's probes; with "pool" it runs on the worker pool, as store calls do (the cost of the
// hop). Usage: http_ceiling PORT [pool]
#include "http/server.hpp"

#include <cstdio>
#include <string>
#include <string_view>

namespace {

using deviceshadow::http::HttpRequest;
using deviceshadow::http::HttpResponse;

class FixedService final : public deviceshadow::http::Service {
 public:
  explicit FixedService(bool on_pool) : on_pool_(on_pool) {}
  HttpResponse handle(const HttpRequest&) override { return {200, "application/json", "{}", {}}; }
  HttpResponse refuse(int status, const std::string&) const override { return {status, "application/json", "{}", {}}; }
  std::optional<HttpResponse> handle_inline(const HttpRequest& request) override {
    if (on_pool_) return std::nullopt;
    return handle(request);
  }

 private:
  const bool on_pool_;
};

}  // namespace

int main(int argc, char** argv) {
  deviceshadow::http::HttpServerOptions options;
  options.port = static_cast<unsigned short>(argc > 1 ? std::stoi(argv[1]) : 8090);
  FixedService service(argc > 2 && std::string_view(argv[2]) == "pool");
  deviceshadow::http::HttpServer server(options, [&service](std::string_view) -> deviceshadow::http::Service& { return service; });
  std::fprintf(stderr, "listening address=127.0.0.1:%u\n", server.port());
  server.run();
}
