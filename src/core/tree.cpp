#include "core/tree.hpp"

#include <charconv>
#include <unordered_set>

namespace deviceshadow {

namespace {

void remove_null_members(json::value& v, const TimestampKeys& keys) {
  if (json::object* o = v.if_object()) {
    if (keys.find(*o)) return;
    for (auto it = o->begin(); it != o->end();) {
      if (it->value().is_null()) {
        it = o->stable_erase(it);
      } else {
        remove_null_members(it->value(), keys);
        ++it;
      }
    }
  } else if (json::array* a = v.if_array()) {
    for (json::value& e : *a) remove_null_members(e, keys);
  }
}

}  // namespace

json::value without_null_members(json::value&& v, const TimestampKeys& keys, const json::storage_ptr& sp) {
  remove_null_members(v, keys);
  return json::value(std::move(v), sp);
}

std::optional<std::string> element_id_key(const json::value& element) {
  if (!element.is_object()) return std::nullopt;
  const json::value* id = element.get_object().if_contains("id");
  if (!id) return std::nullopt;
  char buf[24];
  switch (id->kind()) {
    case json::kind::string:
      return "s" + std::string(id->get_string().data(), id->get_string().size());
    case json::kind::int64: {
      auto [end, err] = std::to_chars(buf, buf + sizeof buf, id->get_int64());
      return "i" + std::string(buf, end);
    }
    case json::kind::uint64: {
      auto [end, err] = std::to_chars(buf, buf + sizeof buf, id->get_uint64());
      return "i" + std::string(buf, end);
    }
    default:
      return std::nullopt;
  }
}

bool has_unique_ids(const json::array& a) {
  std::unordered_set<std::string> seen;
  seen.reserve(a.size());
  for (const json::value& e : a) {
    auto key = element_id_key(e);
    if (!key || !seen.insert(std::move(*key)).second) return false;
  }
  return true;
}

}  // namespace deviceshadow
