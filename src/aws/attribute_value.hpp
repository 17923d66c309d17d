// Reading attributes of DynamoDB items in attribute-value JSON ({"name":{"S":"…"}, …}). An
// absent attribute reads as empty, 0 or false.
#pragma once

#include "deviceshadow/json.hpp"

#include <cstdint>
#include <string>
#include <string_view>

namespace deviceshadow::aws {

inline std::string get_s(const json::object& item, std::string_view name) {
  const json::value* v = item.if_contains(name);
  return v ? std::string(v->at("S").as_string()) : std::string();
}
inline std::int64_t get_n(const json::object& item, std::string_view name) {
  const json::value* v = item.if_contains(name);
  return v ? std::stoll(std::string(v->at("N").as_string())) : 0;
}
inline bool get_bool(const json::object& item, std::string_view name) {
  const json::value* v = item.if_contains(name);
  return v && v->at("BOOL").as_bool();
}

}  // namespace deviceshadow::aws
