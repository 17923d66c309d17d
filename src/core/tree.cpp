#include "core/tree.hpp"

#include <charconv>
#include <unordered_set>

namespace deviceshadow {

json::value without_null_members(const json::value& v, const TimestampKeys& keys, const json::storage_ptr& sp) {
  switch (v.kind()) {
    case json::kind::object: {
      const json::object& o = v.get_object();
      if (keys.find(o)) return json::value(v, sp);
      json::object out(sp);
      out.reserve(o.size());
      for (const json::key_value_pair& m : o) {
        if (!m.value().is_null()) out.emplace(m.key(), without_null_members(m.value(), keys, sp));
      }
      return out;
    }
    case json::kind::array: {
      json::array out(sp);
      out.reserve(v.get_array().size());
      for (const json::value& e : v.get_array()) out.push_back(without_null_members(e, keys, sp));
      return out;
    }
    default:
      return json::value(v, sp);
  }
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
