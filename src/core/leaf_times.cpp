// Per-leaf change times: maintenance on every write and their reading (leaf_times.hpp).
#include "deviceshadow/leaf_times.hpp"

#include "core/tree.hpp"

#include "deviceshadow/arena.hpp"
#include "deviceshadow/error.hpp"

#include <charconv>
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

// The next reference token of a JSON Pointer from `pos`, false at the end. The token refers into
// `pointer`, or into `buffer` when it needed unescaping.
bool next_token(std::string_view pointer, std::size_t& pos, std::string_view& token, std::string& buffer) {
  if (pos >= pointer.size()) return false;
  const std::size_t end = std::min(pointer.find('/', pos + 1), pointer.size());
  token = pointer.substr(pos + 1, end - pos - 1);
  pos = end;
  if (token.find('~') == std::string_view::npos) return true;
  buffer.clear();
  for (std::size_t i = 0; i < token.size(); ++i) {
    if (token[i] == '~' && i + 1 < token.size()) {
      buffer += token[++i] == '1' ? '/' : '~';
    } else {
      buffer += token[i];
    }
  }
  token = buffer;
  return true;
}

// find_member that first tries the previous match again: consecutive changes often share a parent.
template <class Object>
auto find_near(Object& o, std::string_view key, std::size_t& hint) noexcept -> decltype(o.begin()) {
  if (hint > 0 && hint <= o.size()) {
    auto it = o.begin() + static_cast<std::ptrdiff_t>(hint - 1);
    if (std::string_view(it->key().data(), it->key().size()) == key) return it;
  }
  return find_member(o, key, hint);
}

// Applies the changes of one write to a times tree.
class TimesUpdater {
 public:
  TimesUpdater(json::value& root, const json::object& state, std::int64_t previous_ns, std::int64_t ts)
      : root_(root), state_(state), previous_ns_(previous_ns), ts_(ts) {}

  // Changes come in document order and times list members in the state's order, so each
  // level's lookups start after the previous match (find_member's hint).
  void apply(const Change& c) {
    const bool remove = c.op == ChangeOp::remove;
    json::value* times = &root_;         // the times of the node at the path walked so far
    const json::object* node = &state_;  // that node in the state after the write
    json::object* parent = nullptr;      // the times holding `times`, under the key `parent_key_`
    std::size_t pos = 0;
    std::string_view token;
    if (!next_token(c.path, pos, token, buffer_)) return;  // the root is never a leaf
    for (std::size_t depth = 0;; ++depth) {
      if (hints_.size() <= depth) hints_.resize(depth + 1);
      Hints& hints = hints_[depth];
      json::object& members = expand(*times, *node);
      if (hints.node != node || hints.members != &members) hints = {node, &members};
      const auto found = find_near(*node, token, hints.state);
      const json::value* child = found == node->end() ? nullptr : &found->value();
      const bool last = pos >= c.path.size();
      auto member = find_near(members, token, hints.times);
      if (last || (child && child->is_array())) {  // a leaf, or the array that holds one
        if (!remove || !last) {
          if (member != members.end()) {
            member->value() = ts_;
          } else {
            members.emplace(token, ts_);
          }
        } else {
          if (member != members.end()) members.stable_erase(member);
          emptied(members, *node, parent);
        }
        return;
      }
      if (!child || !child->is_object()) {  // the subtree is gone: so are its times
        if (member != members.end()) members.stable_erase(member);
        emptied(members, *node, parent);
        return;
      }
      json::value* next = member != members.end() ? &member->value()
                                                  : &members.emplace(token, previous_ns_).first->value();  // unknown: the old section time
      parent = &members;
      parent_key_.assign(token);
      times = next;
      node = &child->get_object();
      if (!next_token(c.path, pos, token, buffer_)) return;
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
  struct Hints {  // of the objects last walked at one depth
    const json::object* node = nullptr;
    const json::object* members = nullptr;
    std::size_t state = 0;
    std::size_t times = 0;
  };
  std::vector<Hints> hints_;  // per depth
  std::string buffer_;        // an unescaped token
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

// Appends the compact JSON of a times tree.
void append_times(std::string& out, const json::value& v) {
  if (const json::object* o = v.if_object()) {
    out += '{';
    for (const json::key_value_pair& m : *o) {
      append_json_string(out, std::string_view(m.key().data(), m.key().size()));
      out += ':';
      append_times(out, m.value());
      out += ',';
    }
    if (out.back() == ',') out.pop_back();
    out += '}';
  } else if (v.is_int64()) {
    char buf[24];
    out.append(buf, std::to_chars(buf, buf + sizeof buf, v.get_int64()).ptr);
  } else {
    append_json(out, v);  // not a time: kept as it is, read as unknown
  }
}

// Whether the additions and updates of one section cover every leaf of its state, listed in
// the state's document order (removals anywhere between): then every leaf has the write's
// time and the previous times need not be read. Any other order answers false.
class CoverCheck {
 public:
  CoverCheck(std::span<const Change> changes, Section section) : changes_(changes), section_(section) {}

  bool members(const json::object& o) {
    for (const json::key_value_pair& m : o) {
      const std::size_t mark = path_.size();
      append_pointer_token(path_, std::string_view(m.key().data(), m.key().size()));
      const bool covered = value(m.value());
      path_.resize(mark);
      if (!covered) return false;
    }
    return true;
  }

 private:
  bool value(const json::value& v) {
    while (next_ < changes_.size() && (changes_[next_].section != section_ || changes_[next_].op == ChangeOp::remove)) {
      ++next_;
    }
    if (next_ < changes_.size() && changes_[next_].path == path_) {  // the node changed whole
      ++next_;
      return true;
    }
    const json::object* o = v.if_object();
    return o && !o->empty() && members(*o);
  }

  std::span<const Change> changes_;
  Section section_;
  std::size_t next_ = 0;
  std::string path_;
};

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
  const TimestampKeys& keys;

  bool is_leaf(const json::object& o) const { return keys.find(o) != nullptr; }
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
  // A write that changed every leaf (a device reporting all its values) needs no old time.
  if (first != changes.end() && CoverCheck(std::span(first, changes.end()), section).members(state)) {
    return state.empty() ? "{}" : std::to_string(ts);
  }
  unsigned char buffer[4096];  // most times fit; larger ones continue on the heap
  Arena arena(buffer, sizeof buffer);
  json::value times = parse_times(previous, previous_ns, &arena);
  TimesUpdater updater(times, state, previous_ns, ts);
  for (auto it = first; it != changes.end(); ++it) {
    if (it->section == section) updater.apply(*it);
  }
  collapse(times);
  std::string out;
  out.reserve(previous.size() + 32);
  append_times(out, times);
  return out;
}

void append_leaf_times(std::string& out, const json::object& state, std::string_view times, std::int64_t section_ns,
                       const TimestampKeys& keys, LeafTimeFormat format) {
  read_times(out, state, times, section_ns, V1Style{keys, format});
}

void append_aws_metadata(std::string& out, const json::object& state, std::string_view times_json,
                         std::int64_t section_ns, const TimestampKeys& keys) {
  read_times(out, state, times_json, section_ns, AwsStyle{keys});
}

}  // namespace deviceshadow
