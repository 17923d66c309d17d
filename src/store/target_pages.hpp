// A page of a bulk job's targets as the SQLite and DynamoDB stores keep it: compact JSON,
// [["thing","name"],…].
#pragma once

#include "deviceshadow/json.hpp"
#include "deviceshadow/store.hpp"

#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace deviceshadow {

inline std::string encode_target_page(std::span<const ShadowKey> targets) {
  std::string list = "[";
  for (const ShadowKey& k : targets) {
    if (list.size() > 1) list += ',';
    list += '[';
    append_json_string(list, k.thing);
    list += ',';
    append_json_string(list, k.name);
    list += ']';
  }
  list += ']';
  return list;
}

inline std::vector<ShadowKey> decode_target_page(std::string_view list) {
  std::vector<ShadowKey> out;
  const json::value parsed = parse_json(list);
  for (const json::value& k : parsed.as_array()) {
    const json::array& pair = k.as_array();
    out.push_back({std::string(pair.at(0).as_string()), std::string(pair.at(1).as_string())});
  }
  return out;
}

}  // namespace deviceshadow
