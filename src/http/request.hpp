// What the APIs served on the listener (API v1, the AWS IoT facade) share: a request and a
// response as the transport hands them over, routes, and the parsing of request targets.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace deviceshadow {
enum class ErrorCode;
}

namespace deviceshadow::http {

struct HttpRequest {
  std::string method;  // "GET", "POST", …
  std::string target;  // raw path and query, still percent-encoded
  std::string authorization;
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;  // every header, as sent, in order

  // The value of the first header named `name` (case-insensitively), or nullptr.
  const std::string* header(std::string_view name) const;
};

// Bytes that many streams may queue at once without a copy each (a message rendered once).
using SharedBytes = std::shared_ptr<const std::string>;

// The body of a streamed response (HttpResponse::stream), pushed piece by piece from any
// thread after the status and headers are out. The bytes waiting for the client are bounded
// (HttpResponse::stream_buffer): a push past the bound is refused, so a producer learns that its
// reader is too slow and decides what to do (e.g. a last message, then finish()). A piece larger
// than the bound is taken when nothing waits, so that it can be sent at all.
class ResponseStream {
 public:
  enum class Push {
    queued,  // the bytes will be written
    full,    // not queued: the bytes waiting (some wait) would pass the bound
    ended,   // not queued: the stream has ended or is finishing
  };
  virtual ~ResponseStream() = default;
  // Queues bytes (not null) for the client, which they reach as they are now (the stream holds
  // them, not a copy: they must not change). Thread-safe, never blocks on the client.
  virtual Push push(SharedBytes bytes) = 0;
  // The same with a copy of `bytes`.
  Push push(std::string_view bytes) { return push(std::make_shared<const std::string>(bytes)); }
  // Ends the response after the bytes queued and then `last` (queued even past the bound);
  // later pushes are refused. A client that does not take them within the server's read
  // timeout is disconnected. Thread-safe; only the first call counts.
  virtual void finish(std::string_view last = {}) = 0;
  // True once the stream has ended or is finishing: finish() was called, the client went away
  // (or sent anything, which a streamed response does not expect), or the server is stopping.
  virtual bool ended() const = 0;
  // Blocks until at most `bytes` wait for the client, the stream ends, or `timeout` passes;
  // true in the first case. For producers with much to send (a replay), so that they fill the
  // bound at the client's pace instead of overflowing it.
  virtual bool wait_below(std::size_t bytes, std::chrono::milliseconds timeout) = 0;
  // Calls `callback` once when the stream ends for any reason (at once if it has); on a
  // transport thread, never from within push() or finish(): it must be quick and must not call
  // push() or finish() of this stream.
  virtual void on_end(std::function<void()> callback) = 0;
};

struct HttpResponse {
  int status = 200;
  std::string content_type = "application/json";
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;  // extra headers
  // A read with no effect: when too many response bytes already wait for slow clients, the
  // server may answer 503 instead of queueing this body (writes are always answered).
  bool sheddable = false;
  // A streamed response (Server-Sent Events): when set, `body` is ignored; the transport sends
  // the status and headers (chunked on HTTP/1.1; the connection closes when the stream ends),
  // then calls `stream` on a worker thread, where it may block (e.g. to replay), with the
  // response's stream. The function is destroyed once it returned or the client went away
  // before the headers were out: a producer keeps its resources in it and in on_end.
  std::function<void(std::shared_ptr<ResponseStream>)> stream;
  std::size_t stream_buffer = std::size_t{1} << 20;  // bytes that may wait for the client
};

// A route of an API: its path template, as docs/openapi.yaml writes it, and its methods, as an
// Allow header lists them ("GET, DELETE").
struct Route {
  std::string_view path;
  std::string_view methods;

  // Whether `method` is one of methods.
  bool allows(std::string_view method) const noexcept;
};

// The path of the route whose template the segments fit (a "{…}" segment fits any one; the
// template with the most literal segments wins), or "unmatched": a metrics label for a request
// refused before it was routed (a missing token, a bad signature).
std::string_view route_label(std::span<const Route> routes, const std::vector<std::string>& segments) noexcept;

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

// The error code of a refusal by the transport with `status` (413: document_too_large, 503:
// unavailable, 500: internal, any other: invalid_request), for the services' renderers.
ErrorCode refusal_code(int status) noexcept;

}  // namespace deviceshadow::http
