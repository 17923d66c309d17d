#include "query/search.hpp"

#include "deviceshadow/error.hpp"
#include "deviceshadow/validation.hpp"

#include <algorithm>
#include <tuple>

namespace deviceshadow::query {
namespace {

constexpr std::size_t kChunk = 100;  // things and shadows listed per store call

std::optional<ThingRange> intersect(const ThingRange& a, const ThingRange& b) {
  if (!a.prefix && !b.prefix) return a.text == b.text ? std::optional(a) : std::nullopt;
  if (a.prefix && b.prefix) {
    if (a.text.starts_with(b.text)) return a;
    if (b.text.starts_with(a.text)) return b;
    return std::nullopt;
  }
  const ThingRange& exact = a.prefix ? b : a;
  const ThingRange& prefix = a.prefix ? a : b;
  return exact.text.starts_with(prefix.text) ? std::optional(exact) : std::nullopt;
}

// Names the first field the filter compares that has no ready index (`thing` when there is
// none): declaring it, or waiting for its build, is what would let the query read less.
[[noreturn]] void too_expensive(const Filter& filter, std::string_view why, const IndexKeeper* indexes) {
  const std::vector<std::string> fields = filter.fields_to_index();
  const auto unready = std::find_if(fields.begin(), fields.end(), [&](const std::string& f) { return !indexes || !indexes->ready(f); });
  std::string advice;
  if (unready != fields.end()) {
    const std::vector<IndexFieldState> declared_fields = indexes ? indexes->status() : std::vector<IndexFieldState>();
    const bool declared = std::any_of(declared_fields.begin(), declared_fields.end(),
                                      [&](const IndexFieldState& f) { return f.field == *unready; });
    advice = declared ? ", or wait until the index on " + *unready + " is built (GET /v1/index)"
                      : ", or declare an index on " + *unready + " (PUT /v1/index)";
  }
  const std::string field = unready != fields.end() ? *unready : fields.empty() ? "thing" : fields.front();
  throw Error::query_too_expensive(
      std::string(why) + "; narrow it by thing (eq, in, a range, or like with a literal prefix on thing)" + advice, field);
}

[[noreturn]] void over_budget(const Filter& filter, const QueryOptions& options) {
  too_expensive(filter, "this query would examine more than " + std::to_string(options.budget) + " shadows (--query-budget)",
                options.indexes);
}

constexpr std::size_t kHitPage = 1000;  // index entries read per store call

// A range holding one value: its entries come in (thing, name) order.
bool single_value(const IndexRange& r) {
  return r.low && r.high && !r.low_open && !r.high_open && *r.low == *r.high;
}

// Where a query's matches can lie: its thing ranges (plan(), so within the token's patterns),
// within the filter's bounds.
struct Things {
  std::vector<ThingRange> ranges;
  std::optional<ThingBounds> bounds;

  // Reading them reads every thing of the table.
  bool every() const {
    return !bounds && std::any_of(ranges.begin(), ranges.end(), [](const ThingRange& r) { return r.prefix && r.text.empty(); });
  }
  bool contain(std::string_view thing) const {
    return !(bounds && (bounds->below(thing) || bounds->above(thing))) &&
           std::any_of(ranges.begin(), ranges.end(), [&](const ThingRange& r) { return r.matches(thing); });
  }
};

// Calls `visit(thing, after_name)` with each thing of `things` from `after`'s on (its shadows
// after `after`'s name, every shadow of the others), in order, until it returns false; false then.
bool each_thing(Store& store, const Things& things, const ShadowKey* after,
                const std::function<bool(const std::string&, const std::string&)>& visit) {
  const std::optional<ThingBounds>& bounds = things.bounds;
  for (const ThingRange& r : things.ranges) {
    if (!r.prefix) {
      if ((after && r.text < after->thing) || (bounds && (bounds->below(r.text) || bounds->above(r.text)))) continue;
      if (!visit(r.text, after && r.text == after->thing ? after->name : "")) return false;
      continue;
    }
    std::string last;  // list things after it
    if (after && !(bounds && bounds->below(after->thing))) {
      last = after->thing;
      if (after->thing.starts_with(r.text) && !visit(after->thing, after->name)) return false;
    } else if (bounds && bounds->low && *bounds->low > r.text) {  // start at the range's lower bound
      last = *bounds->low;
      if (!bounds->low_open && last.starts_with(r.text) && !visit(last, "")) return false;
    }
    for (bool more = true; more;) {
      const std::vector<std::string> listed = store.list_things(r.text, last, kChunk);
      more = listed.size() == kChunk;
      for (const std::string& thing : listed) {
        if (bounds && bounds->above(thing)) {
          more = false;
          break;
        }
        if (!visit(thing, "")) return false;
      }
      if (more) last = listed.back();
    }
  }
  return true;
}

// The entries of `c`'s ranges, counted up to `cap`.
std::uint64_t count_entries(Store& store, const IndexableComparison& c, std::uint64_t cap) {
  std::uint64_t n = 0;
  for (const IndexableComparison::Part& p : c.parts) {
    for (const IndexRange& r : p.ranges) {
      if (n < cap) n += store.index_count(p.property->text, r, cap - n);
    }
  }
  return n;
}

// An indexable comparison (or `or` of them) a query reads, and its entries when choosing
// counted them (up to the budget + 1).
struct Choice {
  const IndexableComparison* comparison = nullptr;
  std::optional<std::uint64_t> entries;
};

// The comparison ready indexes serve that selects the fewest entries (counted up to the budget
// when there are several to choose from); none: then the filter's thing ranges are the plan.
Choice choose(Store& store, const std::vector<IndexableComparison>& comparisons, const QueryOptions& options) {
  std::vector<const IndexableComparison*> served;
  for (const IndexableComparison& c : comparisons) {
    if (options.indexes && std::all_of(c.parts.begin(), c.parts.end(), [&](const IndexableComparison::Part& p) {
          return options.indexes->ready(p.property->text);
        })) {
      served.push_back(&c);
    }
  }
  if (served.size() <= 1) return {served.empty() ? nullptr : served.front(), std::nullopt};
  Choice best;
  for (const IndexableComparison* c : served) {
    // Past the fewest so far a count need not go on; the one that beats it is counted exactly.
    const std::uint64_t n = count_entries(store, *c, best.comparison ? *best.entries : options.budget + 1);
    if (!best.comparison || n < *best.entries) best = {c, n};
  }
  return best;
}

// The one range of a comparison holding one value, or null.
const IndexRange* single_value_range(const IndexableComparison& c) {
  if (c.parts.size() != 1 || c.parts.front().ranges.size() != 1) return nullptr;
  const IndexRange& r = c.parts.front().ranges.front();
  return single_value(r) ? &r : nullptr;
}

// Above every shadow name, whose characters all lie below DEL: (thing, this) follows each of
// thing's shadows.
constexpr std::string_view kAfterEveryShadowName = "\x7f";

// Where the entries of value `v` in thing range `t` within `bounds` end (IndexRange::end), or
// none: then a read stops by what it finds. An end is built only from text a thing may hold
// (is_thing_text): other text could sort apart from the things in a store's keys (DynamoDB's join
// thing and name with \x01, and must be valid UTF-8).
std::optional<IndexHit> end_of(const IndexValue& v, const ThingRange& t, const std::optional<ThingBounds>& bounds) {
  std::optional<IndexHit> end;
  if (is_thing_text(t.text)) {
    if (!t.prefix) {
      end = IndexHit{v, t.text, std::string(kAfterEveryShadowName)};
    } else if (std::optional<std::string> above = after_every(t.text)) {
      end = IndexHit{v, std::move(*above), ""};
    }
  }
  if (bounds && bounds->high && is_thing_text(*bounds->high)) {
    IndexHit high{v, *bounds->high, bounds->high_open ? "" : std::string(kAfterEveryShadowName)};
    if (!end || std::tie(high.thing, high.name) < std::tie(end->thing, end->name)) end = std::move(high);
  }
  return end;
}

// Reads the entries of `field` in `r`, a range holding one value, whose things lie in `things`,
// after `after`: one value's entries come in (thing, name) order, so each thing range is read
// from its first entry to its last (IndexRange::end, or until an entry lies past it). Calls
// `visit` with the keys of each page read, until it returns false; false then.
bool read_one_value(Store& store, const std::string& field, const IndexRange& r, const Things& things, const ShadowKey* after,
                    const std::function<bool(std::vector<ShadowKey>&)>& visit) {
  for (const ThingRange& t : things.ranges) {
    ShadowKey start{t.text, ""};  // names are never empty: what follows (thing, "") is all of thing
    if (things.bounds && things.bounds->low && *things.bounds->low > start.thing) start.thing = *things.bounds->low;
    if (after && *after > start) start = *after;
    if (!t.matches(start.thing)) continue;  // the range ends before it
    IndexRange within = r;
    within.end = end_of(*r.low, t, things.bounds);
    IndexHit from{*r.low, start.thing, start.name};
    // Pages grow from 10 entries unless the things are every thing: a search that wants a page
    // of a large range reads little more than it (on DynamoDB a page from each index shard).
    for (std::size_t page = things.every() ? kHitPage : 10;; page = std::min(page * 10, kHitPage)) {
      const std::vector<IndexHit> hits = store.index_range(field, within, &from, page);
      bool past = hits.size() < page;
      std::vector<ShadowKey> keys;
      for (const IndexHit& h : hits) {
        if (!t.matches(h.thing) || (things.bounds && things.bounds->above(h.thing))) {
          past = true;
          break;
        }
        if (things.contain(h.thing)) keys.push_back({h.thing, h.name});
      }
      if (!keys.empty() && !visit(keys)) return false;
      if (past) break;
      from = hits.back();
    }
  }
  return true;
}

// Calls `visit` with the keys of the shadows `c` selects in `things`, after
// `after`, in (thing, name) order, in chunks, until it returns false. A single value is read
// page by page; anything else (ranges, several values, the members of an `or`) is read whole (at
// most `limit` keys, else `too_many` is called), sorted and rid of repeats.
void candidates(Store& store, const IndexableComparison& c, const Things& things, const std::optional<ShadowKey>& after, std::uint64_t limit, const std::function<void()>& too_many,
                const std::function<bool(std::vector<ShadowKey>&)>& visit) {
  const ShadowKey* resume = after ? &*after : nullptr;
  if (const IndexRange* single = single_value_range(c)) {
    read_one_value(store, c.parts.front().property->text, *single, things, resume, visit);
    return;
  }
  std::vector<ShadowKey> all;
  auto distinct = [&] {
    std::sort(all.begin(), all.end());
    all.erase(std::unique(all.begin(), all.end()), all.end());
  };
  auto bounded = [&] {
    if (all.size() > limit) {  // members of an `or` may select the same shadows: count each once
      distinct();
      if (all.size() > limit) too_many();
    }
  };
  auto read = [&](const std::string& field, const IndexRange& r) {
    if (single_value(r)) {
      read_one_value(store, field, r, things, resume, [&](std::vector<ShadowKey>& keys) {
        all.insert(all.end(), keys.begin(), keys.end());
        bounded();
        return true;
      });
      return;
    }
    std::optional<IndexHit> from;
    for (;;) {
      std::vector<IndexHit> hits = store.index_range(field, r, from ? &*from : nullptr, kHitPage);
      for (const IndexHit& h : hits) {
        if (things.contain(h.thing) && (!after || std::tie(h.thing, h.name) > std::tie(after->thing, after->name))) {
          all.push_back({h.thing, h.name});
        }
      }
      bounded();
      if (hits.size() < kHitPage) return;
      from = std::move(hits.back());
    }
  };
  for (const IndexableComparison::Part& part : c.parts) {
    for (const IndexRange& r : part.ranges) read(part.property->text, r);
  }
  distinct();
  for (std::size_t i = 0; i < all.size(); i += kHitPage) {
    std::vector<ShadowKey> chunk(all.begin() + static_cast<std::ptrdiff_t>(i),
                                 all.begin() + static_cast<std::ptrdiff_t>(std::min(all.size(), i + kHitPage)));
    if (!visit(chunk)) return;
  }
}

// Whether `things` holds fewer things (from `after`'s on) than `c` has entries, both counted up
// to the budget: then reading the things reads less. Not asked of a comparison whose every range
// is one value, whose entries are read only within the things (read_one_value), nor when reading
// the things would be held to the budget (`budgeted`), which reading the index's might not be.
bool fewer_things(Store& store, const Choice& c, const Things& things, const ShadowKey* after, bool budgeted,
                  const QueryOptions& options) {
  const auto& parts = c.comparison->parts;
  if (budgeted || things.every() || std::all_of(parts.begin(), parts.end(), [](const IndexableComparison::Part& p) {
        return std::all_of(p.ranges.begin(), p.ranges.end(), single_value);
      })) {
    return false;
  }
  const std::uint64_t entries = c.entries ? *c.entries : count_entries(store, *c.comparison, options.budget + 1);
  std::uint64_t n = 0;
  if (entries > 0) each_thing(store, things, after, [&](const std::string&, const std::string&) { return ++n < entries; });
  return n < entries;
}

// How many more to read at once: a chunk, or one past the budget's rest (reaching it is over).
std::size_t room(std::size_t examined, const QueryOptions& options) {
  return examined >= options.budget ? 1 : std::min<std::size_t>(kChunk, options.budget - examined + 1);
}

// Reads each key's shadow and calls `match` with the live ones the filter matches; false once
// `match` asked to stop. Counts what it examines, against the budget with budget_always.
bool examine(Store& store, const TimestampKeys& keys, const Filter& filter, const QueryOptions& options,
             std::span<const ShadowKey> wanted, std::size_t& examined, const std::function<bool(const Subject&)>& match) {
  for (std::size_t i = 0; i < wanted.size();) {
    const std::span<const ShadowKey> chunk =
        wanted.subspan(i, std::min(options.budget_always ? room(examined, options) : kChunk, wanted.size() - i));
    i += chunk.size();
    const std::vector<ShadowRecord> records = store.read(chunk);
    for (std::size_t j = 0; j < chunk.size(); ++j) {
      if (++examined > options.budget && options.budget_always) over_budget(filter, options);
      if (!records[j].exists()) continue;
      Subject subject(chunk[j], records[j], keys);
      if (filter.matches(subject) && !match(subject)) return false;
    }
  }
  return true;
}

// Whether the plan by things reads only named things (no prefix): then no index is needed.
bool names_only(const std::vector<ThingRange>& ranges) {
  return std::none_of(ranges.begin(), ranges.end(), [](const ThingRange& r) { return r.prefix; });
}

}  // namespace

std::optional<std::string> after_every(std::string_view prefix) {
  if (prefix.empty() || !is_valid_utf8(prefix)) return std::nullopt;
  std::size_t at = prefix.size() - 1;  // the last character's first byte
  while (at > 0 && (static_cast<unsigned char>(prefix[at]) & 0xC0) == 0x80) --at;
  const auto byte = [&](std::size_t i) { return static_cast<char32_t>(static_cast<unsigned char>(prefix[i])); };
  const std::size_t length = prefix.size() - at;
  char32_t c = length == 1 ? byte(at) : byte(at) & (0xFF >> (length + 1));
  for (std::size_t i = at + 1; i < prefix.size(); ++i) c = (c << 6) | (byte(i) & 0x3F);
  if (++c == 0xD800) c = 0xE000;  // past the surrogates
  if (c > 0x10FFFF) return std::nullopt;
  std::string out(prefix.substr(0, at));
  if (c < 0x80) {
    out += static_cast<char>(c);
  } else if (c < 0x800) {
    out += static_cast<char>(0xC0 | (c >> 6));
    out += static_cast<char>(0x80 | (c & 0x3F));
  } else if (c < 0x10000) {
    out += static_cast<char>(0xE0 | (c >> 12));
    out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (c & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (c >> 18));
    out += static_cast<char>(0x80 | ((c >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (c & 0x3F));
  }
  return out;
}

std::vector<ThingRange> plan(const std::optional<std::vector<ThingRange>>& wanted, std::span<const ThingPattern> scope) {
  const std::vector<ThingRange> all{{"", true}};
  const std::span<const ThingRange> allowed = scope.empty() ? std::span<const ThingRange>(all) : scope;
  std::vector<ThingRange> both;
  for (const ThingRange& a : wanted ? *wanted : all) {
    for (const ThingRange& b : allowed) {
      if (auto r = intersect(a, b)) both.push_back(std::move(*r));
    }
  }
  // A prefix sorts before every name it covers, so what a kept range covers follows it.
  std::sort(both.begin(), both.end(), [](const ThingRange& a, const ThingRange& b) {
    return a.text != b.text ? a.text < b.text : a.prefix > b.prefix;
  });
  std::vector<ThingRange> out;
  std::optional<std::string> cover;  // the last prefix kept
  for (const ThingRange& r : both) {
    if ((cover && r.text.starts_with(*cover)) || (!out.empty() && out.back() == r)) continue;
    out.push_back(r);
    if (r.prefix) cover = r.text;
  }
  return out;
}

std::size_t scan(Store& store, const TimestampKeys& keys, const Scan& scan, const QueryOptions& options,
                 const std::function<bool(const Subject&)>& match) {
  const Things things{plan(scan.filter.thing_ranges(), scan.scope), scan.filter.thing_bounds()};
  const ShadowKey* after = scan.after ? &*scan.after : nullptr;
  // Only a filter that names no things is held to the budget (any, with budget_always): one that
  // does reads only the things it selects, as one an index serves reads only its entries.
  const bool budgeted = options.budget_always || (!scan.filter.thing_ranges() && !things.bounds);
  if (options.indexes && !names_only(things.ranges)) {
    const std::vector<IndexableComparison> comparisons = scan.filter.indexable();
    const Choice by = choose(store, comparisons, options);
    if (by.comparison && !fewer_things(store, by, things, after, budgeted, options)) {
      std::size_t examined = 0;
      candidates(store, *by.comparison, things, scan.after, options.budget, [&] { over_budget(scan.filter, options); },
                 [&](std::vector<ShadowKey>& wanted) { return examine(store, keys, scan.filter, options, wanted, examined, match); });
      return examined;
    }
  }
  if (options.scan_needs_consent && !scan.allow_scan && things.every()) {
    too_expensive(scan.filter, "this query reads every thing of the table, which on DynamoDB needs allowScan=true",
                  options.indexes);
  }
  std::size_t examined = 0;
  // The shadows of `thing` with names after `after_name`; false once `match` asked to stop.
  each_thing(store, things, after, [&](const std::string& thing, std::string after_name) {
    while (true) {
      const std::size_t chunk = budgeted ? room(examined, options) : kChunk;
      std::vector<ShadowSummary> list = store.list_shadows(thing, after_name, chunk);
      if (list.empty()) return true;
      std::vector<ShadowKey> wanted;
      for (const ShadowSummary& s : list) wanted.push_back({thing, s.name});
      std::vector<ShadowRecord> records = store.read(wanted);
      for (std::size_t i = 0; i < wanted.size(); ++i) {
        if (++examined > options.budget && budgeted) over_budget(scan.filter, options);
        if (!records[i].exists()) continue;
        Subject subject(wanted[i], records[i], keys);
        if (scan.filter.matches(subject) && !match(subject)) return false;
      }
      if (list.size() < chunk) return true;
      after_name = list.back().name;
    }
  });
  return examined;
}

std::uint64_t count(Store& store, const TimestampKeys& keys, const Scan& scan, const QueryOptions& options) {
  const Things things{plan(scan.filter.thing_ranges(), scan.scope), scan.filter.thing_bounds()};
  if (options.indexes && !names_only(things.ranges)) {
    // The index's entries are exactly the matches of a comparison that is the whole filter (then
    // the only one); any other filter is counted by the scan, which plans for itself.
    const std::vector<IndexableComparison> comparisons = scan.filter.indexable();
    const IndexableComparison* by =
        comparisons.size() == 1 && comparisons.front().whole ? choose(store, comparisons, options).comparison : nullptr;
    // (Such a filter compares no thing: reading the things is held to the budget, so it is never
    // weighed against them, fewer_things.)
    if (by) {
      if (const IndexRange* single = single_value_range(*by); single && things.every()) {
        return store.index_count(by->parts.front().property->text, *single, UINT64_MAX);
      }
      std::uint64_t n = 0;
      candidates(store, *by, things, std::nullopt, UINT64_MAX, [] {}, [&](std::vector<ShadowKey>& wanted) {
        n += wanted.size();
        return true;
      });
      return n;
    }
  }
  std::uint64_t n = 0;
  query::scan(store, keys, scan, options, [&](const Subject&) {
    ++n;
    return true;
  });
  return n;
}

std::size_t sorted_scan(Store& store, const TimestampKeys& keys, const Scan& scan, const Sort& sort,
                        const std::optional<SortPosition>& after, const QueryOptions& options,
                        const std::function<bool(const Subject&, const IndexValue&)>& match) {
  using T = IndexValue::Type;
  const Property property = parse_index_field(sort.field);
  // Values by type, then the shadows holding none (`absent`) by thing and name, either way.
  std::vector<T> types{T::null, T::boolean, T::number, T::string, T::time};
  if (sort.descending) std::reverse(types.begin(), types.end());
  // Only `ne` and `exists` match a shadow holding no value of a property: when a comparison
  // every match passes is another on the sort field, no match lacks it.
  const std::vector<IndexableComparison> required = scan.filter.indexable();
  if (std::none_of(required.begin(), required.end(), [&](const IndexableComparison& c) {
        return std::all_of(c.parts.begin(), c.parts.end(), [&](const auto& p) { return p.property->text == sort.field; });
      })) {
    types.push_back(T::absent);
  }
  // One such comparison that is not an `or` (gt(reported/temp,30)) holds every match's value in
  // its ranges: the walk reads those ranges alone, and a match is listed at its first value in
  // them. (At most one range a type, so that no shadow is listed twice.)
  const std::vector<IndexRange>* within = nullptr;
  for (const IndexableComparison& c : required) {
    if (c.parts.size() != 1 || c.parts.front().property->text != sort.field) continue;
    const std::vector<IndexRange>& ranges = c.parts.front().ranges;
    const bool one_a_type = std::all_of(ranges.begin(), ranges.end(), [&](const IndexRange& r) {
      return std::count_if(ranges.begin(), ranges.end(), [&](const IndexRange& o) { return o.type == r.type; }) == 1;
    });
    if (one_a_type) {
      within = &ranges;
      break;
    }
  }
  auto range_of = [&](T type) -> std::optional<IndexRange> {
    if (!within) return IndexRange{type};
    for (const IndexRange& r : *within) {
      if (r.type == type) return r;
    }
    return std::nullopt;
  };
  auto kept = [&](const IndexValue& v) {
    return !within || std::any_of(within->begin(), within->end(), [&](const IndexRange& r) { return r.contains(v); });
  };
  // Entries of things the query cannot match (outside the token's patterns or the filter's
  // things) are passed over unread and uncounted: the budget, and so whether the query is
  // refused, depends on the shadows the query may match alone.
  const Things things{plan(scan.filter.thing_ranges(), scan.scope), scan.filter.thing_bounds()};
  // Types come in this order: those before the cursor's are done.
  auto next = after ? std::find(types.begin(), types.end(), after->value.type) : types.begin();
  std::size_t examined = 0;
  for (; next != types.end(); ++next) {
    std::optional<IndexRange> bounded = range_of(*next);
    if (!bounded) continue;  // no match holds a value of this type in the comparison's ranges
    IndexRange& range = *bounded;
    range.descending = sort.descending && *next != T::absent;
    std::optional<IndexHit> from;
    if (after && *next == after->value.type) from = IndexHit{after->value, after->key.thing, after->key.name};
    for (;;) {
      const std::vector<IndexHit> hits = store.index_range(sort.field, range, from ? &*from : nullptr, kHitPage);
      std::vector<const IndexHit*> inside;
      for (const IndexHit& h : hits) {
        if (things.contain(h.thing)) inside.push_back(&h);
      }
      // Read a chunk at a time, at most one past the budget.
      for (std::size_t i = 0; i < inside.size();) {
        const std::size_t n = std::min(room(examined, options), inside.size() - i);
        std::vector<ShadowKey> wanted;
        for (std::size_t j = i; j < i + n; ++j) wanted.push_back({inside[j]->thing, inside[j]->name});
        const std::vector<ShadowRecord> records = store.read(wanted);
        for (std::size_t j = 0; j < n; ++j) {
          if (++examined > options.budget) over_budget(scan.filter, options);
          if (!records[j].exists()) continue;
          const IndexHit& hit = *inside[i + j];
          Subject subject(wanted[j], records[j], keys);
          // A shadow holding several values is listed once, at its first in this order (within
          // the comparison's ranges).
          std::vector<IndexValue> values = index_values(subject, property);
          std::erase_if(values, [&](const IndexValue& v) { return !kept(v); });
          if (values.empty() || (sort.descending ? values.back() : values.front()) != hit.value) continue;
          if (scan.filter.matches(subject) && !match(subject, hit.value)) return examined;
        }
        i += n;
      }
      if (hits.size() < kHitPage) break;
      from = hits.back();
    }
  }
  return examined;
}

}  // namespace deviceshadow::query
