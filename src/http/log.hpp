// Structured logging to stderr, one line per event, as JSON or as text. Thread-safe. A field's
// value is cut at 2 KiB (the rest counted) and, in the text format, its control characters are
// escaped, so that no client can make a line long or forge one.
#pragma once

#include <chrono>
#include <cstdint>
#include <initializer_list>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <utility>

namespace deviceshadow::http {

enum class LogLevel { debug, info, warn, error };

class Logger {
 public:
  using Field = std::pair<std::string_view, std::string>;

  Logger(LogLevel level = LogLevel::info, bool json = false) : level_(level), json_(json) {}
  bool enabled(LogLevel level) const { return level >= level_; }
  void log(LogLevel level, std::string_view message, std::initializer_list<Field> fields = {}) {
    log(level, message, std::span<const Field>(fields.begin(), fields.size()));
  }
  void log(LogLevel level, std::string_view message, std::span<const Field> fields);

 private:
  LogLevel level_;
  bool json_;
  std::mutex mutex_;
};

// Keeps a kind of line that clients can cause (refused signatures, …) to at most `per_second`
// lines a second; the lines left out are counted and told with the next one admitted.
// Thread-safe.
class LogRateLimit {
 public:
  explicit LogRateLimit(std::uint64_t per_second = 10) : per_second_(per_second) {}
  // Whether to log now; if so, `suppressed` is the number left out since the last one admitted.
  bool admit(std::uint64_t& suppressed);

 private:
  std::mutex mutex_;
  const std::uint64_t per_second_;
  std::chrono::steady_clock::time_point window_start_{};
  std::uint64_t admitted_ = 0;
  std::uint64_t suppressed_ = 0;
};

}  // namespace deviceshadow::http
