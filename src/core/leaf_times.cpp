// Per-leaf change times: maintenance on every write and their reading (leaf_times.hpp).
#include "deviceshadow/leaf_times.hpp"

#include "deviceshadow/arena.hpp"
#include "deviceshadow/error.hpp"

#include <charconv>
#include <limits>
#include <vector>

namespace deviceshadow {
namespace {

constexpr std::size_t kMaxTimesDepth = 512;

// The stored times as a tree in `sp`: an object or an integer; `fallback` for "" and for text
// that is not such JSON.
json::value parse_times(std::string_view text, std::int64_t fallback, const json::storage_ptr& sp) {
  if (!text.empty()) {
    try {
      json::value v = parse_json(text, kMaxTimesDepth, sp);
      if (v.is_object() || v.is_int64()) return v;
    } catch (const Error&) {
    }
  }
  return json::value(fallback, sp);
}

// The next reference token of a JSON Pointer from `pos` (unescaped into `token`); false at the end.
bool next_token(std::string_view pointer, std::size_t& pos, std::string& token) {
  if (pos >= pointer.size()) return false;
  const std::size_t end = std::min(pointer.find('/', pos + 1), pointer.size());
  token.clear();
  for (std::size_t i = pos + 1; i < end; ++i) {
    if (pointer[i] == '~' && i + 1 < end) {
      token += pointer[++i] == '1' ? '/' : '~';
    } else {
      token += pointer[i];
    }
  }
  pos = end;
  return true;
}

// Applies the changes of one write to a times tree.
class TimesUpdater {
 public:
  TimesUpdater(json::value& root, const json::object& state, std::int64_t previous_ns, std::int64_t ts)
      : root_(root), state_(state), previous_ns_(previous_ns), ts_(ts) {}

  void apply(const Change& c) {
    const bool remove = c.op == ChangeOp::remove;
    json::value* times = &root_;         // the times of the node at the path walked so far
    const json::object* node = &state_;  // that node in the state after the write
    json::object* parent = nullptr;      // the times holding `times`, under the key `parent_key_`
    std::size_t pos = 0;
    if (!next_token(c.path, pos, token_)) return;  // the root is never a leaf
    for (;;) {
      json::object& members = expand(*times, *node);
      const json::value* child = node->if_contains(token_);
      const bool last = pos >= c.path.size();
      if (last || (child && child->is_array())) {  // a leaf, or the array that holds one
        if (remove && last) {
          members.erase(token_);
          emptied(members, *node, parent);
        } else {
          members[token_] = ts_;
        }
        return;
      }
      if (!child || !child->is_object()) {  // the subtree is gone: so are its times
        members.erase(token_);
        emptied(members, *node, parent);
        return;
      }
      json::value* next = members.if_contains(token_);
      if (!next) next = &members.emplace(token_, previous_ns_).first->value();  // unknown: the old section time
      parent = &members;
      parent_key_.swap(token_);
      times = next;
      node = &child->get_object();
      if (!next_token(c.path, pos, token_)) return;
    }
  }

 private:
  // The times of `node` as an object: an integer covering it becomes one per member.
  json::object& expand(json::value& times, const json::object& node) {
    if (times.is_object()) return times.get_object();
    const std::int64_t covering = times.is_int64() ? times.get_int64() : previous_ns_;
    json::object members(times.storage());
    members.reserve(node.size());
    for (const json::key_value_pair& m : node) members.emplace(m.key(), covering);
    times = std::move(members);
    return times.get_object();
  }

  // A removal that emptied an object the state still has made it an empty-object leaf, changed now.
  void emptied(const json::object& members, const json::object& node, json::object* parent) {
    if (members.empty() && node.empty() && parent) (*parent)[parent_key_] = ts_;
  }

  json::value& root_;
  const json::object& state_;
  std::int64_t previous_ns_;
  std::int64_t ts_;
  std::string token_;
  std::string parent_key_;
};

// Replaces each object whose members all hold one same integer by that integer; returns
// whether v is (now) an integer.
bool collapse(json::value& v) {
  json::object* o = v.if_object();
  if (!o) return v.is_int64();
  bool uniform = !o->empty();
  std::int64_t first = 0;
  for (json::key_value_pair& m : *o) {
    if (!collapse(m.value())) {
      uniform = false;
      continue;
    }
    if (&m == o->begin()) first = m.value().get_int64();
    uniform = uniform && m.value().get_int64() == first;
  }
  if (uniform) v = first;
  return uniform;
}

bool holds(const json::value& v, std::int64_t time) {
  if (const json::object* o = v.if_object()) {
    for (const json::key_value_pair& m : *o) {
      if (holds(m.value(), time)) return true;
    }
    return false;
  }
  return v.is_int64() && v.get_int64() == time;
}

// Walks a state with its times, giving each leaf its time (see leaf_times.hpp for the form).
// `Style` writes the leaves and says which objects are leaves and how arrays are rendered.
template <class Style>
class TimesReader {
 public:
  TimesReader(std::string& out, std::int64_t section_ns, const Style& style)
      : out_(out), section_ns_(section_ns), style_(style) {}

  // `times` is the node's times (nullptr: unknown), `inherited` the time of a node without.
  void value(const json::value& v, const json::value* times, std::int64_t inherited) {
    const std::int64_t own = times && times->is_int64() ? times->get_int64() : inherited;
    const json::object* o = v.if_object();
    if (o && !o->empty() && !style_.is_leaf(*o)) {
      object(*o, times, own);
    } else if (v.is_array() && Style::kArraysByElement) {
      out_ += '[';
      for (const json::value& e : v.get_array()) {
        value(e, nullptr, own);
        out_ += ',';
      }
      if (out_.back() == ',') out_.pop_back();
      out_ += ']';
    } else {
      style_.leaf(out_, own);
    }
  }

  // The members of an object node, each with its times.
  void object(const json::object& o, const json::value* times, std::int64_t inherited) {
    const json::object* members = times ? times->if_object() : nullptr;
    out_ += '{';
    for (const json::key_value_pair& m : o) {
      append_json_string(out_, m.key());
      out_ += ':';
      value(m.value(), members ? members->if_contains(m.key()) : nullptr, members ? section_ns_ : inherited);
      out_ += ',';
    }
    if (out_.back() == ',') out_.pop_back();
    out_ += '}';
  }

 private:
  std::string& out_;
  std::int64_t section_ns_;
  const Style& style_;
};

struct V1Style {
  static constexpr bool kArraysByElement = false;
  const TimestampKeys& keys;
  LeafTimeFormat format;

  bool is_leaf(const json::object& o) const { return keys.find(o) != nullptr; }
  void leaf(std::string& out, std::int64_t ns) const {
    if (format == LeafTimeFormat::rfc3339) {
      append_json_string(out, format_rfc3339(Timestamp::from_unix_nanos(ns)));
    } else {
      char buf[24];
      out.append(buf, std::to_chars(buf, buf + sizeof buf, ns).ptr);
    }
  }
};

struct AwsStyle {
  static constexpr bool kArraysByElement = true;

  bool is_leaf(const json::object&) const { return false; }
  void leaf(std::string& out, std::int64_t ns) const {
    constexpr std::int64_t kNanosPerSecond = 1'000'000'000;
    std::int64_t seconds = ns / kNanosPerSecond - (ns % kNanosPerSecond < 0 ? 1 : 0);
    char buf[24];
    out += "{\"timestamp\":";
    out.append(buf, std::to_chars(buf, buf + sizeof buf, seconds).ptr);
    out += '}';
  }
};

template <class Style>
void read_times(std::string& out, const json::object& state, std::string_view times_json, std::int64_t section_ns,
                const Style& style) {
  unsigned char buffer[4096];  // most times fit; larger ones continue on the heap
  Arena arena(buffer, sizeof buffer);
  const json::value times = parse_times(times_json, section_ns, &arena);
  const std::int64_t root_ns = times.is_int64() ? times.get_int64() : section_ns;
  TimesReader<Style>(out, section_ns, style).object(state, &times, root_ns);
}

}  // namespace

std::string update_leaf_times(std::string_view previous, std::int64_t previous_ns, const json::object& state,
                              std::span<const Change> changes, Section section, std::int64_t ts) {
  auto first = changes.begin();
  while (first != changes.end() && first->section != section) ++first;
  if (first == changes.end() && !previous.empty()) return std::string(previous);
  unsigned char buffer[4096];  // most times fit; larger ones continue on the heap
  Arena arena(buffer, sizeof buffer);
  auto updated = [&](json::value times, std::int64_t unknown) {
    TimesUpdater updater(times, state, unknown, ts);
    for (auto it = first; it != changes.end(); ++it) {
      if (it->section == section) updater.apply(*it);
    }
    collapse(times);
    return times;
  };
  // First without reading `previous`, every old time standing for "unknown": a write that
  // changed every leaf (a device reporting all its values) needs none of them.
  constexpr std::int64_t kUnknown = std::numeric_limits<std::int64_t>::min();
  json::value times = updated(json::value(kUnknown, &arena), kUnknown);
  if (holds(times, kUnknown)) times = updated(parse_times(previous, previous_ns, &arena), previous_ns);
  return to_json(times);
}

void append_leaf_times(std::string& out, const json::object& state, std::string_view times, std::int64_t section_ns,
                       const TimestampKeys& keys, LeafTimeFormat format) {
  read_times(out, state, times, section_ns, V1Style{keys, format});
}

void append_aws_metadata(std::string& out, const json::object& state, std::string_view times_json,
                         std::int64_t section_ns) {
  read_times(out, state, times_json, section_ns, AwsStyle{});
}

}  // namespace deviceshadow
