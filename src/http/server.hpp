// A small HTTP/1.1 server (Boost.Beast underneath, kept out of this header): keep-alive,
// pipelining-safe (one request at a time per connection, in order), request size limits,
// read timeouts, graceful shutdown. Handlers run on a worker pool, except the answers a service
// gives without waiting (Service::handle_inline), which run on the I/O thread that read the request.
//
// Hostile clients are bounded: every byte a request takes in memory (headers, chunk framing,
// trailers, body) counts against a limit; the read timeout runs from a request's first byte;
// framing that RFC 9112 makes ambiguous (Transfer-Encoding other than a single "chunked",
// Content-Length beside it or repeated) is answered 400 and the connection closed; connections
// are capped; responses waiting for slow readers are capped in bytes.
#pragma once

#include "http/log.hpp"
#include "http/request.hpp"

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace deviceshadow::http {

// An API served on the listener. The transport asks the router for a request's service as soon
// as it has the request's target, before it reads the body, so that every answer a client can
// get, its refusals included (an oversized body, 503 for slow readers, 500), is in the format
// of the API the client called. Both calls run concurrently on worker and I/O threads.
class Service {
 public:
  virtual ~Service() = default;
  // Must not throw.
  virtual HttpResponse handle(const HttpRequest& request) = 0;
  // The answer to a request refused by the transport: oversized, malformed, or shed.
  virtual HttpResponse refuse(int status, const std::string& message) const = 0;
  // The answer given on the I/O thread that read the request, skipping the two thread hops to
  // the worker pool and back, when the service can give it quickly and without waiting (no
  // network call, no lock held across slow work; a read from a local disk counts as quick);
  // nullopt hands the request to handle() on the worker pool. Every connection of that thread
  // waits meanwhile. Must not throw.
  virtual std::optional<HttpResponse> handle_inline(const HttpRequest& /*request*/) { return std::nullopt; }
};
// Picks the service of a request target (raw, still percent-encoded); "" when the target could
// not be read (headers too large, bad framing). Must return a service that outlives the server.
using Router = std::function<Service&(std::string_view target)>;

// For one service made of two functions.
using Handler = std::function<HttpResponse(const HttpRequest&)>;
using ErrorResponder = std::function<HttpResponse(int status, const std::string& message)>;
class FunctionService final : public Service {
 public:
  FunctionService(Handler handler, ErrorResponder refuse) : handler_(std::move(handler)), refuse_(std::move(refuse)) {}
  HttpResponse handle(const HttpRequest& request) override { return handler_(request); }
  HttpResponse refuse(int status, const std::string& message) const override { return refuse_(status, message); }

 private:
  Handler handler_;
  ErrorResponder refuse_;
};

// Blocks SIGINT, SIGTERM and SIGHUP on the calling thread and on the threads it starts
// afterwards. Call it first in main(): the signals then wait for HttpServer::run(), which takes
// them synchronously, however early they come and whichever thread is starting or ending
// meanwhile (an asynchronous handler can lose a signal that lands on a thread still starting,
// under ThreadSanitizer).
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
  // Where failures no handler reports go (a handler or stream that threw, a connection that
  // failed); null: a plain line on stderr.
  Logger* logger = nullptr;
};

// Counters of the transport, read any time (relaxed).
struct HttpStats {
  std::atomic<std::uint64_t> open_connections{0};
  std::atomic<std::uint64_t> open_streams{0};          // streamed responses (HttpResponse::stream)
  std::atomic<std::uint64_t> rejected_connections{0};  // over max_connections
  std::atomic<std::uint64_t> accept_failures{0};       // accept() failed (e.g. out of descriptors)
  std::atomic<std::uint64_t> response_bytes_in_flight{0};
  std::atomic<std::uint64_t> shed_responses{0};        // sheddable responses answered 503
  std::atomic<std::uint64_t> rejected_requests{0};     // malformed, oversized or ambiguous framing
};

class HttpServer {
 public:
  // Binds and listens; throws std::system_error if it cannot.
  HttpServer(HttpServerOptions options, Router router);
  // One service for every target.
  HttpServer(HttpServerOptions options, Handler handler, ErrorResponder error_responder);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  unsigned short port() const;
  const HttpStats& stats() const;
  // Serves until stop() or SIGINT/SIGTERM/SIGHUP; then stops accepting, finishes the requests in
  // flight, closes idle connections and returns. A thread of run() waits for the signals
  // synchronously (see block_shutdown_signals).
  void run();
  // Thread-safe; may be called from a handler.
  void stop();

  struct Impl;  // defined in server.cpp, the one file that includes Beast

 private:
  std::unique_ptr<FunctionService> only_service_;  // of the second constructor
  std::unique_ptr<Impl> impl_;
};

}  // namespace deviceshadow::http
