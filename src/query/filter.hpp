// The filter language of fleet queries (docs/queries.md): a parser that reports the byte offset
// of the first fault and what it expected there, and the evaluation of a parsed filter against
// one stored shadow. Pure: no store, no clock (the caller passes "now").
#pragma once

#include "deviceshadow/document.hpp"
#include "deviceshadow/engine.hpp"
#include "deviceshadow/index.hpp"
#include "deviceshadow/store.hpp"

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace deviceshadow::query {

struct FilterLimits {
  std::size_t max_bytes = 4096;
  std::size_t max_comparisons = 64;  // eq, ne, gt, ge, lt, le, in, like, exists
  std::size_t max_depth = 16;        // nested calls, the outermost one at depth 1
  std::size_t max_in_values = 100;
};

// A property a filter compares or a projection (`fields`) shows.
struct Property {
  enum class Kind { thing, name, reported, desired, delta, reported_version, desired_version, modified, pending };
  enum class Suffix { none, ts, changed };  // <section>/<path>@ts, <section>/<path>@changed

  Kind kind = Kind::thing;
  std::vector<std::string> path;  // reported/desired/delta: the decoded reference tokens
  Suffix suffix = Suffix::none;
  std::string text;               // as written

  bool in_section() const noexcept { return kind == Kind::reported || kind == Kind::desired || kind == Kind::delta; }
};

// One property as written in a request's `field` (`fields`, `groupBy`, …; no quotes). Throws
// invalid_request naming `field`.
Property parse_property(std::string_view text, std::string_view field = "fields");

// One stored shadow as filters and projections see it; its states, delta and leaf times are
// parsed on first use.
class Subject {
 public:
  Subject(const ShadowKey& key, const ShadowRecord& record, const TimestampKeys& keys);
  ~Subject();

  const ShadowKey& key() const noexcept { return key_; }
  const ShadowRecord& record() const noexcept { return record_; }
  const TimestampKeys& timestamp_keys() const noexcept { return keys_; }
  // The state of a live section, or an empty object.
  const json::object& state(Section section) const;
  const json::object& delta() const;
  // When the server last changed the leaf at `path` of a section (leaf_times.hpp), Unix ns.
  std::int64_t leaf_time(Section section, const std::vector<std::string>& path) const;
  // The later of the live sections' timestamps (0 when none is live).
  std::int64_t modified_ns() const noexcept;

 private:
  const ShadowKey& key_;
  const ShadowRecord& record_;
  const TimestampKeys& keys_;
  mutable std::optional<json::object> states_[2];
  mutable std::optional<json::object> delta_;
  mutable std::optional<json::value> times_[2];
};

// Appends the JSON of `property` in `subject` (a section alone: its view as GET shows it; a
// path: the value there, a timestamped value whole; @ts, @changed and _modified: RFC 3339).
// Returns false, appending nothing, when the shadow has no such value.
bool append_property(std::string& out, const Subject& subject, const Property& property);

// One value a property holds, as comparisons see it: a timestamped value by its value, an
// array element by element; @ts, @changed and _modified are times.
struct Sample {
  enum class Type { null, boolean, number, string, time, other } type = Type::other;
  json::value json;       // null, boolean, number, string: the value
  Timestamp time;         // Type::time (any instant a write may hold; indexes keep it as Unix ns)
};
std::vector<Sample> samples(const Subject& subject, const Property& property);
// The samples of one value a section path holds (`samples` of such a path, without the shadow).
std::vector<Sample> samples_of(const json::value& value, const TimestampKeys& keys);

// A range of things a filter can only match within: one exact name or every name with a prefix
// (the shape of a token's thing pattern, whose `matches` says whether a thing lies in it).
using ThingRange = ThingPattern;

// Bounds every thing a filter can match lies within (gt, ge, lt, le on `thing`).
struct ThingBounds {
  std::optional<std::string> low, high;
  bool low_open = false, high_open = false;
  bool below(std::string_view thing) const noexcept { return low && (low_open ? thing <= *low : thing < *low); }
  bool above(std::string_view thing) const noexcept { return high && (high_open ? thing >= *high : thing > *high); }
};

// Whether a declared index can hold `p` (PUT /v1/index): a reported or desired path (optionally
// @ts or @changed), `name` or a pseudo field.
bool indexable(const Property& p) noexcept;

// A JSON number as index entries and ranges hold it: exactly when it is an int64, else as a
// double (IndexValue's number order).
IndexValue index_number(const json::value& number);

// What every match of a filter must pass that declared indexes can select: a comparison, as the
// index ranges whose entries hold every value it accepts (IndexRange per type; a string holding
// an RFC 3339 time is also a time), or an `or` of such comparisons, as the union of theirs.
struct IndexableComparison {
  struct Part {
    const Property* property;        // the filter's own, alive while the filter is
    std::vector<IndexRange> ranges;  // empty: nothing can match
  };
  std::vector<Part> parts;  // one comparison; each member of an `or`
  // The ranges hold exactly the values accepted; not so for a `like` with a wildcard before its
  // end (its literal prefix's range), whose candidates must be tested.
  bool exact = true;
  bool whole = false;  // the filter is this alone and exact: its entries are exactly the matches
};

class Filter {
 public:
  struct Node;

  // The filter that matches every shadow.
  Filter();
  // Parses `text`; time:now is `now_ns`. Throws Error::invalid_filter (offset, expected).
  static Filter parse(std::string_view text, std::int64_t now_ns, const FilterLimits& limits = {});

  bool matches(const Subject& subject) const;

  // The things the filter can match, when a comparison every match must pass selects them by
  // name (eq, in, or like with a literal prefix on `thing`); nullopt: any thing.
  std::optional<std::vector<ThingRange>> thing_ranges() const;
  // The range of things the comparisons every match must pass allow (gt, ge, lt, le on
  // `thing` with a string; a lower bound of "" bounds nothing); nullopt: none bounds them.
  std::optional<ThingBounds> thing_bounds() const;
  // The fields (indexable()) whose indexes would let the filter read less, each once: first
  // those a match must pass (under the top-level and), then the others, in the order the filter
  // names them; empty when it compares none.
  std::vector<std::string> fields_to_index() const;
  // The comparisons under the filter's top-level and (or the filter itself) that an index on
  // their property could select: eq, in, gt, ge, lt, le, and like with a literal prefix, on
  // `name`, a section path or a pseudo field; and each `or` there whose members all are such
  // comparisons (or such `or`s).
  std::vector<IndexableComparison> indexable() const;

 private:
  std::shared_ptr<const Node> root_;
};

}  // namespace deviceshadow::query
