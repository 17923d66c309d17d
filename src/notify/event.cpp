#include "notify/event.hpp"

#include "aws/sigv4.hpp"
#include "deviceshadow/json.hpp"
#include "deviceshadow/timestamp.hpp"

namespace deviceshadow::notify {
namespace {

constexpr Section kSections[] = {Section::reported, Section::desired};

}  // namespace

FeedWrite read_feed_write(const json::value& entry) {
  const json::object& event = entry.at("event").as_object();
  FeedWrite w;
  w.id = std::string(event.at("id").as_string());
  w.thing = std::string(event.at("thing").as_string());
  w.name = std::string(event.at("name").as_string());
  w.timestamp_ns = parse_rfc3339(event.at("timestamp").as_string()).value_or(now()).unix_nanos();
  w.deleted = event.at("op").as_string() == "delete";
  for (Section s : kSections) {
    const json::value* section = event.if_contains(to_string(s));
    if (!section) continue;
    (s == Section::reported ? w.reported : w.desired) = true;
    auto& paths = s == Section::reported ? w.reported_paths : w.desired_paths;
    for (const json::value& change : section->at("changes").as_array()) paths.emplace_back(change.at("path").as_string());
  }
  return w;
}

bool wants(const Registration& r, const FeedWrite& w) {
  if (!r.enabled) return false;
  const bool reported = w.reported && r.selects(Section::reported);
  const bool desired = w.desired && r.selects(Section::desired);
  if (!reported && !desired) return false;
  if (!r.matches_shadow(w.thing, w.name)) return false;
  return (reported && r.matches_paths(w.reported_paths)) || (desired && r.matches_paths(w.desired_paths));
}

std::string_view event_type(const FeedWrite& w) {
  return w.deleted ? "deviceshadow.shadow.deleted" : "deviceshadow.shadow.updated";
}

std::string build_event(const Registration& r, const json::value& entry, std::size_t max_bytes) {
  const json::object& event = entry.at("event").as_object();
  const bool deleted = event.at("op").as_string() == "delete";
  auto build = [&](bool with_states) {
    json::object data;
    data["thing"] = event.at("thing");
    data["name"] = event.at("name");
    data["op"] = event.at("op");
    if (const json::value* token = event.if_contains("clientToken")) data["clientToken"] = *token;
    data["registration"] = r.id;
    for (Section s : kSections) {
      const json::value* stored = event.if_contains(to_string(s));
      if (!stored || !r.selects(s)) continue;
      const json::object& states = entry.at(to_string(s)).as_object();
      json::object section;
      section["version"] = stored->at("version");
      if (with_states && r.include_old) section["old"] = states.at("old");
      if (with_states && r.include_new) section["new"] = states.at("new");
      if (r.include_diff) section["diff"] = stored->at("changes");
      data[to_string(s)] = std::move(section);
    }
    if (const json::value* acks = event.if_contains("acknowledged"); acks && r.selects(Section::desired)) {
      data["acknowledged"] = *acks;
    }
    if (!with_states) data["truncated"] = true;
    json::object cloud_event;
    cloud_event["specversion"] = "1.0";
    cloud_event["id"] = event.at("id");
    cloud_event["source"] = "deviceshadow";
    cloud_event["type"] = deleted ? "deviceshadow.shadow.deleted" : "deviceshadow.shadow.updated";
    cloud_event["subject"] = std::string(event.at("thing").as_string()) + "#" + std::string(event.at("name").as_string());
    cloud_event["time"] = event.at("timestamp");
    cloud_event["datacontenttype"] = "application/json";
    cloud_event["data"] = std::move(data);
    return to_json(cloud_event);
  };
  std::string full = build(true);
  if (full.size() <= max_bytes || (!r.include_old && !r.include_new)) return full;
  return build(false);
}

std::string webhook_signature(std::string_view secret, std::int64_t unix_seconds, std::string_view body) {
  const std::string t = std::to_string(unix_seconds);
  std::string signed_text;
  signed_text.reserve(t.size() + 1 + body.size());
  signed_text.append(t).append(1, '.').append(body);
  return "t=" + t + ",v1=" + aws::hex_hmac_sha256(secret, signed_text);
}

}  // namespace deviceshadow::notify
