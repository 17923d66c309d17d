#include "http/log.hpp"

#include "deviceshadow/ascii.hpp"
#include "deviceshadow/json.hpp"
#include "deviceshadow/timestamp.hpp"
#include "deviceshadow/validation.hpp"

#include <cstdio>
#include <utility>

namespace deviceshadow::http {
namespace {

// A value as a log line carries it: at most kMaxFieldBytes (a client cannot make lines long;
// the rest is counted), and in the text format control characters escaped as \xNN (a client
// cannot forge lines or send escape sequences to an operator's terminal).
constexpr std::size_t kMaxFieldBytes = 2048;

std::string bounded(std::string_view value, bool escape) {
  const std::string_view kept = value.substr(0, kMaxFieldBytes);
  std::string out = escape ? escape_controls(kept) : std::string(kept);
  if (value.size() > kept.size()) out += "…(+" + std::to_string(value.size() - kept.size()) + " bytes)";
  return out;
}

// A text-format value as logfmt writes one: quoted, with `"` and `\` escaped, when it is empty
// or holds a space, `=`, `"` or `\`, so that a value can never read as more fields.
std::string text_value(std::string_view value) {
  std::string v = bounded(value, true);
  if (!v.empty() && v.find_first_of(" =\"\\") == std::string::npos) return v;
  std::string out = "\"";
  for (char c : v) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out += '"';
}

}  // namespace

bool LogRateLimit::admit(std::uint64_t& suppressed) {
  const auto now = std::chrono::steady_clock::now();
  std::lock_guard lock(mutex_);
  if (now - window_start_ >= std::chrono::seconds(1)) {
    window_start_ = now;
    admitted_ = 0;
  }
  if (admitted_ >= per_second_) {
    ++suppressed_;
    return false;
  }
  ++admitted_;
  suppressed = std::exchange(suppressed_, 0);
  return true;
}

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
      append_json_string(line, to_valid_utf8(bounded(value, false)));  // values may quote what a client sent
    }
    line += "}\n";
  } else {
    line = time + " " + name + " " + std::string(message);
    for (const auto& [key, value] : fields) line += " " + std::string(key) + "=" + text_value(value);
    line += '\n';
  }
  std::lock_guard lock(mutex_);
  std::fwrite(line.data(), 1, line.size(), stderr);
  std::fflush(stderr);
}

}  // namespace deviceshadow::http
