// What the API's handler files (api.cpp, history.cpp, queries.cpp, streams.cpp) share: the
// request context and the parsing of common query parameters. Not part of the API's interface.
#pragma once

#include "api/api.hpp"

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace deviceshadow::api {

// Everything known about one request while it is being served.
struct Api::Context {
  const HttpRequest& request;
  std::vector<std::string> segments;            // percent-decoded path segments
  std::map<std::string, std::string> query;     // percent-decoded
  std::string route = "unmatched";              // the route template, for metrics
  std::string allow;                            // the methods of the route, for a 405
  const Token* token = nullptr;
  bool must_not_wait = false;  // on an I/O thread: a handler that would wait throws WouldWait
};

HttpResponse json_response(int status, std::string body);
// limit: 1 to kMaxPageLimit, default kDefaultPageLimit; invalid_request otherwise.
std::size_t parse_limit(const std::map<std::string, std::string>& query);
// A page limit given some other way (a JSON member): 1 to kMaxPageLimit; invalid_request otherwise.
std::size_t checked_limit(std::uint64_t limit);
// "true" or "false"; invalid_request naming `field` otherwise.
bool parse_flag(const std::string& text, const char* field);
// since/until and the like: RFC 3339 or an epoch number (same magnitude rules as timestamped
// values), in Unix ns; invalid_request naming `field` otherwise.
std::int64_t parse_time(const std::string& text, const char* field);

}  // namespace deviceshadow::api
