// A request as the HTTP transport hands it to a service, for tests that call a service directly.
#pragma once

#include "http/request.hpp"

#include <string>
#include <utility>

inline deviceshadow::http::HttpRequest http_request(std::string method, std::string target) {
  deviceshadow::http::HttpRequest r;
  r.method = std::move(method);
  r.target = std::move(target);
  return r;
}
