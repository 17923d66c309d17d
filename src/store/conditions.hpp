// Helpers shared by store implementations (not public API).
#pragma once

#include "deviceshadow/error.hpp"
#include "deviceshadow/store.hpp"

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

}  // namespace deviceshadow
