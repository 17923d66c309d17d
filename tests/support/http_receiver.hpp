// An HTTP server of the project's own transport, in process on a free port, that answers every
// request with a handler and records it: a receiver for webhook tests, a scripted endpoint for
// AWS API clients.
#pragma once

#include "deviceshadow/ascii.hpp"
#include "http/server.hpp"

#include <functional>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

class HttpReceiver {
 public:
  using Handler = std::function<deviceshadow::http::HttpResponse(const deviceshadow::http::HttpRequest&)>;

  explicit HttpReceiver(Handler handler)
      : handler_(std::move(handler)),
        server_(options(), [this](const deviceshadow::http::HttpRequest& r) { return handle(r); },
                [](int status, const std::string&) { return deviceshadow::http::HttpResponse{status, "text/plain", "", {}}; }),
        runner_([this] { server_.run(); }) {}
  ~HttpReceiver() {
    server_.stop();
    runner_.join();
  }
  HttpReceiver(const HttpReceiver&) = delete;
  HttpReceiver& operator=(const HttpReceiver&) = delete;

  std::string url(const std::string& path = "") const { return "http://127.0.0.1:" + std::to_string(server_.port()) + path; }
  std::vector<deviceshadow::http::HttpRequest> requests() {
    std::lock_guard lock(mutex_);
    return requests_;
  }
  // A request header's value (names compare case-insensitively), "(none)" when absent.
  static std::string header(const deviceshadow::http::HttpRequest& r, std::string_view name) {
    for (const auto& [n, v] : r.headers) {
      if (deviceshadow::equals_ignoring_case(n, name)) return v;
    }
    return "(none)";
  }

 private:
  static deviceshadow::http::HttpServerOptions options() {
    deviceshadow::http::HttpServerOptions o;
    o.port = 0;
    o.workers = 4;
    return o;
  }
  deviceshadow::http::HttpResponse handle(const deviceshadow::http::HttpRequest& r) {
    {
      std::lock_guard lock(mutex_);
      requests_.push_back(r);
    }
    return handler_(r);
  }

  Handler handler_;
  std::mutex mutex_;
  std::vector<deviceshadow::http::HttpRequest> requests_;
  deviceshadow::http::HttpServer server_;
  std::thread runner_;
};
