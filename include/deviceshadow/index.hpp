// Declared indexes (docs/queries.md, "Indexes"): the typed values a store keeps per declared
// field and shadow, the ranges a query reads, and the hook by which the engine adds a write's
// index updates to the write itself. What a field's values are (the filter language's
// semantics) is decided in src/query, which implements Indexer; stores only keep and read them.
#pragma once

#include "deviceshadow/document.hpp"

#include <cstdint>
#include <mutex>
#include <optional>
#include <shared_mutex>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

namespace deviceshadow {

struct ShadowKey;
struct ShadowRecord;
struct ShadowWrite;

// One value of a field as comparisons see it. Values of different types never compare equal;
// within a type: booleans false < true, numbers numerically (1 = 1.0; integers exactly, other
// numbers as doubles), strings bytewise, times by their instant. A string holding an RFC 3339
// time is kept twice, as a string and as a time, because filters compare it with times too.
// `absent` is the one entry of a shadow that holds no value of the field: no comparison selects
// it; a sort lists such shadows last.
struct IndexValue {
  enum class Type : std::uint8_t { null = 0, boolean = 1, number = 2, string = 3, time = 4, absent = 5 };
  Type type = Type::null;
  std::int64_t integer = 0;  // boolean (0, 1), time (Unix ns), an integral number when !real
  double number = 0;         // a number when real
  bool real = false;         // the number is not an int64
  std::string text;          // string

  static IndexValue of_time(std::int64_t ns) { return {Type::time, ns, 0, false, {}}; }
  // Three-way comparison in the order above (types first).
  friend int compare(const IndexValue& a, const IndexValue& b) noexcept;
  friend bool operator==(const IndexValue& a, const IndexValue& b) noexcept { return compare(a, b) == 0; }
  friend bool operator<(const IndexValue& a, const IndexValue& b) noexcept { return compare(a, b) < 0; }
};

// How one shadow's entries of one declared field change: the values it no longer holds and
// those it now holds (a write changes only the entries that differ).
struct IndexUpdate {
  std::string field;
  std::vector<IndexValue> removed;
  std::vector<IndexValue> added;
};

// One entry a range read returns, in (value, thing, name) order.
struct IndexHit {
  IndexValue value;
  std::string thing, name;
};

// Values of one type between two bounds (a bound not given: unbounded within the type).
struct IndexRange {
  IndexValue::Type type = IndexValue::Type::null;
  std::optional<IndexValue> low, high;
  bool low_open = false, high_open = false;  // exclude the bound itself
  bool descending = false;                   // a read returns the entries in reverse order
  // Set: only entries before this one (in ascending order), so that reading one value within a
  // range of things stops where the things end rather than a page later.
  std::optional<IndexHit> end;

  bool contains(const IndexValue& v) const noexcept;
};

// A declared field as the store keeps it: building (existing shadows being indexed, `indexed`
// so far) or ready.
struct IndexFieldState {
  std::string field;
  bool ready = false;
  std::uint64_t indexed = 0;

  friend bool operator==(const IndexFieldState&, const IndexFieldState&) = default;
};

// The declared fields as a store keeps them. `generation` moves whenever the list of fields
// changes; a store that several processes share (DynamoDB) checks it on every write that carries
// index updates, so that no process indexes by a list another one has replaced. A store of one
// process keeps it at 0.
struct IndexDeclaration {
  std::vector<IndexFieldState> fields;
  std::uint64_t generation = 0;
};

// Thrown by a store when the declaration it was given a generation of has since been replaced by
// another process: read it again (Store::index_fields) and retry.
class IndexDeclarationChanged : public std::runtime_error {
 public:
  IndexDeclarationChanged() : std::runtime_error("the declared indexes changed in another process") {}
};

// Decides, for each write, what the declared indexes must store with it. Called by the engine
// under the shadow's write lock while it holds `hold()`, which a change of the declared fields
// waits for: a write either ends before the change or sees it.
class Indexer {
 public:
  virtual ~Indexer() = default;
  virtual std::shared_lock<std::shared_mutex> hold() = 0;
  // The updates `write` must carry, given the shadow as read (`before`) and the leaves the write
  // changes (`changes`; a removed section changes all of its leaves).
  virtual std::vector<IndexUpdate> updates(const ShadowKey& key, const ShadowRecord& before, const ShadowWrite& write,
                                           std::span<const Change> changes) = 0;
  // The declaration's generation the updates are decided by (under hold()); 0 before any
  // declaration. A write carries it as ShadowWrite::index_generation.
  virtual std::uint64_t generation() const = 0;
  // Reads the declaration again after a store threw IndexDeclarationChanged (without hold()).
  virtual void reload() = 0;
};

}  // namespace deviceshadow
