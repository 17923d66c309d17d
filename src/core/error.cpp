#include "deviceshadow/error.hpp"

namespace deviceshadow {

std::string_view code_name(ErrorCode code) noexcept {
  switch (code) {
    case ErrorCode::invalid_json: return "invalid_json";
    case ErrorCode::invalid_request: return "invalid_request";
    case ErrorCode::invalid_name: return "invalid_name";
    case ErrorCode::invalid_timestamp: return "invalid_timestamp";
    case ErrorCode::too_deep: return "too_deep";
    case ErrorCode::invalid_filter: return "invalid_filter";
    case ErrorCode::query_too_expensive: return "query_too_expensive";
    case ErrorCode::unauthorized: return "unauthorized";
    case ErrorCode::forbidden: return "forbidden";
    case ErrorCode::not_found: return "not_found";
    case ErrorCode::history_expired: return "history_expired";
    case ErrorCode::method_not_allowed: return "method_not_allowed";
    case ErrorCode::version_conflict: return "version_conflict";
    case ErrorCode::document_too_large: return "document_too_large";
    case ErrorCode::throttled: return "throttled";
    case ErrorCode::unavailable: return "unavailable";
    case ErrorCode::internal: return "internal";
  }
  return "internal";
}

int http_status(ErrorCode code) noexcept {
  switch (code) {
    case ErrorCode::invalid_json:
    case ErrorCode::invalid_request:
    case ErrorCode::invalid_name:
    case ErrorCode::invalid_timestamp:
    case ErrorCode::too_deep:
    case ErrorCode::invalid_filter:
    case ErrorCode::query_too_expensive: return 400;
    case ErrorCode::unauthorized: return 401;
    case ErrorCode::forbidden: return 403;
    case ErrorCode::not_found: return 404;
    case ErrorCode::history_expired: return 410;
    case ErrorCode::method_not_allowed: return 405;
    case ErrorCode::version_conflict: return 409;
    case ErrorCode::document_too_large: return 413;
    case ErrorCode::throttled: return 429;
    case ErrorCode::unavailable: return 503;
    case ErrorCode::internal: return 500;
  }
  return 500;
}

Error::Error(ErrorCode code, std::string message, ErrorDetails details)
    : std::runtime_error(std::move(message)), code_(code), details_(std::move(details)) {}

Error Error::invalid_json(std::string message, std::uint64_t line, std::uint64_t column) {
  ErrorDetails d;
  d.line = line;
  d.column = column;
  return Error(ErrorCode::invalid_json,
               message + " at line " + std::to_string(line) + ", column " + std::to_string(column),
               std::move(d));
}

Error Error::invalid_request(std::string message, std::string field) {
  ErrorDetails d;
  d.field = std::move(field);
  return Error(ErrorCode::invalid_request, std::move(message), std::move(d));
}

Error Error::invalid_name(std::string field, std::string message) {
  ErrorDetails d;
  d.field = field;
  return Error(ErrorCode::invalid_name, field + ": " + message, std::move(d));
}

Error Error::invalid_timestamp(std::string path, std::string message) {
  ErrorDetails d;
  d.path = path;
  return Error(ErrorCode::invalid_timestamp, "invalid timestamp at " + path + ": " + message,
               std::move(d));
}

Error Error::too_deep(std::string path, std::uint64_t limit) {
  ErrorDetails d;
  d.path = path;
  d.limit = limit;
  return Error(ErrorCode::too_deep,
               "nesting deeper than " + std::to_string(limit) + " levels" + (path.empty() ? "" : " at " + path), std::move(d));
}

Error Error::too_large(std::string what, std::uint64_t size, std::uint64_t limit) {
  ErrorDetails d;
  d.limit = limit;
  return Error(ErrorCode::document_too_large,
               what + " is " + std::to_string(size) + " bytes, over the limit of " +
                   std::to_string(limit),
               std::move(d));
}

Error Error::version_conflict(std::uint64_t current_version, std::string message) {
  ErrorDetails d;
  d.current_version = current_version;
  if (message.empty()) message = "version conflict: current version is " + std::to_string(current_version);
  return Error(ErrorCode::version_conflict, std::move(message), std::move(d));
}

Error Error::not_found(std::string message) {
  return Error(ErrorCode::not_found, std::move(message));
}

Error Error::history_expired(std::string message, std::string oldest_id, std::int64_t oldest_ns) {
  ErrorDetails d;
  d.oldest_id = std::move(oldest_id);
  d.oldest_ns = oldest_ns;
  return Error(ErrorCode::history_expired, std::move(message), std::move(d));
}

Error Error::invalid_filter(std::uint64_t offset, std::string expected) {
  ErrorDetails d;
  d.offset = offset;
  d.expected = expected;
  return Error(ErrorCode::invalid_filter, "invalid filter at offset " + std::to_string(offset) + ": expected " + expected,
               std::move(d));
}

Error Error::query_too_expensive(std::string message, std::string field) {
  ErrorDetails d;
  d.field = std::move(field);
  return Error(ErrorCode::query_too_expensive, std::move(message), std::move(d));
}

}  // namespace deviceshadow
