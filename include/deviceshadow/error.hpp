// The one error type of deviceshadow. Every fallible operation of the library throws
// deviceshadow::Error carrying one of the codes below (the table of codes, statuses and details is
// in docs/semantics.md, "Errors and limits"); the server converts it to
// HTTP in exactly one place (http_status() gives the status, the server renders the body).
#pragma once

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>

namespace deviceshadow {

enum class ErrorCode {
  invalid_json,
  invalid_request,
  invalid_name,
  invalid_timestamp,
  too_deep,
  invalid_filter,       // 400: a fleet-query filter that does not parse (offset, expected)
  query_too_expensive,  // 400: a query that would examine more shadows than its budget allows
  unauthorized,
  forbidden,
  not_found,
  history_expired,  // 410: the moment asked for needs history events retention removed
  method_not_allowed,  // 405: a known path with another method (Allow lists the methods)
  version_conflict,
  document_too_large,
  throttled,
  unavailable,
  internal,
};

// The wire name of a code, e.g. "invalid_json".
std::string_view code_name(ErrorCode code) noexcept;
// The HTTP status a code maps to; it depends on the code alone.
int http_status(ErrorCode code) noexcept;

// Machine-readable details rendered beside "code" and "message"; only the set ones appear.
struct ErrorDetails {
  std::string field;                           // request field at fault, e.g. "thing"
  std::string path;                            // JSON Pointer into a state, e.g. "/a/ts"
  std::optional<std::uint64_t> line;           // invalid_json: 1-based line
  std::optional<std::uint64_t> column;         // invalid_json: 1-based byte column
  std::optional<std::uint64_t> limit;          // the limit exceeded (too_deep, too large)
  std::optional<std::uint64_t> current_version;  // version_conflict
  std::string oldest_id;                       // history_expired: the oldest event kept ("oldest")
  std::int64_t oldest_ns = 0;
  std::optional<std::uint64_t> offset;         // invalid_filter: 0-based byte offset in the filter
  std::string expected;                        // invalid_filter: what the offset should hold
};

class Error : public std::runtime_error {
 public:
  Error(ErrorCode code, std::string message, ErrorDetails details = {});

  ErrorCode code() const noexcept { return code_; }
  const ErrorDetails& details() const noexcept { return details_; }

  // Factories, one per situation, so messages stay uniform.
  static Error invalid_json(std::string message, std::uint64_t line, std::uint64_t column);
  static Error invalid_request(std::string message, std::string field = {});
  static Error invalid_name(std::string field, std::string message);
  static Error invalid_timestamp(std::string path, std::string message);
  static Error too_deep(std::string path, std::uint64_t limit);
  static Error too_large(std::string what, std::uint64_t size, std::uint64_t limit);
  static Error version_conflict(std::uint64_t current_version, std::string message = {});
  static Error not_found(std::string message);
  // The oldest event kept is `oldest_id`, at `oldest_ns`.
  static Error history_expired(std::string message, std::string oldest_id, std::int64_t oldest_ns);
  // A filter (SPEC-style fleet query) that does not parse: at byte `offset`, `expected` was expected.
  static Error invalid_filter(std::uint64_t offset, std::string expected);
  // A query past its budget; `field` names a field whose index would make it cheap.
  static Error query_too_expensive(std::string message, std::string field);

 private:
  ErrorCode code_;
  ErrorDetails details_;
};

}  // namespace deviceshadow
