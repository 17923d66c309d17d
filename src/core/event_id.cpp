#include "deviceshadow/event_id.hpp"

#include <algorithm>
#include <cstdio>

namespace deviceshadow {

std::string make_event_id(std::int64_t timestamp_ns, char letter, std::uint64_t version) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%020lld#%c%llu", static_cast<long long>(timestamp_ns), letter,
                static_cast<unsigned long long>(version));
  return buf;
}

std::string event_id_time_prefix(std::int64_t ns) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "%020lld", static_cast<long long>(std::max<std::int64_t>(ns, 0)));
  return buf;
}

std::optional<std::int64_t> event_id_time(std::string_view text) {
  auto digits = [](std::string_view s) { return std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; }); };
  if (text.size() < 23 || text.size() > kMaxEventIdBytes || text[20] != '#' ||
      std::string_view("RDCX").find(text[21]) == std::string_view::npos || !digits(text.substr(0, 20)) ||
      !digits(text.substr(22)) || text.substr(0, 20) > "09223372036854775807") {
    return std::nullopt;
  }
  std::int64_t ns = 0;
  for (char c : text.substr(0, 20)) ns = ns * 10 + (c - '0');
  return ns;
}

}  // namespace deviceshadow
