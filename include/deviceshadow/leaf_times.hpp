// Per-leaf change times of a section: when each leaf of its state last changed
// (docs/semantics.md, "Leaf times"). Pure functions, no clock: the caller passes the times.
//
// The stored form (SectionRecord::times_json) is compact JSON whose integers are Unix
// nanoseconds of the server clock, the clock of SectionRecord::timestamp_ns:
// - an integer at a node is the time of every leaf at or below it ("1737548546000000000"
//   alone: every leaf of the section changed then);
// - an object gives the times of the node's members, member by member;
// - a member it does not list, "" (data written before times were kept) and text that is not
//   such JSON all read as the section's timestamp_ns.
// A leaf is what the merge reports changes of (a timestamped value, a scalar, an array, an
// empty object; see Change), except that an array is always one leaf here: a change inside an
// array merged element by element dates the whole array. Tombstones keep no times ("").
#pragma once

#include "deviceshadow/document.hpp"

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

namespace deviceshadow {

// The times of `section` after one write. `previous` and `previous_ns` are the section's times
// and timestamp_ns before the write ("{}" for a section that did not exist), `state` its state
// after the write, `changes` the write's changes (UpdateOutcome::changes: those of the other
// section are skipped; acknowledgement removals count as the removals they are), `ts` the
// write's time. Leaves added or updated get `ts`, removed ones are dropped with the objects
// they leave empty (an object still in `state`, now an empty-object leaf, gets `ts`), every
// other leaf keeps its time; subtrees whose leaves share one time are stored as that one time.
// Returns `previous` unchanged when `changes` holds none of `section` and `previous` is not "".
std::string update_leaf_times(std::string_view previous, std::int64_t previous_ns, const json::object& state,
                              std::span<const Change> changes, Section section, std::int64_t ts);

enum class LeafTimeFormat {
  unix_nanos,  // an integer
  rfc3339,     // "2026-11-21T20:31:02.123456789Z", the form of API v1's "timestamp"
};

// Appends `state` mirrored with each leaf (timestamped value, scalar, array, empty object)
// replaced by its change time: the "metadata" of API v1. `times` and `section_ns` are the
// section's times_json and timestamp_ns.
void append_leaf_times(std::string& out, const json::object& state, std::string_view times, std::int64_t section_ns,
                       const TimestampKeys& keys, LeafTimeFormat format);

// Appends AWS IoT's "metadata" of one section: `state` mirrored with {"timestamp":<epoch
// seconds>} at each leaf (a scalar, an empty object, a timestamped value), and an array as the
// array of its elements' metadata, each element at the array's time.
void append_aws_metadata(std::string& out, const json::object& state, std::string_view times_json,
                         std::int64_t section_ns, const TimestampKeys& keys);

}  // namespace deviceshadow
