// Structured logging to stderr, one line per event, as JSON or as text. Thread-safe.
#pragma once

#include <initializer_list>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <utility>

namespace deviceshadow::server {

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

}  // namespace deviceshadow::server
