// The document core: timestamped values, merge, acknowledgement and delta as pure functions over
// JSON sections, no I/O, no clocks (docs/semantics.md describes the rules).
// All functions are reentrant; none keeps state between calls.
#pragma once

#include "deviceshadow/json.hpp"
#include "deviceshadow/timestamp.hpp"
#include "deviceshadow/validation.hpp"

#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace deviceshadow {

enum class Section { reported, desired };
constexpr Section other(Section s) noexcept { return s == Section::reported ? Section::desired : Section::reported; }
enum class MergeMode { server_is_master, client_is_master };
enum class ChangeOp { add, update, remove };

std::string_view to_string(Section s) noexcept;
std::string_view to_string(MergeMode m) noexcept;
std::string_view to_string(ChangeOp op) noexcept;
std::optional<Section> parse_section(std::string_view s) noexcept;
std::optional<MergeMode> parse_merge_mode(std::string_view s) noexcept;

// The configurable parts of the document rules.
struct DocumentOptions {
  TimestampKeys timestamp_keys;
  Limits limits;
};

// One changed leaf. A leaf is a timestamped value, a scalar, an array that is not merged
// element-wise, or an empty object; a node whose kind changes is one update of the node.
struct Change {
  Section section = Section::reported;
  ChangeOp op = ChangeOp::add;
  std::string path;                      // JSON Pointer relative to the section's state
  std::optional<json::value> old_value;  // absent for add
  std::optional<json::value> new_value;  // absent for remove
};

// A desired leaf removed because reported holds an equal value at the same path.
struct Acknowledgement {
  std::string path;
  json::value value;  // the desired leaf, as it was
};

// Appends {"section"?,"op","path","old"?,"new"?} as JSON; "section" only when with_section.
void append_json(std::string& out, const Change& c, bool with_section = true);
// Appends {"path","value"} as JSON.
void append_json(std::string& out, const Acknowledgement& a);

// Deep equality: numbers numerically (1 == 1.0 == 1e0), member order ignored, and an
// object that is a timestamped value on either side compared by payload (timestamp ignored).
bool values_equal(const json::value& a, const json::value& b, const TimestampKeys& keys);

// A timestamped value of an incoming state, its timestamp member and the instant it denotes.
// The pointers refer into the state: valid while the state is unmodified.
struct ParsedTimestamp {
  const json::object* value;
  const json::value* member;
  Timestamp instant;
};

// Checks an incoming state against the document rules and limits: depth (too_deep), timestamps
// (invalid_timestamp with the pointer of the timestamp member), duplicate array ids
// (invalid_request), non-finite numbers (invalid_json). Throws Error. Returns the timestamps
// it parsed, in document order, for merge_section.
std::vector<ParsedTimestamp> validate_state(const json::object& state, const DocumentOptions& options);

struct MergeResult {
  std::vector<Change> changes;
  std::vector<std::string> stale;  // paths of timestamped values not newer than stored
};

// Merges a validated incoming state into `stored` in place (docs/semantics.md, "Merge"). `incoming` is
// consumed: its values move into `stored`, which is a copy only when the two do not share a
// storage (pass it with std::move, in the same arena, to merge without copying). `parsed`,
// what validate_state returned for this same state (moving the object keeps its values in
// place), spares parsing its timestamps again; a timestamp not listed there is parsed.
// With replace_arrays, arrays are leaves: rule 6 is off and an array that differs is replaced
// whole (AWS IoT's rule). Complexity: linear in the size of both documents.
MergeResult merge_section(json::object& stored, json::object incoming, MergeMode mode, Section section,
                          const TimestampKeys& keys, std::span<const ParsedTimestamp> parsed = {},
                          bool replace_arrays = false);

// Removes from `desired` every leaf equal to its counterpart in `reported`, then the objects
// that became empty (never the root); returns the removed leaves in document order.
// Arrays are compared whole.
std::vector<Acknowledgement> acknowledge(json::object& desired, const json::object& reported,
                                         const TimestampKeys& keys);

// The desired leaves that differ from reported (AWS IoT delta semantics).
json::object compute_delta(const json::object& desired, const json::object& reported,
                           const TimestampKeys& keys);

// One write request against both sections of a shadow.
struct SectionWrite {
  Section section = Section::reported;
  MergeMode mode = MergeMode::server_is_master;
  bool acknowledge = true;
};

// An incoming state of a write and the section it merges into.
struct SectionInput {
  Section section = Section::reported;
  json::object state;
  MergeMode mode = MergeMode::server_is_master;
};

// The rules of a write as a whole.
struct WriteRules {
  bool acknowledge = true;
  bool replace_arrays = false;  // see merge_section
};

struct UpdateOutcome {
  json::object reported;
  json::object desired;
  bool reported_changed = false;
  bool desired_changed = false;
  // Merge changes of the written section, then desired removals by acknowledgement.
  std::vector<Change> changes;
  std::vector<Acknowledgement> acknowledged;
  // JSON Pointers of the timestamped values rejected as not newer: relative to the section
  // in a one-section write, from the document root ("/reported/…") in a two-section one.
  std::vector<std::string> stale;
  // Compact JSON of each changed section, as measured against the size limit; stores
  // persist it as is. Empty for an unchanged section.
  std::string reported_json;
  std::string desired_json;

  bool changed() const noexcept { return reported_changed || desired_changed; }
};

// The pure heart of a report or desire: validates `incoming`, merges it into its section,
// acknowledges desired against reported, and checks each changed section against
// limits.max_state_bytes (document_too_large). Throws Error; the inputs are then untouched
// because they were taken by value. New values live in the storage of the section they land
// in; a caller that runs a whole request in one arena passes all three there, moved, and
// nothing is copied (see merge_section).
UpdateOutcome apply_update(json::object reported, json::object desired, json::object incoming,
                           const SectionWrite& write, const DocumentOptions& options);
// The same for a write of one or two incoming states (distinct sections), merged in the order
// given and acknowledged once after all of them: the AWS IoT update of both sections at once.
UpdateOutcome apply_update(json::object reported, json::object desired, std::span<SectionInput> inputs,
                           const WriteRules& rules, const DocumentOptions& options);

}  // namespace deviceshadow
