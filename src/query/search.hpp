// Search and count over a Store: the planner reads the candidates of the most selective
// comparison a declared index serves, or the things the filter names, or else examines shadows
// one by one within a budget of shadows examined per query (docs/queries.md, "How a query reads").
#pragma once

#include "deviceshadow/engine.hpp"
#include "query/filter.hpp"
#include "query/index.hpp"

#include <functional>
#include <span>

namespace deviceshadow::query {

struct QueryOptions {
  std::size_t budget = 200000;      // shadows one query may examine (--query-budget)
  bool budget_always = false;       // the budget holds a narrowed query too (an aggregate keeps what it reads)
  bool scan_needs_consent = false;  // DynamoDB: reading every thing needs allowScan=true
  IndexKeeper* indexes = nullptr;  // the declared indexes, used once ready; null: none
};

// The ranges of things to read, sorted, none inside another: those the filter can match
// (nullopt: all) that the token's patterns cover (empty: every thing).
std::vector<ThingRange> plan(const std::optional<std::vector<ThingRange>>& wanted, std::span<const ThingPattern> scope);

// The least text above every one that starts with `prefix`, as valid UTF-8 (DynamoDB's keys
// must be): `prefix` with its last character raised by one. None when there is none to give
// (empty, not valid UTF-8, or ending in U+10FFFF).
std::optional<std::string> after_every(std::string_view prefix);

struct Scan {
  const Filter& filter;
  std::span<const ThingPattern> scope;  // the token's patterns; empty: every thing
  std::optional<ShadowKey> after;       // resume after this shadow (a cursor's)
  bool allow_scan = false;              // the caller consents to reading every thing
};

// Calls `match` with each live shadow the filter matches, in (thing, name) order, until it
// returns false. Throws query_too_expensive, reading nothing more, when a filter that names no
// things and that no ready index serves (or any filter, with budget_always) would examine more
// than options.budget shadows, when an index plan that is not one value would gather more
// candidates than that, or (scan_needs_consent) when it would read every thing without
// allow_scan. Returns the number of shadows examined.
std::size_t scan(Store& store, const TimestampKeys& keys, const Scan& scan, const QueryOptions& options,
                 const std::function<bool(const Subject&)>& match);

// A search's order by a declared field: each shadow at its least value of the field (its
// greatest when descending); ties by thing, then name (reversed when descending). Shadows that
// hold no value of the field come last, by thing then name.
struct Sort {
  std::string field;
  bool descending = false;
};
// Where a sorted search stopped: the last shadow listed and the value it was listed at.
struct SortPosition {
  IndexValue value;
  ShadowKey key;
};

// As scan(), in `sort`'s order, reading the field's index (ready) from its first entry, or
// after `after`: every entry read is a shadow examined. The matches holding no value of the
// field come last, by thing and name, in either direction.
std::size_t sorted_scan(Store& store, const TimestampKeys& keys, const Scan& scan, const Sort& sort,
                        const std::optional<SortPosition>& after, const QueryOptions& options,
                        const std::function<bool(const Subject&, const IndexValue&)>& match);

// How many live shadows the filter matches. A filter that is one comparison a ready index
// serves is counted from the index's entries alone; any other as scan() does.
std::uint64_t count(Store& store, const TimestampKeys& keys, const Scan& scan, const QueryOptions& options);

}  // namespace deviceshadow::query
