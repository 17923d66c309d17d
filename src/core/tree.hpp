// Helpers over JSON trees shared by the core's translation units (not public API).
#pragma once

#include "deviceshadow/json.hpp"
#include "deviceshadow/timestamp.hpp"

#include <optional>
#include <string>

namespace deviceshadow {

// The timestamp member of v if v is a timestamped value (an object with a timestamp key).
inline const json::value* timestamp_member(const json::value& v, const TimestampKeys& keys) noexcept {
  return v.is_object() ? keys.find(v.get_object()) : nullptr;
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
