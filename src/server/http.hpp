// A small HTTP/1.1 server (Boost.Beast underneath, kept out of this header): keep-alive,
// pipelining-safe (one request at a time per connection, in order), request size limits,
// read timeouts, graceful shutdown. Handlers run on a worker pool, never on I/O threads.
//
// Hostile clients are bounded: every byte a request takes in memory (headers, chunk framing,
// trailers, body) counts against a limit; the read timeout runs from a request's first byte;
// framing that RFC 9112 makes ambiguous (Transfer-Encoding other than a single "chunked",
// Content-Length beside it or repeated) is answered 400 and the connection closed; connections
// are capped; responses waiting for slow readers are capped in bytes.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace deviceshadow::server {

struct HttpRequest {
  std::string method;  // "GET", "POST", …
  std::string target;  // raw path and query, still percent-encoded
  std::string authorization;
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;  // every header, as sent, in order
};

struct HttpResponse {
  int status = 200;
  std::string content_type = "application/json";
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;  // extra headers
  // A read with no effect: when too many response bytes already wait for slow clients, the
  // server may answer 503 instead of queueing this body (writes are always answered).
  bool sheddable = false;
};

// A route of an API: its path template, as docs/openapi.yaml writes it, and its methods, as an
// Allow header lists them ("GET, DELETE").
struct Route {
  std::string_view path;
  std::string_view methods;

  // Whether `method` is one of methods.
  bool allows(std::string_view method) const noexcept;
};

// A request target split into its percent-decoded path segments (the path "/a/b%20c" gives
// "a", "b c") and query parameters ('+' is a space there; a repeated name keeps the last).
struct RequestTarget {
  std::vector<std::string> segments;
  std::map<std::string, std::string> query;
};
// Throws Error(invalid_request) for a target that is not an absolute path or holds a malformed
// escape.
RequestTarget split_target(std::string_view target);
// Throws Error::invalid_request naming the parameter for one of `query` not in `names`.
void allow_only(const std::map<std::string, std::string>& query, std::initializer_list<std::string_view> names);
// A non-negative decimal integer; throws Error::invalid_request naming `field` otherwise.
std::uint64_t parse_uint(std::string_view text, std::string_view field);

// Must not throw; runs concurrently on worker threads.
using Handler = std::function<HttpResponse(const HttpRequest&)>;
// Renders a transport-level failure (oversized or malformed request) as a response.
using ErrorResponder = std::function<HttpResponse(int status, const std::string& message)>;

// Blocks SIGINT and SIGTERM on the calling thread and on the threads it starts afterwards. Call it
// first in main(): the signals then wait for HttpServer::run(), which takes them synchronously,
// however early they come and whichever thread is starting or ending meanwhile (an asynchronous
// handler can lose a signal that lands on a thread still starting, under ThreadSanitizer).
void block_shutdown_signals();

struct HttpServerOptions {
  std::string host = "127.0.0.1";
  unsigned short port = 8080;  // 0: any free port (see HttpServer::port())
  std::size_t io_threads = 1;
  std::size_t workers = 64;  // handler threads; blocking store calls wait here
  std::size_t max_body_bytes = 1 << 20;
  std::size_t max_header_bytes = 16 << 10;
  std::chrono::milliseconds read_timeout{15000};   // from a request's first byte to its last
  std::chrono::milliseconds idle_timeout{60000};   // keep-alive connection with no request
  // Open connections; one more is answered 503 and closed at once.
  std::size_t max_connections = 10000;
  // Bytes of response bodies being written at once; a sheddable response over 16 KiB that
  // would pass it is answered 503 instead.
  std::size_t max_response_bytes_in_flight = std::size_t{256} << 20;
};

// Counters of the transport, read any time (relaxed).
struct HttpStats {
  std::atomic<std::uint64_t> open_connections{0};
  std::atomic<std::uint64_t> rejected_connections{0};  // over max_connections
  std::atomic<std::uint64_t> accept_failures{0};       // accept() failed (e.g. out of descriptors)
  std::atomic<std::uint64_t> response_bytes_in_flight{0};
  std::atomic<std::uint64_t> shed_responses{0};        // sheddable responses answered 503
  std::atomic<std::uint64_t> rejected_requests{0};     // malformed, oversized or ambiguous framing
};

class HttpServer {
 public:
  // Binds and listens; throws std::system_error if it cannot.
  HttpServer(HttpServerOptions options, Handler handler, ErrorResponder error_responder);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  unsigned short port() const;
  const HttpStats& stats() const;
  // Serves until stop() or SIGINT/SIGTERM; then stops accepting, finishes the requests in
  // flight, closes idle connections and returns. A thread of run() waits for the signals
  // synchronously (see block_shutdown_signals).
  void run();
  // Thread-safe; may be called from a handler.
  void stop();

  struct Impl;  // defined in http_server.cpp, the one file that includes Beast

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace deviceshadow::server
