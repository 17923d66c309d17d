// Helpers over JSON trees shared by the core's translation units (not public API).
#pragma once

#include "deviceshadow/json.hpp"
#include "deviceshadow/timestamp.hpp"

#include <optional>
#include <string>
#include <string_view>

namespace deviceshadow {

// The timestamp member of v if v is a timestamped value (an object with a timestamp key).
inline const json::value* timestamp_member(const json::value& v, const TimestampKeys& keys) noexcept {
  return v.is_object() ? keys.find(v.get_object()) : nullptr;
}

// The member of o named key, or o.end(). Looks at the few members from position `hint` on
// first and leaves `hint` just past the member found: documents merged or compared with each
// other usually list their members in the same order (one a subset of the other, as desired
// of reported), which makes this a comparison or two instead of a search.
template <class Object>  // json::object or const json::object
auto find_member(Object& o, std::string_view key, std::size_t& hint) noexcept -> decltype(o.begin()) {
  constexpr std::size_t kLookahead = 4;
  for (std::size_t i = hint; i < o.size() && i < hint + kLookahead; ++i) {
    auto it = o.begin() + static_cast<std::ptrdiff_t>(i);
    if (std::string_view(it->key().data(), it->key().size()) == key) {
      hint = i + 1;
      return it;
    }
  }
  auto it = o.find(json::string_view(key.data(), key.size()));
  if (it != o.end()) hint = static_cast<std::size_t>(it - o.begin()) + 1;
  return it;
}

// v moved into storage sp (copied if v lives elsewhere), with null members removed from every
// plain object in it (timestamped values are atomic and kept whole; array elements are kept,
// nulls included).
json::value without_null_members(json::value&& v, const TimestampKeys& keys, const json::storage_ptr& sp);

// The canonical matching key of an array element's "id" ("s" + string or "i" + decimal
// integer), or nullopt if the element is not an object with a string or integer id.
std::optional<std::string> element_id_key(const json::value& element);

// True if every element has an id (see element_id_key) and no two ids are equal.
bool has_unique_ids(const json::array& a);

}  // namespace deviceshadow
