// What the API's handlers, in api.cpp and streams.cpp, know of the request they serve.
#pragma once

#include "api/api.hpp"

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
};

}  // namespace deviceshadow::api
