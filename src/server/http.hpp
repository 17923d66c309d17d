// A small HTTP/1.1 server (Boost.Beast underneath, kept out of this header): keep-alive,
// pipelining-safe (one request at a time per connection, in order), request size limits,
// read timeouts, graceful shutdown. Handlers run on a worker pool, never on I/O threads.
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace deviceshadow::server {

struct HttpRequest {
  std::string method;  // "GET", "POST", …
  std::string target;  // raw path and query, still percent-encoded
  std::string authorization;
  std::string body;
};

struct HttpResponse {
  int status = 200;
  std::string content_type = "application/json";
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;  // extra headers
};

// Must not throw; runs concurrently on worker threads.
using Handler = std::function<HttpResponse(const HttpRequest&)>;
// Renders a transport-level failure (oversized or malformed request) as a response.
using ErrorResponder = std::function<HttpResponse(int status, const std::string& message)>;

struct HttpServerOptions {
  std::string host = "127.0.0.1";
  unsigned short port = 8080;  // 0: any free port (see HttpServer::port())
  std::size_t io_threads = 1;
  std::size_t workers = 64;  // handler threads; blocking store calls wait here
  std::size_t max_body_bytes = 1 << 20;
  std::size_t max_header_bytes = 16 << 10;
  std::chrono::milliseconds read_timeout{15000};   // to receive one whole request
  std::chrono::milliseconds idle_timeout{60000};   // keep-alive connection with no request
};

class HttpServer {
 public:
  // Binds and listens; throws std::system_error if it cannot.
  HttpServer(HttpServerOptions options, Handler handler, ErrorResponder error_responder);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  unsigned short port() const;
  // Serves until stop() or SIGINT/SIGTERM; then stops accepting, finishes the requests in
  // flight, closes idle connections and returns.
  void run();
  // Thread-safe; may be called from a handler.
  void stop();

  struct Impl;  // defined in http_server.cpp, the one file that includes Beast

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace deviceshadow::server
