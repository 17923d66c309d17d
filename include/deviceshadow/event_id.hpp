// History event ids (docs/semantics.md, "History"): "{Unix ns, 20 digits}#{letter}{version}",
// letter R (a write of reported), D (of desired), C (of both) or X (a delete), version that of
// the first section written. Unique within a shadow; they compare bytewise in time order.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace deviceshadow {

inline constexpr std::size_t kMaxEventIdBytes = 42;  // 20 digits, '#', a letter, a uint64

std::string make_event_id(std::int64_t timestamp_ns, char letter, std::uint64_t version);

// The 20 digits an id at time `ns` starts with (0 for times before 1970): at or below every id
// at that time and after, and above every id before it.
std::string event_id_time_prefix(std::int64_t ns);

// The time of an event id; nullopt when `text` is not one (its time past int64, its version
// past 20 digits, another letter).
std::optional<std::int64_t> event_id_time(std::string_view text);

inline bool is_event_id(std::string_view text) { return event_id_time(text).has_value(); }

}  // namespace deviceshadow
