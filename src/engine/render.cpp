#include "deviceshadow/render.hpp"

#include "deviceshadow/arena.hpp"
#include "deviceshadow/json.hpp"
#include "deviceshadow/leaf_times.hpp"
#include "deviceshadow/timestamp.hpp"
#include "deviceshadow/validation.hpp"

namespace deviceshadow {
namespace {

void append_key(std::string& out, const char* name, std::string_view value) {
  out += '"';
  out += name;
  out += "\":";
  append_json_string(out, value);
}

void append_number(std::string& out, const char* name, std::uint64_t value) {
  out += '"';
  out += name;
  out += "\":";
  out += std::to_string(value);
}

void append_time(std::string& out, const char* name, std::int64_t ns) {
  append_key(out, name, format_rfc3339(Timestamp::from_unix_nanos(ns)));
}

void append_thing_and_name(std::string& out, const ShadowKey& key) {
  append_key(out, "thing", key.thing);
  out += ',';
  append_key(out, "name", key.name);
}

template <class T>
void append_list(std::string& out, const char* name, const std::vector<T>& items) {
  out += '"';
  out += name;
  out += "\":[";
  for (std::size_t i = 0; i < items.size(); ++i) {
    if (i) out += ',';
    if constexpr (std::is_same_v<T, std::string>) {
      append_json_string(out, items[i]);
    } else {
      append_json(out, items[i]);
    }
  }
  out += ']';
}

void append_cursor(std::string& out, const std::string& cursor) {
  if (cursor.empty()) return;
  out += ',';
  append_key(out, "cursor", cursor);
}

}  // namespace

void append_section_view(std::string& out, const SectionRecord& s, const TimestampKeys* metadata) {
  out += "{\"state\":";
  out += s.exists() ? std::string_view(s.state_json) : std::string_view("{}");
  out += ',';
  append_number(out, "version", s.version);
  if (s.version > 0 && s.timestamp_ns != 0) {  // (none: a combined-layout section never written)
    out += ',';
    append_time(out, "timestamp", s.timestamp_ns);
  }
  if (s.exists() && !s.client_token.empty()) {
    out += ',';
    append_key(out, "clientToken", s.client_token);
  }
  if (s.exists() && !s.tz.empty()) {
    out += ',';
    append_key(out, "tz", s.tz);
  }
  if (metadata) {
    out += ",\"metadata\":";
    if (s.exists()) {
      unsigned char buffer[4096];  // most states fit; larger ones continue on the heap
      Arena arena(buffer, sizeof buffer);
      append_leaf_times(out, section_state(s, &arena), s.times_json, s.timestamp_ns, *metadata, LeafTimeFormat::rfc3339);
    } else {
      out += "{}";
    }
  }
  out += '}';
}

void append_shadow(std::string& out, const ShadowView& view, const TimestampKeys* metadata) {
  out += '{';
  append_thing_and_name(out, view.key);
  out += ",\"reported\":";
  append_section_view(out, view.record.reported, metadata);
  out += ",\"desired\":";
  append_section_view(out, view.record.desired, metadata);
  out += ",\"delta\":";
  append_json(out, view.delta);
  out += '}';
}

std::string render_shadow(const ShadowView& view, const TimestampKeys* metadata) {
  std::string out;
  append_shadow(out, view, metadata);
  return out;
}

void append_update_result(std::string& out, const UpdateResult& r) {
  out += '{';
  append_thing_and_name(out, r.shadow.key);
  out += r.changed ? ",\"changed\":true" : ",\"changed\":false";
  out += ",\"reported\":";
  append_section_view(out, r.shadow.record.reported);
  out += ",\"desired\":";
  append_section_view(out, r.shadow.record.desired);
  out += ",\"delta\":";
  append_json(out, r.shadow.delta);
  out += ',';
  append_list(out, "changes", r.changes);
  out += ',';
  append_list(out, "acknowledged", r.acknowledged);
  out += ',';
  append_list(out, "stale", r.stale);
  out += '}';
}

std::string render_update_result(const UpdateResult& r) {
  std::string out;
  append_update_result(out, r);
  return out;
}

std::string render_delete_result(const DeleteResult& r) {
  std::string out = "{";
  append_thing_and_name(out, r.key);
  out += ",\"deleted\":[";
  for (std::size_t i = 0; i < r.deleted.size(); ++i) {
    if (i) out += ',';
    append_json_string(out, to_string(r.deleted[i]));
  }
  out += ']';
  for (Section s : r.deleted) {
    out += ",\"";
    out += to_string(s);
    out += "\":{";
    append_number(out, "version", r.record.section(s).version);
    out += '}';
  }
  out += '}';
  return out;
}

std::string render_shadow_list(const std::string& thing, const ShadowList& list) {
  std::string out = "{";
  append_key(out, "thing", thing);
  out += ",\"shadows\":[";
  for (std::size_t i = 0; i < list.shadows.size(); ++i) {
    const ShadowSummary& s = list.shadows[i];
    if (i) out += ',';
    out += '{';
    append_key(out, "name", s.name);
    out += ',';
    append_number(out, "reportedVersion", s.reported_version);
    out += ',';
    append_number(out, "desiredVersion", s.desired_version);
    out += ',';
    append_time(out, "timestamp", s.timestamp_ns);
    out += '}';
  }
  out += ']';
  append_cursor(out, list.cursor);
  out += '}';
  return out;
}

std::string render_thing_list(const ThingList& list) {
  std::string out = "{";
  append_list(out, "things", list.things);
  append_cursor(out, list.cursor);
  out += '}';
  return out;
}

std::string render_history_page(const HistoryPage& page) {
  std::string out = "{\"events\":[";
  for (std::size_t i = 0; i < page.events.size(); ++i) {
    if (i) out += ',';
    out += page.events[i].json;
  }
  out += ']';
  append_cursor(out, page.cursor);
  out += '}';
  return out;
}

void append_error(std::string& out, const Error& e) {
  const ErrorDetails& d = e.details();
  out += "{\"error\":{";
  append_key(out, "code", code_name(e.code()));
  out += ',';
  // Messages and fields may quote what a client sent, which need not be UTF-8.
  append_key(out, "message", to_valid_utf8(e.what()));
  if (!d.field.empty()) {
    out += ',';
    append_key(out, "field", to_valid_utf8(d.field));
  }
  if (!d.path.empty() || e.code() == ErrorCode::invalid_timestamp || e.code() == ErrorCode::too_deep) {
    out += ',';
    append_key(out, "path", to_valid_utf8(d.path));
  }
  auto number = [&](const char* name, const std::optional<std::uint64_t>& v) {
    if (!v) return;
    out += ',';
    append_number(out, name, *v);
  };
  number("line", d.line);
  number("column", d.column);
  number("limit", d.limit);
  number("current_version", d.current_version);
  if (!d.oldest_id.empty()) {
    out += ",\"oldest\":{";
    append_key(out, "id", d.oldest_id);
    out += ',';
    append_time(out, "timestamp", d.oldest_ns);
    out += '}';
  }
  number("offset", d.offset);
  if (!d.expected.empty()) {
    out += ',';
    append_key(out, "expected", to_valid_utf8(d.expected));
  }
  out += "}}";
}

std::string render_error(const Error& e) {
  std::string out;
  append_error(out, e);
  return out;
}

std::string render_change_event(const ChangeEventParts& p) {
  std::string out = "{";
  append_key(out, "id", p.id);
  out += ',';
  append_thing_and_name(out, *p.key);
  out += ',';
  append_key(out, "op", p.op);
  out += ',';
  append_time(out, "timestamp", p.timestamp_ns);
  if (!p.client_token.empty()) {
    out += ',';
    append_key(out, "clientToken", p.client_token);
  }
  auto section = [&](Section s, const std::optional<std::uint64_t>& version, std::string_view tz) {
    if (!version) return;
    out += ",\"";
    out += to_string(s);
    out += "\":{";
    append_number(out, "version", *version);
    if (!tz.empty()) {
      out += ',';
      append_key(out, "tz", tz);
    }
    out += ",\"changes\":[";
    bool first = true;
    for (const Change& c : *p.changes) {
      if (c.section != s) continue;
      if (!first) out += ',';
      first = false;
      append_json(out, c, false);
    }
    out += "]}";
  };
  section(Section::reported, p.reported_version, p.reported_tz);
  section(Section::desired, p.desired_version, p.desired_tz);
  if (p.acknowledged && !p.acknowledged->empty()) {
    out += ',';
    append_list(out, "acknowledged", *p.acknowledged);
  }
  out += '}';
  return out;
}

}  // namespace deviceshadow
