#include "notify/event.hpp"

#include "aws/sigv4.hpp"
#include "deviceshadow/json.hpp"
#include "deviceshadow/timestamp.hpp"

#include <charconv>
#include <cstring>
#include <stdexcept>

namespace deviceshadow::notify {
namespace {

constexpr Section kSections[] = {Section::reported, Section::desired};

std::string_view type_of(bool deleted) { return deleted ? "deviceshadow.shadow.deleted" : "deviceshadow.shadow.updated"; }

// A reader of JSON text that finds where values lie without building them, in one pass: a
// caller descends into the values it wants parts of and skips the others. It checks what it
// steps over only as far as finding the ends of strings, objects and arrays needs. The text
// must be followed by a NUL (std::string's is), which JSON text never holds unescaped.
class Scanner {
 public:
  explicit Scanner(const std::string& text) : text_(text) {}

  [[noreturn]] static void fail(const char* what) { throw std::invalid_argument(std::string("feed entry: ") + what); }

  // The end of the value that begins at `at`.
  std::size_t skip_value(std::size_t at) const {
    if (at >= text_.size()) fail("a value is missing");
    const char c = text_[at];
    if (c == '"') return skip_string(at);
    if (c == '{' || c == '[') {
      char closers[kMaxDepth];  // what closes each open object or array, innermost last
      int depth = 0;
      const char* p = text_.data() + at;
      while ((p = std::strpbrk(p, "\"{}[]")) != nullptr) {
        const char d = *p;
        if (d == '"') {
          p = text_.data() + skip_string(static_cast<std::size_t>(p - text_.data()));
          continue;
        }
        if (d == '{' || d == '[') {
          if (depth == kMaxDepth) fail("objects and arrays are nested too deeply");
          closers[depth++] = d == '{' ? '}' : ']';
        } else if (closers[--depth] != d) {
          fail("an object or array is closed by the wrong bracket");
        } else if (depth == 0) {
          return static_cast<std::size_t>(p - text_.data()) + 1;
        }
        ++p;
      }
      fail("an object or array is not closed");
    }
    std::size_t end = at;
    while (end < text_.size() && text_[end] != ',' && text_[end] != '}' && text_[end] != ']' && !space(text_[end])) ++end;
    const std::string_view literal = std::string_view(text_).substr(at, end - at);
    if (literal != "true" && literal != "false" && literal != "null" && !(c == '-' || (c >= '0' && c <= '9'))) {
      fail("a value is not JSON");
    }
    return end;
  }

  // Reads the object at `at`: each(key, value_at) is called for every member and returns where
  // that value ends (skip_value, or the end of a descent into it). Keys are taken as written
  // (the entry's keys need no escapes). Returns where the object ends.
  template <class F>
  std::size_t members(std::size_t at, F&& each) const {
    if (at >= text_.size() || text_[at] != '{') fail("an object is expected");
    return elements(at, '}', [&](std::size_t i) {
      if (text_[i] != '"') fail("a member name is expected");
      const std::size_t key_end = skip_string(i);
      const std::size_t colon = skip_space(key_end);
      if (colon >= text_.size() || text_[colon] != ':') fail("':' is expected");
      return each(std::string_view(text_).substr(i + 1, key_end - i - 2), skip_space(colon + 1));
    });
  }

  // Reads the array at `at` the same way: each(value_at) returns where that element ends.
  template <class F>
  std::size_t items(std::size_t at, F&& each) const {
    if (at >= text_.size() || text_[at] != '[') fail("an array is expected");
    return elements(at, ']', each);
  }

  std::size_t skip_space(std::size_t i) const {
    while (i < text_.size() && space(text_[i])) ++i;
    return i;
  }

 private:
  static bool space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }
  // A byte loop, not memchr: most strings here are a few bytes long.
  std::size_t skip_string(std::size_t at) const {
    for (std::size_t i = at + 1; i < text_.size(); ++i) {
      if (text_[i] == '"') return i + 1;
      if (text_[i] == '\\') ++i;
    }
    fail("a string is not closed");
  }
  // The comma-separated elements of the object or array at `at`, closed by `close`;
  // `element(i)` reads the one at i and returns where it ends. Returns where `close` ends.
  template <class F>
  std::size_t elements(std::size_t at, char close, F&& element) const {
    std::size_t i = skip_space(at + 1);
    if (i < text_.size() && text_[i] == close) return i + 1;
    for (;;) {
      i = skip_space(element(i));
      if (i < text_.size() && text_[i] == ',') {
        i = skip_space(i + 1);
      } else if (i < text_.size() && text_[i] == close) {
        return i + 1;
      } else {
        fail("',' or the end of an object or array is expected");
      }
    }
  }

  static constexpr int kMaxDepth = 64;  // far deeper than an entry gets (documents nest 32 levels at most)
  const std::string& text_;
};

// The text of a JSON string: a view of its inside when it holds no escape (most do not), else
// decoded into `storage`.
std::string_view decode_string(std::string_view json_text, std::string& storage) {
  if (json_text.size() >= 2 && json_text.front() == '"' && json_text.find('\\') == std::string_view::npos) {
    return json_text.substr(1, json_text.size() - 2);
  }
  json::value v;
  try {
    v = parse_json(json_text);
  } catch (const std::exception& e) {
    Scanner::fail(e.what());
  }
  if (!v.is_string()) Scanner::fail("a string is expected");
  storage = v.get_string();
  return storage;
}

std::string decode_string(std::string_view json_text) {
  std::string storage;
  return std::string(decode_string(json_text, storage));
}

}  // namespace

FeedEntryText::FeedEntryText(std::string text) : text_(std::move(text)) {
  const Scanner scan(text_);
  auto skip = [&](Part& part, std::size_t at) {
    const std::size_t end = scan.skip_value(at);
    part = Part{at, end - at};
    return end;
  };
  auto section_of = [&](std::string_view key) -> SectionParts* {
    return key == "reported" ? &sections_[0] : key == "desired" ? &sections_[1] : nullptr;
  };
  // {"event": {…, "reported"|"desired": {"version", "changes": [{"path", …}, …]}}, "reported"|"desired": {"old", "new"}}
  auto read_event_section = [&](SectionParts& section, std::vector<std::string>& paths, std::size_t at) {
    return scan.members(at, [&](std::string_view member, std::size_t v) {
      if (member == "version") return skip(section.version, v);
      if (member != "changes") return scan.skip_value(v);
      const std::size_t end = scan.items(v, [&](std::size_t change) {
        return scan.members(change, [&](std::string_view key, std::size_t value) {
          const std::size_t value_end = scan.skip_value(value);
          if (key == "path") paths.push_back(decode_string(std::string_view(text_).substr(value, value_end - value)));
          return value_end;
        });
      });
      section.changes = Part{v, end - v};
      return end;
    });
  };
  auto read_event = [&](std::size_t at) {
    return scan.members(at, [&](std::string_view key, std::size_t v) {
      if (key == "id") return skip(id_, v);
      if (key == "thing") return skip(thing_, v);
      if (key == "name") return skip(name_, v);
      if (key == "op") return skip(op_, v);
      if (key == "timestamp") return skip(timestamp_, v);
      if (key == "clientToken") return skip(client_token_, v);
      if (key == "acknowledged") return skip(acknowledged_, v);
      if (SectionParts* section = section_of(key)) {
        return read_event_section(*section, key == "reported" ? write_.reported_paths : write_.desired_paths, v);
      }
      return scan.skip_value(v);
    });
  };
  const std::size_t end = scan.members(scan.skip_space(0), [&](std::string_view key, std::size_t v) {
    if (key == "event") return read_event(v);
    if (SectionParts* section = section_of(key)) {
      return scan.members(v, [&](std::string_view state, std::size_t s) {
        if (state == "old") return skip(section->old_state, s);
        if (state == "new") return skip(section->new_state, s);
        return scan.skip_value(s);
      });
    }
    return scan.skip_value(v);
  });
  if (scan.skip_space(end) != text_.size()) Scanner::fail("text follows the entry");
  if (!id_ || !thing_ || !name_ || !op_ || !timestamp_) Scanner::fail("an event member is missing");
  for (const SectionParts& section : sections_) {
    if (static_cast<bool>(section.version) != static_cast<bool>(section.changes)) Scanner::fail("a section's version or changes are missing");
  }
  write_.id = decode_string((*this)[id_], decoded_[0]);
  write_.thing = decode_string((*this)[thing_], decoded_[1]);
  write_.name = decode_string((*this)[name_], decoded_[2]);
  std::string timestamp;
  write_.timestamp_ns = parse_rfc3339(decode_string((*this)[timestamp_], timestamp)).value_or(now()).unix_nanos();
  write_.deleted = (*this)[op_] == R"("delete")";
  write_.reported = static_cast<bool>(sections_[0].version);
  write_.desired = static_cast<bool>(sections_[1].version);
}

ShadowRecord FeedEntryText::record_after(ShadowRecord stored) const {
  for (Section s : kSections) {
    const SectionParts& part = sections_[s == Section::reported ? 0 : 1];
    if (!part.version) continue;
    const std::string_view text = (*this)[part.version];
    std::uint64_t version = 0;
    if (std::from_chars(text.data(), text.data() + text.size(), version).ec != std::errc()) Scanner::fail("a version is not a number");
    SectionRecord& record = stored.section(s);
    if (record.version == version) continue;
    if (!part.new_state) Scanner::fail("a section's states are missing");
    record = SectionRecord{};
    record.version = version;
    record.deleted = write_.deleted;
    record.timestamp_ns = write_.timestamp_ns;
    if (!write_.deleted) record.state_json = (*this)[part.new_state];
  }
  return stored;
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

std::string build_event(const Registration& r, const FeedEntryText& entry, std::size_t max_bytes) {
  // Spliced from the entry's text: the CloudEvent's own members, then the entry's parts as they
  // are written there.
  const FeedWrite& w = entry.write_;
  auto build = [&](bool with_states) {
    std::string out;
    auto member = [&out](std::string_view key, std::string_view value_text) {
      out += ',';
      append_json_string(out, key);
      out += ':';
      out += value_text;
    };
    out.reserve(512 + entry.text_.size());
    out += R"({"specversion":"1.0","id":)";
    out += entry[entry.id_];
    out += R"(,"source":"deviceshadow","type":)";
    append_json_string(out, type_of(w.deleted));
    out += R"(,"subject":)";
    std::string subject;
    subject.reserve(w.thing.size() + 1 + w.name.size());
    subject.append(w.thing).append(1, '#').append(w.name);
    append_json_string(out, subject);
    out += R"(,"time":)";
    out += entry[entry.timestamp_];
    out += R"(,"datacontenttype":"application/json","data":{"thing":)";
    out += entry[entry.thing_];
    out += R"(,"name":)";
    out += entry[entry.name_];
    out += R"(,"op":)";
    out += entry[entry.op_];
    if (entry.client_token_) {
      out += R"(,"clientToken":)";
      out += entry[entry.client_token_];
    }
    if (!r.id.empty()) {
      out += R"(,"registration":)";
      append_json_string(out, r.id);
    }
    for (Section s : kSections) {
      const auto& section = entry.sections_[s == Section::reported ? 0 : 1];
      if (!section.version || !r.selects(s)) continue;
      member(to_string(s), R"({"version":)");
      out += entry[section.version];
      if (with_states && r.include_old) member("old", entry[section.old_state]);
      if (with_states && r.include_new) member("new", entry[section.new_state]);
      if (r.include_diff) member("diff", entry[section.changes]);
      out += '}';
    }
    if (entry.acknowledged_ && r.selects(Section::desired)) {
      out += R"(,"acknowledged":)";
      out += entry[entry.acknowledged_];
    }
    if (!with_states) out += R"(,"truncated":true)";
    out += "}}";
    return out;
  };
  const bool states = std::all_of(std::begin(entry.sections_), std::end(entry.sections_),
                                  [](const auto& s) { return !s.version || (s.old_state && s.new_state); });
  if (!states && (r.include_old || r.include_new)) return build(false);
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
