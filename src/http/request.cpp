// Request targets and routes, shared by the APIs served on the listener (API v1, the AWS IoT
// facade).
#include "deviceshadow/ascii.hpp"
#include "deviceshadow/error.hpp"
#include "deviceshadow/uri.hpp"
#include "http/request.hpp"

#include <algorithm>
#include <charconv>

namespace deviceshadow::http {

const std::string* HttpRequest::header(std::string_view name) const {
  for (const auto& [n, v] : headers) {
    if (equals_ignoring_case(n, name)) return &v;
  }
  return nullptr;
}

ErrorCode refusal_code(int status) noexcept {
  switch (status) {
    case 413: return ErrorCode::document_too_large;
    case 503: return ErrorCode::unavailable;
    case 500: return ErrorCode::internal;
    default: return ErrorCode::invalid_request;
  }
}

std::string_view route_label(std::span<const Route> routes, const std::vector<std::string>& segments) noexcept {
  std::string_view best = "unmatched";
  std::size_t best_literals = 0;
  for (const Route& route : routes) {
    std::string_view rest = route.path.substr(1);  // after the leading '/'
    std::size_t i = 0, literals = 0;
    bool fits = true;
    for (; fits && !rest.empty(); ++i) {
      const std::size_t slash = rest.find('/');
      const std::string_view part = rest.substr(0, slash);
      rest = slash == std::string_view::npos ? std::string_view() : rest.substr(slash + 1);
      const bool placeholder = part.starts_with('{');
      fits = i < segments.size() && (placeholder || segments[i] == part);
      if (!placeholder) ++literals;
    }
    if (fits && i == segments.size() && (best == "unmatched" || literals > best_literals)) {
      best = route.path;
      best_literals = literals;
    }
  }
  return best;
}

bool Route::allows(std::string_view method) const noexcept {
  for (std::string_view rest = methods; !rest.empty();) {
    const std::size_t comma = rest.find(',');
    if (rest.substr(0, comma) == method) return true;
    rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 2);
  }
  return false;
}

void allow_only(const std::map<std::string, std::string>& query, std::initializer_list<std::string_view> names) {
  for (const auto& [key, value] : query) {
    if (std::find(names.begin(), names.end(), key) == names.end()) {
      throw Error::invalid_request("unknown query parameter '" + key + "'", key);
    }
  }
}

std::uint64_t parse_uint(std::string_view text, std::string_view field) {
  std::uint64_t v = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size() || text.empty()) {
    throw Error::invalid_request(std::string(field) + " must be a non-negative integer", std::string(field));
  }
  return v;
}

RequestTarget split_target(std::string_view target) {
  RequestTarget out;
  std::string_view path = target.substr(0, target.find('?'));
  if (path.empty() || path.front() != '/') throw Error::invalid_request("the request target must be an absolute path");
  for (std::size_t start = 1;;) {
    std::size_t slash = path.find('/', start);
    out.segments.push_back(percent_decode(path.substr(start, slash - start), false));
    if (slash == std::string_view::npos) break;
    start = slash + 1;
  }
  if (std::size_t q = target.find('?'); q != std::string_view::npos) {
    std::string_view rest = target.substr(q + 1);
    while (!rest.empty()) {
      std::string_view pair = rest.substr(0, rest.find('&'));
      rest = pair.size() < rest.size() ? rest.substr(pair.size() + 1) : std::string_view();
      if (pair.empty()) continue;
      std::size_t eq = pair.find('=');
      out.query[percent_decode(pair.substr(0, eq), true)] =
          eq == std::string_view::npos ? "" : percent_decode(pair.substr(eq + 1), true);
    }
  }
  return out;
}

}  // namespace deviceshadow::http
