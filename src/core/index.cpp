// Index values' order (index.hpp) and the Store's answers where a store keeps no indexes.
#include "deviceshadow/index.hpp"

#include "deviceshadow/error.hpp"
#include "deviceshadow/store.hpp"

namespace deviceshadow {
namespace {

int sign(auto a, auto b) noexcept { return a < b ? -1 : b < a ? 1 : 0; }

[[noreturn]] void no_indexes() {
  throw Error::invalid_request("this store keeps no declared indexes", "fields");
}

}  // namespace

int compare(const IndexValue& a, const IndexValue& b) noexcept {
  if (a.type != b.type) return sign(a.type, b.type);
  switch (a.type) {
    case IndexValue::Type::null:
    case IndexValue::Type::absent: return 0;
    case IndexValue::Type::string: return sign(a.text.compare(b.text), 0);
    case IndexValue::Type::number:
      if (!a.real && !b.real) return sign(a.integer, b.integer);
      // long double holds every int64 exactly, and every double.
      return sign(a.real ? static_cast<long double>(a.number) : static_cast<long double>(a.integer),
                  b.real ? static_cast<long double>(b.number) : static_cast<long double>(b.integer));
    default: return sign(a.integer, b.integer);
  }
}

bool IndexRange::contains(const IndexValue& v) const noexcept {
  if (v.type != type) return false;
  if (low) {
    const int c = compare(v, *low);
    if (c < 0 || (c == 0 && low_open)) return false;
  }
  if (high) {
    const int c = compare(v, *high);
    if (c > 0 || (c == 0 && high_open)) return false;
  }
  return true;
}

std::uint64_t Store::put_index_fields(std::span<const IndexFieldState>, std::uint64_t) { no_indexes(); }
std::vector<ShadowKey> Store::put_index_entries(std::span<const IndexedShadow>) { no_indexes(); }
std::vector<IndexHit> Store::index_range(std::string_view, const IndexRange&, const IndexHit*, std::size_t) { no_indexes(); }
std::uint64_t Store::index_count(std::string_view, const IndexRange&, std::uint64_t) { no_indexes(); }

std::vector<ShadowKey> Store::list_shadow_keys(const ShadowKey* after, std::size_t limit) {
  std::vector<ShadowKey> out;
  // The rest of the thing of `after`, then the things after it, each whole until `limit`.
  auto add_thing = [&](const std::string& thing, std::string after_name) {
    while (out.size() < limit) {
      const std::size_t wanted = limit - out.size();
      const std::vector<ShadowSummary> list = list_shadows(thing, after_name, wanted);
      for (const ShadowSummary& s : list) out.push_back({thing, s.name});
      if (list.size() < wanted) return;
      after_name = list.back().name;
    }
  };
  std::string last_thing;
  if (after) {
    add_thing(after->thing, after->name);
    last_thing = after->thing;
  }
  while (out.size() < limit) {
    const std::size_t wanted = limit - out.size();  // each listed thing has a live shadow
    const std::vector<std::string> things = list_things("", last_thing, wanted);
    for (const std::string& thing : things) add_thing(thing, "");
    if (things.size() < wanted) break;
    last_thing = things.back();
  }
  if (out.size() > limit) out.resize(limit);
  return out;
}

}  // namespace deviceshadow
