#include "server/log.hpp"

#include "deviceshadow/json.hpp"
#include "deviceshadow/timestamp.hpp"
#include "deviceshadow/validation.hpp"

#include <cstdio>

namespace deviceshadow::server {

void Logger::log(LogLevel level, std::string_view message, std::span<const Field> fields) {
  if (!enabled(level)) return;
  static constexpr const char* kNames[] = {"debug", "info", "warn", "error"};
  const char* name = kNames[static_cast<int>(level)];
  std::string line;
  std::string time = format_rfc3339(now());
  if (json_) {
    line = "{\"time\":\"" + time + "\",\"level\":\"" + name + "\",\"msg\":";
    append_json_string(line, message);
    for (const auto& [key, value] : fields) {
      line += ',';
      append_json_string(line, key);
      line += ':';
      append_json_string(line, to_valid_utf8(value));  // values may quote what a client sent
    }
    line += "}\n";
  } else {
    line = time + " " + name + " " + std::string(message);
    for (const auto& [key, value] : fields) line += " " + std::string(key) + "=" + value;
    line += '\n';
  }
  std::lock_guard lock(mutex_);
  std::fwrite(line.data(), 1, line.size(), stderr);
  std::fflush(stderr);
}

}  // namespace deviceshadow::server
