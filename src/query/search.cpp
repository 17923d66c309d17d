#include "query/search.hpp"

#include "deviceshadow/error.hpp"

#include <algorithm>

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

// Names the field whose index would serve the query (`thing` when it compares none).
[[noreturn]] void too_expensive(const Filter& filter, std::string_view why) {
  const std::string field = filter.field_to_index();
  throw Error::query_too_expensive(
      std::string(why) + "; narrow it by thing (eq, in, or like with a literal prefix on thing)" +
          (field.empty() ? std::string() : ", or declare an index on " + field + " once indexes can be declared"),
      field.empty() ? "thing" : field);
}

}  // namespace

std::vector<ThingRange> plan(const std::optional<std::vector<ThingRange>>& wanted, std::span<const ThingPattern> scope) {
  const std::vector<ThingRange> all{{"", true}};
  std::vector<ThingRange> allowed;
  for (const ThingPattern& p : scope) allowed.push_back({p.text, p.prefix});
  std::vector<ThingRange> both;
  for (const ThingRange& a : wanted ? *wanted : all) {
    for (const ThingRange& b : scope.empty() ? all : allowed) {
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
  std::vector<ThingRange> ranges = plan(scan.filter.thing_ranges(), scan.scope);
  if (options.scan_needs_consent && !scan.allow_scan &&
      std::any_of(ranges.begin(), ranges.end(), [](const ThingRange& r) { return r.prefix && r.text.empty(); })) {
    too_expensive(scan.filter, "this query reads every thing of the table, which on DynamoDB needs allowScan=true");
  }
  std::size_t examined = 0;
  // The shadows of `thing` with names after `after_name`; false once `match` asked to stop.
  auto visit = [&](const std::string& thing, std::string after_name) {
    while (true) {
      std::vector<ShadowSummary> list = store.list_shadows(thing, after_name, kChunk);
      if (list.empty()) return true;
      if (examined + list.size() > options.budget) {
        too_expensive(scan.filter, "this query would examine more than " + std::to_string(options.budget) +
                                       " shadows (--query-budget)");
      }
      examined += list.size();
      std::vector<ShadowKey> wanted;
      for (const ShadowSummary& s : list) wanted.push_back({thing, s.name});
      std::vector<ShadowRecord> records = store.read(wanted);
      for (std::size_t i = 0; i < wanted.size(); ++i) {
        if (!records[i].exists()) continue;
        Subject subject(wanted[i], records[i], keys);
        if (scan.filter.matches(subject) && !match(subject)) return false;
      }
      if (list.size() < kChunk) return true;
      after_name = list.back().name;
    }
  };
  const ShadowKey* after = scan.after ? &*scan.after : nullptr;
  for (const ThingRange& r : ranges) {
    if (!r.prefix) {
      if (after && r.text < after->thing) continue;
      if (!visit(r.text, after && r.text == after->thing ? after->name : "")) break;
      continue;
    }
    std::string last;  // list things after it
    if (after) {
      last = after->thing;
      if (after->thing.starts_with(r.text) && !visit(after->thing, after->name)) break;
    }
    bool more = true;
    while (more) {
      std::vector<std::string> things = store.list_things(r.text, last, kChunk);
      for (const std::string& thing : things) {
        if (!visit(thing, "")) return examined;
      }
      more = things.size() == kChunk;
      if (more) last = things.back();
    }
  }
  return examined;
}

}  // namespace deviceshadow::query
