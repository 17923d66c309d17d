#include "notify/event.hpp"

#include "aws/sigv4.hpp"
#include "deviceshadow/json.hpp"
#include "deviceshadow/timestamp.hpp"

namespace deviceshadow::notify {
namespace {

constexpr Section kSections[] = {Section::reported, Section::desired};

std::string_view type_of(bool deleted) { return deleted ? "deviceshadow.shadow.deleted" : "deviceshadow.shadow.updated"; }

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

std::string_view event_type(const FeedWrite& w) { return type_of(w.deleted); }

std::string build_event(const Registration& r, const json::value& entry, std::size_t max_bytes) {
  // Written straight to text (the same text as serializing the document built member by
  // member): no copy of the entry's values.
  const json::object& event = entry.at("event").as_object();
  const json::value& thing = event.at("thing");
  const json::value& name = event.at("name");
  const json::value& op = event.at("op");
  const json::value& id = event.at("id");
  const json::value& timestamp = event.at("timestamp");
  const std::string_view thing_text = thing.as_string();
  const std::string_view name_text = name.as_string();
  const bool deleted = op.as_string() == "delete";
  auto member = [](std::string& out, std::string_view key) {
    out += ',';
    append_json_string(out, key);
    out += ':';
  };
  auto build = [&](bool with_states) {
    std::string out;
    out.reserve(512);
    out += R"({"specversion":"1.0","id":)";
    append_json(out, id);
    out += R"(,"source":"deviceshadow","type":)";
    append_json_string(out, type_of(deleted));
    out += R"(,"subject":)";
    std::string subject;
    subject.reserve(thing_text.size() + 1 + name_text.size());
    subject.append(thing_text).append(1, '#').append(name_text);
    append_json_string(out, subject);
    out += R"(,"time":)";
    append_json(out, timestamp);
    out += R"(,"datacontenttype":"application/json","data":{"thing":)";
    append_json(out, thing);
    out += R"(,"name":)";
    append_json(out, name);
    out += R"(,"op":)";
    append_json(out, op);
    if (const json::value* token = event.if_contains("clientToken")) {
      out += R"(,"clientToken":)";
      append_json(out, *token);
    }
    out += R"(,"registration":)";
    append_json_string(out, r.id);
    for (Section s : kSections) {
      const json::value* stored = event.if_contains(to_string(s));
      if (!stored || !r.selects(s)) continue;
      const json::object& states = entry.at(to_string(s)).as_object();
      member(out, to_string(s));
      out += R"({"version":)";
      append_json(out, stored->at("version"));
      if (with_states && r.include_old) member(out, "old"), append_json(out, states.at("old"));
      if (with_states && r.include_new) member(out, "new"), append_json(out, states.at("new"));
      if (r.include_diff) member(out, "diff"), append_json(out, stored->at("changes"));
      out += '}';
    }
    if (const json::value* acks = event.if_contains("acknowledged"); acks && r.selects(Section::desired)) {
      out += R"(,"acknowledged":)";
      append_json(out, *acks);
    }
    if (!with_states) out += R"(,"truncated":true)";
    out += "}}";
    return out;
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
