// Helpers shared by store implementations (not public API).
#pragma once

#include "deviceshadow/error.hpp"
#include "deviceshadow/event_id.hpp"
#include "deviceshadow/store.hpp"

#include <algorithm>
#include <utility>

namespace deviceshadow {

// Throws version_conflict if a section of `current` does not have the version `write` expects.
inline void check_conditions(const ShadowRecord& current, const ShadowWrite& write) {
  for (const SectionPut& put : write.sections) {
    const std::uint64_t stored = current.section(put.section).version;
    if (stored != put.expected_version) throw Error::version_conflict(stored);
  }
  for (const SectionCheck& check : write.checks) {
    const std::uint64_t stored = current.section(check.section).version;
    if (stored != check.expected_version) throw Error::version_conflict(stored);
  }
}

inline ShadowSummary summarize(std::string name, const ShadowRecord& r) {
  return {std::move(name), r.reported.version, r.desired.version,
          std::max(r.reported.timestamp_ns, r.desired.timestamp_ns)};
}

// The range of ids a history query's since and until allow, inclusive: an id starts with its
// time, so a store ordered by id walks only that range.
inline std::pair<std::string, std::string> history_id_range(const HistoryQuery& query) {
  return {event_id_time_prefix(query.since_ns),
          query.until_ns == INT64_MAX ? std::string("99999999999999999999~") : event_id_time_prefix(query.until_ns) + "~"};
}

}  // namespace deviceshadow
