// Stream records and item images as a DynamoDB table's stream shows the DynamoDB store's
// items (docs/storage.md), for tests of the stream consumer and the feed made from it.
#pragma once

#include "deviceshadow/json.hpp"
#include "deviceshadow/timestamp.hpp"
#include "notify/stream/streams_api.hpp"

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>

namespace stream_records {

namespace json = boost::json;
namespace st = deviceshadow::notify::stream;

// A JSON value as a DynamoDB attribute value (numbers as N, as the store writes them).
inline json::value attribute(const json::value& v) {
  switch (v.kind()) {
    case json::kind::null: return json::object{{"NULL", true}};
    case json::kind::bool_: return json::object{{"BOOL", v.get_bool()}};
    case json::kind::string: return json::object{{"S", v.get_string()}};
    case json::kind::array: {
      json::array l;
      for (const json::value& e : v.get_array()) l.push_back(attribute(e));
      return json::object{{"L", std::move(l)}};
    }
    case json::kind::object: {
      json::object m;
      for (const auto& e : v.get_object()) m[e.key()] = attribute(e.value());
      return json::object{{"M", std::move(m)}};
    }
    default: return json::object{{"N", deviceshadow::to_json(v)}};
  }
}
inline json::object s_attr(std::string_view s) { return json::object{{"S", s}}; }
inline json::object n_attr(std::int64_t n) { return json::object{{"N", std::to_string(n)}}; }

// An item image: its keys and `attributes` (plain JSON: strings become S, numbers N, objects M).
inline json::object image(const std::string& pk, const std::string& sk, std::string_view attributes) {
  json::object out{{"PK", s_attr(pk)}, {"SK", s_attr(sk)}};
  const json::value parsed_attributes = deviceshadow::parse_json(attributes);
  for (const auto& e : parsed_attributes.as_object()) out[e.key()] = attribute(e.value());
  return out;
}
// A section item of the separate layout, as the DynamoDB store puts it.
inline json::object section_image(const std::string& sk, int version, std::string_view state, std::string_view event = {},
                           bool deleted = false, const std::string& thing = "lamp") {
  json::object out = image("DS#" + thing, sk, "{}");
  out["version"] = n_attr(version);
  out["timestamp"] = n_attr(1000 + version);
  out["writeId"] = s_attr("w" + std::to_string(version));
  out["deleted"] = json::object{{"BOOL", deleted}};
  out["state"] = attribute(deviceshadow::parse_json(state));
  if (!event.empty()) out["feedEvent"] = s_attr(event);
  return out;
}
inline st::StreamRecord record(std::string seq, json::object new_image, json::object old_image = {}) {
  st::StreamRecord r;
  r.event_name = new_image.empty() ? "REMOVE" : old_image.empty() ? "INSERT" : "MODIFY";
  r.sequence_number = std::move(seq);
  const json::object& some = new_image.empty() ? old_image : new_image;
  r.keys = json::object{{"PK", some.at("PK")}, {"SK", some.at("SK")}};
  r.new_image = std::move(new_image);
  r.old_image = std::move(old_image);
  return r;
}

// The record of a one-section report of shadow {thing}/{name} in the separate layout, version
// `version` (< 10), put while the change feed was on: state {"n": version}.
// A report of `name`'s version `version`, written `age` ago (a dispatcher expires events by age).
inline st::StreamRecord report_record(const std::string& seq, const std::string& name, int version,
                                     const std::string& thing = "lamp", std::chrono::nanoseconds age = {}) {
  const std::string v = std::to_string(version);
  const std::string event = R"({"id":"0000000000000000100)" + v + "#R" + v + R"(","thing":")" + thing + R"(","name":")" + name +
                            R"(","op":"report","timestamp":")" + deviceshadow::format_rfc3339(deviceshadow::Timestamp::from_unix_nanos(deviceshadow::now().unix_nanos() - age.count())) +
                            R"(","reported":{"version":)" + v +
                            R"(,"changes":[{"op":"replace","path":"/n","value":)" + v + "}]}}";
  return record(seq, section_image("DSR#" + name, version, R"({"n":)" + v + "}", event, false, thing));
}

}  // namespace stream_records
