// What the APIs served on the listener (API v1, the AWS IoT facade) share: a request and a
// response as the transport hands them over, routes, and the parsing of request targets.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <map>
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

// The error code of a refusal by the transport with `status` (413: document_too_large, 503:
// unavailable, 500: internal, any other: invalid_request), for the services' renderers.
ErrorCode refusal_code(int status) noexcept;

}  // namespace deviceshadow::http
