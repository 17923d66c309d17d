#include "query/filter.hpp"

#include "deviceshadow/error.hpp"
#include "deviceshadow/render.hpp"
#include "deviceshadow/validation.hpp"

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <limits>

namespace deviceshadow::query {
namespace {

constexpr const char* kExpectedProperty =
    "a property: thing, name, reported/<path>, desired/<path>, delta/<path> (optionally ending in @ts or @changed), "
    "_reportedVersion, _desiredVersion, _modified or _pending";
constexpr const char* kExpectedValue =
    "a value: a number, a \"string\", true, false, null, time:now or time:now-<ISO 8601 duration>";
constexpr const char* kExpectedOperator = "an operator: and, or, not, eq, ne, gt, ge, lt, le, in, like or exists";

[[noreturn]] void fail(std::size_t offset, std::string expected) { throw Error::invalid_filter(offset, std::move(expected)); }

// A literal of a filter.
struct Literal {
  enum class Type { null, boolean, number, string, time } type = Type::null;
  bool boolean = false;
  json::value number;
  std::string string;
  std::optional<Timestamp> time;  // Type::time; for a string, the instant it names if RFC 3339
};

// A value of the shadow a comparison looks at.
struct Operand {
  using Type = Sample::Type;
  Type type = Type::other;
  bool boolean = false;
  json::value number;
  std::string_view string;
  Timestamp time;
};

enum class Order { less, equal, greater, unequal, different_types };

Order from(std::partial_ordering o) {
  if (o == std::partial_ordering::less) return Order::less;
  if (o == std::partial_ordering::greater) return Order::greater;
  if (o == std::partial_ordering::equivalent) return Order::equal;
  return Order::unequal;
}

Order compare_numbers(const json::value& a, const json::value& b) {
  if (numbers_equal(a, b)) return Order::equal;
  auto as_long_double = [](const json::value& v) -> long double {
    if (v.is_int64()) return static_cast<long double>(v.get_int64());
    if (v.is_uint64()) return static_cast<long double>(v.get_uint64());
    return static_cast<long double>(v.get_double());
  };
  const bool integers = !a.is_double() && !b.is_double();
  if (integers && a.is_int64() != b.is_int64()) {  // one int64, one uint64 (above INT64_MAX)
    const bool a_negative = a.is_int64() && a.get_int64() < 0, b_negative = b.is_int64() && b.get_int64() < 0;
    if (a_negative != b_negative) return a_negative ? Order::less : Order::greater;
    return a.to_number<std::uint64_t>() < b.to_number<std::uint64_t>() ? Order::less : Order::greater;
  }
  return from(as_long_double(a) <=> as_long_double(b));
}

Order compare(const Operand& a, const Literal& l) {
  using T = Literal::Type;
  switch (a.type) {
    case Operand::Type::null: return l.type == T::null ? Order::equal : Order::different_types;
    case Operand::Type::boolean:
      if (l.type != T::boolean) return Order::different_types;
      return a.boolean == l.boolean ? Order::equal : Order::unequal;
    case Operand::Type::number: return l.type == T::number ? compare_numbers(a.number, l.number) : Order::different_types;
    case Operand::Type::string:
      if (l.type == T::string) return from(a.string.compare(l.string) <=> 0);
      if (l.type == T::time) {  // a string holding an RFC 3339 time compares with time:now
        if (auto t = parse_rfc3339(a.string)) return from(*t <=> *l.time);
      }
      return Order::different_types;
    case Operand::Type::time:
      if ((l.type == T::time || l.type == T::string) && l.time) return from(a.time <=> *l.time);
      return Order::different_types;
    case Operand::Type::other: return Order::different_types;
  }
  return Order::different_types;
}

std::size_t utf8_length(unsigned char lead) { return lead < 0x80 ? 1 : lead < 0xE0 ? 2 : lead < 0xF0 ? 3 : 4; }

// Decodes a property as written; `base` is its offset in the filter, for errors.
Property interpret(std::string_view text, std::size_t base) {
  using K = Property::Kind;
  Property p;
  p.text = std::string(text);
  static constexpr std::pair<std::string_view, K> kNamed[] = {
      {"thing", K::thing},
      {"name", K::name},
      {"_reportedVersion", K::reported_version},
      {"_desiredVersion", K::desired_version},
      {"_modified", K::modified},
      {"_pending", K::pending},
  };
  for (const auto& [name, kind] : kNamed) {
    if (text == name) {
      p.kind = kind;
      return p;
    }
  }
  const std::size_t slash = text.find('/');
  const std::string_view section = text.substr(0, slash);
  if (section == "reported") {
    p.kind = K::reported;
  } else if (section == "desired") {
    p.kind = K::desired;
  } else if (section == "delta") {
    p.kind = K::delta;
  } else {
    fail(base, kExpectedProperty);
  }
  if (slash == std::string_view::npos) return p;
  std::string_view rest = text.substr(slash + 1);
  if (rest.ends_with("@ts")) {
    p.suffix = Property::Suffix::ts;
    rest.remove_suffix(3);
  } else if (rest.ends_with("@changed")) {
    if (p.kind == K::delta) fail(base + text.size() - 8, "@ts or no suffix (delta has no change times: use desired/<path>@changed)");
    p.suffix = Property::Suffix::changed;
    rest.remove_suffix(8);
  }
  std::size_t at = slash + 1;
  std::string token;
  for (std::size_t i = 0; i <= rest.size(); ++i) {
    if (i == rest.size() || rest[i] == '/') {
      p.path.push_back(std::move(token));
      token.clear();
    } else if (rest[i] == '~') {
      if (i + 1 >= rest.size() || (rest[i + 1] != '0' && rest[i + 1] != '1')) fail(base + at + i, "~0 or ~1 (a JSON Pointer escape)");
      token += rest[++i] == '0' ? '~' : '/';
    } else {
      token += rest[i];
    }
  }
  return p;
}

// The array index a reference token names ("0", "17"; no sign, no leading zero), if any.
std::optional<std::size_t> array_index(const std::string& t) {
  if (t.empty() || t.size() > 9 || (t[0] == '0' && t.size() > 1)) return std::nullopt;
  if (!std::all_of(t.begin(), t.end(), [](char c) { return c >= '0' && c <= '9'; })) return std::nullopt;
  return std::stoul(t);
}

// The nodes at `path` from `node`; through an array whose next token is no index of it, every
// element is followed (a comparison on an array matches when any element does).
void collect(const json::value& node, const std::vector<std::string>& path, std::size_t i,
             std::vector<const json::value*>& out) {
  if (i == path.size()) {
    out.push_back(&node);
    return;
  }
  if (const json::object* o = node.if_object()) {
    if (const json::value* m = o->if_contains(path[i])) collect(*m, path, i + 1, out);
  } else if (const json::array* a = node.if_array()) {
    if (auto k = array_index(path[i])) {
      if (*k < a->size()) collect((*a)[*k], path, i + 1, out);
    } else {
      for (const json::value& e : *a) collect(e, path, i, out);
    }
  }
}

// The node at `path` as a JSON Pointer reads it (array elements by index only), or nullptr.
const json::value* at_pointer(const json::object& root, const std::vector<std::string>& path) {
  if (path.empty()) return nullptr;
  const json::value* node = root.if_contains(path[0]);
  for (std::size_t i = 1; node && i < path.size(); ++i) {
    if (const json::object* o = node->if_object()) {
      node = o->if_contains(path[i]);
    } else if (const json::array* a = node->if_array()) {
      auto k = array_index(path[i]);
      node = k && *k < a->size() ? &(*a)[*k] : nullptr;
    } else {
      node = nullptr;
    }
  }
  return node;
}

Section section_of(Property::Kind k) { return k == Property::Kind::reported ? Section::reported : Section::desired; }

const json::object& root_of(const Subject& s, const Property& p) {
  return p.kind == Property::Kind::delta ? s.delta() : s.state(section_of(p.kind));
}

// The latest time in a times tree (leaf_times.hpp), or `fallback` where it holds none.
std::int64_t latest(const json::value& t, std::int64_t fallback) {
  if (t.is_int64()) return t.get_int64();
  const json::object* o = t.if_object();
  if (!o || o->empty()) return fallback;
  std::int64_t best = std::numeric_limits<std::int64_t>::min();
  for (const auto& m : *o) best = std::max(best, latest(m.value(), fallback));
  return best;
}

void add_scalar(const json::value& v, std::vector<Operand>& out) {
  Operand o;
  switch (v.kind()) {
    case json::kind::null: o.type = Operand::Type::null; break;
    case json::kind::bool_: o.type = Operand::Type::boolean, o.boolean = v.get_bool(); break;
    case json::kind::int64:
    case json::kind::uint64:
    case json::kind::double_: o.type = Operand::Type::number, o.number = v; break;
    case json::kind::string: o.type = Operand::Type::string, o.string = v.get_string(); break;
    default: o.type = Operand::Type::other;
  }
  out.push_back(o);
}

// A leaf as comparisons see it: a timestamped value by its value, an array by its elements.
void add_value(const json::value& v, const TimestampKeys& keys, std::vector<Operand>& out, bool in_array = false) {
  if (const json::object* o = v.if_object(); o && keys.find(*o)) {
    if (const json::value* value = o->if_contains("value")) return add_value(*value, keys, out, in_array);
    out.push_back({});  // the payload, an object
    return;
  }
  if (const json::array* a = v.if_array(); a && !in_array) {
    for (const json::value& e : *a) add_value(e, keys, out, true);
    return;
  }
  add_scalar(v, out);
}

void add_time(Timestamp t, std::vector<Operand>& out) {
  Operand o;
  o.type = Operand::Type::time;
  o.time = t;
  out.push_back(o);
}

// The nodes a section property with a path names in `s` (several through arrays).
std::vector<const json::value*> section_nodes(const Subject& s, const Property& p) {
  std::vector<const json::value*> nodes;
  const json::object& root = root_of(s, p);
  if (const json::value* first = root.if_contains(p.path[0])) collect(*first, p.path, 1, nodes);
  return nodes;
}

// What `p` holds in `s`: nothing when the shadow has no such value.
std::vector<Operand> resolve(const Subject& s, const Property& p) {
  using K = Property::Kind;
  std::vector<Operand> out;
  auto text = [&](std::string_view v) {
    Operand o;
    o.type = Operand::Type::string;
    o.string = v;
    out.push_back(o);
  };
  auto number = [&](std::uint64_t v) {
    Operand o;
    o.type = Operand::Type::number;
    o.number = v;
    out.push_back(o);
  };
  const ShadowRecord& r = s.record();
  switch (p.kind) {
    case K::thing: text(s.key().thing); return out;
    case K::name: text(s.key().name); return out;
    case K::reported_version: number(r.reported.exists() ? r.reported.version : 0); return out;
    case K::desired_version: number(r.desired.exists() ? r.desired.version : 0); return out;
    case K::modified:
      if (r.exists()) add_time(Timestamp::from_unix_nanos(s.modified_ns()), out);
      return out;
    case K::pending: {
      Operand o;
      o.type = Operand::Type::boolean;
      o.boolean = !s.delta().empty();
      out.push_back(o);
      return out;
    }
    case K::reported:
    case K::desired:
    case K::delta: break;
  }
  if (p.path.empty()) {  // the section itself
    const bool present = p.kind == K::delta ? !s.delta().empty() : r.section(section_of(p.kind)).exists();
    if (present) out.push_back({});
    return out;
  }
  const std::vector<const json::value*> nodes = section_nodes(s, p);
  switch (p.suffix) {
    case Property::Suffix::none:
      for (const json::value* n : nodes) add_value(*n, s.timestamp_keys(), out);
      break;
    case Property::Suffix::ts:
      for (const json::value* n : nodes) {
        auto add = [&](const json::value& v) {
          if (const json::object* o = v.if_object()) {
            if (const json::value* ts = s.timestamp_keys().find(*o)) {
              if (auto t = parse_timestamp(*ts)) add_time(*t, out);
            }
          }
        };
        if (const json::array* a = n->if_array()) {
          for (const json::value& e : *a) add(e);
        } else {
          add(*n);
        }
      }
      break;
    case Property::Suffix::changed:
      if (!nodes.empty()) add_time(Timestamp::from_unix_nanos(s.leaf_time(section_of(p.kind), p.path)), out);
      break;
  }
  return out;
}

bool is_thing(const Property& p) { return p.kind == Property::Kind::thing; }

}  // namespace

// A `like` pattern (`*` any run of characters, `?` exactly one code point, anything else
// itself) as an automaton run on every state at once, one bit a state: time in proportion to the
// string's length times the pattern's in 64ths, whatever both hold (a backtracking matcher can
// take their product). Matched byte by byte on valid UTF-8: a `?` takes a first byte, then the
// continuation bytes after it.
class Glob {
 public:
  explicit Glob(std::string_view pattern) {
    std::size_t state = 0;  // how many of the pattern's bytes and `?`s have matched
    std::vector<std::pair<unsigned char, std::size_t>> literals;
    std::vector<std::size_t> questions, stars, after_question;
    for (const char c : pattern) {
      if (c == '*') {
        stars.push_back(state);
      } else if (c == '?') {
        questions.push_back(++state);
      } else {
        literals.emplace_back(static_cast<unsigned char>(c), ++state);
      }
    }
    accept_ = state;
    words_ = state / 64 + 1;
    auto set = [&](std::vector<std::uint64_t>& bits, std::size_t row, std::size_t at) {
      bits[row * words_ + at / 64] |= std::uint64_t{1} << (at % 64);
    };
    loops_.assign(2 * words_, 0);  // row 0: any byte (a `*`); row 1: continuation bytes (a `?`)
    for (std::size_t at : stars) set(loops_, 0, at);
    for (std::size_t at : questions) set(loops_, 1, at);
    // Row 0: a first byte the pattern does not hold (its `?`s take it); row 1: such a
    // continuation byte; then one row for each byte it holds.
    masks_.assign(2 * words_, 0);
    for (std::size_t at : questions) set(masks_, 0, at);
    row_.fill(0);
    for (unsigned c = 0x80; c < 0xC0; ++c) row_[c] = 1;
    for (const auto& [byte, at] : literals) {
      if (row_[byte] < 2) {
        row_[byte] = static_cast<std::uint16_t>(masks_.size() / words_);
        masks_.resize(masks_.size() + words_, 0);
        if (!continuation(byte)) std::copy_n(masks_.begin(), words_, masks_.end() - static_cast<std::ptrdiff_t>(words_));
      }
      set(masks_, row_[byte], at);
    }
  }

  bool matches(std::string_view s) const {
    std::vector<std::uint64_t> states(words_, 0);
    states[0] = 1;
    for (const char ch : s) {
      const auto byte = static_cast<unsigned char>(ch);
      const std::uint64_t* mask = &masks_[row_[byte] * words_];
      const std::uint64_t* question = continuation(byte) ? &loops_[words_] : nullptr;
      std::uint64_t carry = 0, any = 0;
      for (std::size_t w = 0; w < words_; ++w) {
        const std::uint64_t d = states[w];
        std::uint64_t next = (((d << 1) | carry) & mask[w]) | (d & loops_[w]);
        if (question) next |= d & question[w];
        carry = d >> 63;
        states[w] = next;
        any |= next;
      }
      if (!any) return false;
    }
    return states[accept_ / 64] >> (accept_ % 64) & 1;
  }

 private:
  static bool continuation(unsigned char byte) { return (byte & 0xC0) == 0x80; }

  std::size_t words_ = 1, accept_ = 0;
  std::vector<std::uint64_t> loops_;  // the states that stay on a byte: 2 rows of words_
  std::vector<std::uint64_t> masks_;  // the states a byte enters from the one before: rows of words_
  std::array<std::uint16_t, 256> row_{};  // each byte's row of masks_
};

struct Filter::Node {
  enum class Op { and_, or_, not_, eq, ne, gt, ge, lt, le, in, like, exists } op = Op::and_;
  std::vector<Node> children;
  Property property;
  std::vector<Literal> values;
  std::shared_ptr<const Glob> pattern;  // like: values' one string, compiled
};

namespace {

using Op = Filter::Node::Op;

bool holds(Op op, Order o) {
  switch (op) {
    case Op::eq:
    case Op::in: return o == Order::equal;
    case Op::ne: return o != Order::equal;
    case Op::gt: return o == Order::greater;
    case Op::ge: return o == Order::greater || o == Order::equal;
    case Op::lt: return o == Order::less;
    case Op::le: return o == Order::less || o == Order::equal;
    default: return false;
  }
}

bool evaluate(const Filter::Node& n, const Subject& s) {
  switch (n.op) {
    case Op::and_: return std::all_of(n.children.begin(), n.children.end(), [&](const Filter::Node& c) { return evaluate(c, s); });
    case Op::or_: return std::any_of(n.children.begin(), n.children.end(), [&](const Filter::Node& c) { return evaluate(c, s); });
    case Op::not_: return !evaluate(n.children.front(), s);
    case Op::exists:  // a leaf holding an empty array exists, though no comparison sees an element
      if (n.property.in_section() && !n.property.path.empty() && n.property.suffix == Property::Suffix::none) {
        return !section_nodes(s, n.property).empty();
      }
      return !resolve(s, n.property).empty();
    case Op::like:
      for (const Operand& o : resolve(s, n.property)) {
        if (o.type == Operand::Type::string && n.pattern->matches(o.string)) return true;
      }
      return false;
    default:
      for (const Operand& o : resolve(s, n.property)) {
        for (const Literal& l : n.values) {
          if (holds(n.op, compare(o, l))) return true;
        }
      }
      return false;
  }
}

class Parser {
 public:
  Parser(std::string_view text, std::int64_t now_ns, const FilterLimits& limits) : t_(text), now_(now_ns), limits_(limits) {}

  Filter::Node parse() {
    if (t_.size() > limits_.max_bytes) fail(limits_.max_bytes, "the end of the filter (at most " + std::to_string(limits_.max_bytes) + " bytes)");
    for (std::size_t i = 0; i < t_.size();) {
      const std::size_t n = utf8_length(static_cast<unsigned char>(t_[i]));
      if (!is_valid_utf8(t_.substr(i, n)) || i + n > t_.size()) fail(i, "valid UTF-8");
      i += n;
    }
    Filter::Node root = expr(1);
    space();
    if (i_ != t_.size()) fail(i_, "the end of the filter");
    return root;
  }

 private:
  void space() {
    while (i_ < t_.size() && (t_[i_] == ' ' || t_[i_] == '\t' || t_[i_] == '\n' || t_[i_] == '\r')) ++i_;
  }
  void expect(char c) {
    space();
    if (i_ >= t_.size() || t_[i_] != c) fail(i_, std::string("'") + c + "'");
    ++i_;
  }
  // Whether the next character is ',' (consumed) or ')' (consumed); anything else fails.
  bool comma_or_close() {
    space();
    if (i_ < t_.size() && (t_[i_] == ',' || t_[i_] == ')')) return t_[i_++] == ',';
    fail(i_, "',' or ')'");
  }
  static bool bare(char c) {
    return c != '(' && c != ')' && c != ',' && c != '"' && c != ' ' && c != '\t' && c != '\n' && c != '\r';
  }
  std::string_view word() {
    const std::size_t start = i_;
    while (i_ < t_.size() && bare(t_[i_])) ++i_;
    return t_.substr(start, i_ - start);
  }

  Filter::Node expr(std::size_t depth) {
    space();
    const std::size_t start = i_;
    while (i_ < t_.size() && t_[i_] >= 'a' && t_[i_] <= 'z') ++i_;
    const std::string_view name = t_.substr(start, i_ - start);
    static constexpr std::pair<std::string_view, Op> kOps[] = {
        {"and", Op::and_}, {"or", Op::or_}, {"not", Op::not_}, {"eq", Op::eq},     {"ne", Op::ne},       {"gt", Op::gt},
        {"ge", Op::ge},    {"lt", Op::lt},  {"le", Op::le},    {"in", Op::in},     {"like", Op::like},   {"exists", Op::exists},
    };
    const auto* known = std::find_if(std::begin(kOps), std::end(kOps), [&](const auto& k) { return k.first == name; });
    if (known == std::end(kOps)) fail(start, kExpectedOperator);
    if (depth > limits_.max_depth) fail(start, "a shallower filter (calls nest at most " + std::to_string(limits_.max_depth) + " deep)");
    Filter::Node n;
    n.op = known->second;
    expect('(');
    switch (n.op) {
      case Op::and_:
      case Op::or_:
        do n.children.push_back(expr(depth + 1));
        while (comma_or_close());
        return n;
      case Op::not_:
        n.children.push_back(expr(depth + 1));
        expect(')');
        return n;
      default: break;
    }
    if (++comparisons_ > limits_.max_comparisons) {
      fail(start, "fewer comparisons (at most " + std::to_string(limits_.max_comparisons) + ")");
    }
    n.property = property();
    if (n.op == Op::exists) {
      expect(')');
      return n;
    }
    expect(',');
    if (n.op == Op::like) {
      space();
      if (i_ >= t_.size() || t_[i_] != '"') fail(i_, "a \"string\" pattern");
      n.values.push_back(value());
      n.pattern = std::make_shared<const Glob>(n.values.back().string);
      expect(')');
      return n;
    }
    if (n.op != Op::in) {
      n.values.push_back(value());
      expect(')');
      return n;
    }
    do {
      space();
      if (n.values.size() == limits_.max_in_values) fail(i_, "')' (in() takes at most " + std::to_string(limits_.max_in_values) + " values)");
      n.values.push_back(value());
    } while (comma_or_close());
    return n;
  }

  Property property() {
    space();
    const std::size_t start = i_;
    if (i_ < t_.size() && t_[i_] == '"') {
      Literal quoted = string_literal();
      return interpret(quoted.string, start);
    }
    const std::string_view text = word();
    if (text.empty()) fail(start, kExpectedProperty);
    return interpret(text, start);
  }

  Literal string_literal() {
    const std::size_t start = i_;
    std::size_t j = i_ + 1;
    while (j < t_.size() && t_[j] != '"') {
      if (static_cast<unsigned char>(t_[j]) < 0x20) fail(j, "'\"' (control characters in strings must be escaped)");
      j += t_[j] == '\\' ? 2 : 1;
    }
    if (j >= t_.size()) fail(t_.size(), "'\"' closing the string");
    i_ = j + 1;
    Literal l;
    l.type = Literal::Type::string;
    try {
      l.string = std::string(parse_json(t_.substr(start, i_ - start)).get_string());
    } catch (const Error& e) {
      const std::uint64_t column = e.details().column.value_or(1);
      fail(start + (column > 0 ? column - 1 : 0), "a valid JSON string escape");
    }
    l.time = parse_rfc3339(l.string);
    return l;
  }

  Literal value() {
    space();
    const std::size_t start = i_;
    if (i_ < t_.size() && t_[i_] == '"') return string_literal();
    const std::string_view w = word();
    Literal l;
    if (w == "true" || w == "false") {
      l.type = Literal::Type::boolean;
      l.boolean = w == "true";
    } else if (w == "null") {
      l.type = Literal::Type::null;
    } else if (w.starts_with("time:now")) {
      l.type = Literal::Type::time;
      l.time = Timestamp::from_unix_nanos(now_);
      if (w.size() > 8) {
        if (w[8] != '-') fail(start + 8, "'-' and an ISO 8601 duration (e.g. time:now-PT15M)");
        l.time = Timestamp::from_unix_nanos(before(now_, w.substr(9), start + 9));
      }
    } else if (!w.empty() && (w[0] == '-' || (w[0] >= '0' && w[0] <= '9'))) {
      try {
        l.number = parse_json(w);
      } catch (const Error&) {
      }
      if (!l.number.is_number()) fail(start, "a JSON number");
      l.type = Literal::Type::number;
    } else {
      fail(start, kExpectedValue);
    }
    return l;
  }

  // `now` less an ISO 8601 duration ("PT15M", "P1DT12H", "PT0.5S", "P1M"), in Unix ns. Years
  // and months are calendar ones, taken from now's UTC date first (a day past the month's end
  // becomes its last day: 31 March less P1M is 28 or 29 February); the rest is fixed. The last
  // component may have a fraction, unless it is years or months.
  static std::int64_t before(std::int64_t now, std::string_view d, std::size_t base) {
    constexpr const char* kExpected = "an ISO 8601 duration (e.g. PT15M, P1D, P1M)";
    if (d.empty() || d[0] != 'P' || d.size() < 2) fail(base, kExpected);
    constexpr long double kSecond = 1e9L;
    constexpr long double kMonthDays = 365.2425L / 12;  // a Gregorian month on average
    // 200 Gregorian years (73,048.5 days; P200Y exactly): now minus it fits in int64 ns.
    constexpr long double kMax = 2400.0L * kMonthDays * 86400 * kSecond;
    long double fixed = 0;
    long long months = 0;
    bool in_time = false, any = false, fraction = false;
    std::string_view order = "YMWD";  // the designators still allowed, in order
    for (std::size_t i = 1; i < d.size();) {
      if (d[i] == 'T' && !in_time) {
        in_time = true;
        order = "HMS";
        ++i;
        continue;
      }
      const std::size_t start = i;
      if (fraction) fail(base + i, "the end of the duration (only its last number may have a fraction)");
      long double n = 0;
      while (i < d.size() && d[i] >= '0' && d[i] <= '9') n = n * 10 + (d[i++] - '0');
      if (i == start) fail(base + i, kExpected);
      std::size_t dot = std::string_view::npos;
      if (i < d.size() && (d[i] == '.' || d[i] == ',')) {
        long double scale = 0.1L;
        dot = i++;
        while (i < d.size() && d[i] >= '0' && d[i] <= '9') n += (d[i++] - '0') * scale, scale /= 10;
        if (i == dot + 1) fail(base + i, "a digit after the decimal sign");
        fraction = true;
      }
      if (i >= d.size()) fail(base + i, "a designator (Y, M, W, D, or after T: H, M, S)");
      const std::size_t at = order.find(d[i]);
      if (at == std::string_view::npos) fail(base + i, "a designator in order (Y, M, W, D, T, then H, M, S)");
      const bool calendar = !in_time && (d[i] == 'Y' || d[i] == 'M');
      if (calendar) {
        if (dot != std::string_view::npos) fail(base + dot, "whole years and months (they have no fixed length)");
        if (n * (d[i] == 'Y' ? 12 : 1) > 200 * 12) fail(base + start, "a duration of at most 200 years");
        months += static_cast<long long>(n) * (d[i] == 'Y' ? 12 : 1);
      } else {
        static constexpr std::pair<char, long double> kUnits[] = {{'W', 604800}, {'D', 86400}, {'H', 3600}};
        long double unit = 1;
        if (in_time && d[i] == 'M') unit = 60;
        for (const auto& [c, seconds] : kUnits) {
          if (c == d[i]) unit = seconds;
        }
        fixed += n * unit * kSecond;
      }
      if (fixed + static_cast<long double>(months) * kMonthDays * 86400 * kSecond > kMax) fail(base + start, "a duration of at most 200 years");
      order = order.substr(at + 1);
      any = true;
      ++i;
    }
    if (!any || d.back() == 'T') fail(base + d.size(), kExpected);
    return months_before(now, months) - static_cast<std::int64_t>(std::llround(fixed));
  }

  // `ns` moved back `months` calendar months in UTC, the time of day kept.
  static std::int64_t months_before(std::int64_t ns, long long months) {
    if (months == 0) return ns;
    using namespace std::chrono;
    const sys_time<nanoseconds> t{nanoseconds(ns)};
    const sys_days day = floor<days>(t);
    year_month_day ymd{day};
    const year_month ym = year_month(ymd.year(), ymd.month()) - std::chrono::months(months);
    const year_month_day_last last{ym.year(), month_day_last(ym.month())};
    const year_month_day moved = ymd.day() > last.day() ? year_month_day(last) : year_month_day(ym.year(), ym.month(), ymd.day());
    return (sys_days(moved) + (t - day)).time_since_epoch().count();
  }

  std::string_view t_;
  std::size_t i_ = 0;
  std::int64_t now_;
  const FilterLimits& limits_;
  std::size_t comparisons_ = 0;
};

// The things a node can match within (see Filter::thing_ranges).
std::optional<std::vector<ThingRange>> ranges(const Filter::Node& n) {
  switch (n.op) {
    case Op::eq:
    case Op::in: {
      if (!is_thing(n.property)) return std::nullopt;
      std::vector<ThingRange> out;
      for (const Literal& l : n.values) {
        if (l.type == Literal::Type::string) out.push_back({l.string, false});
      }
      return out;
    }
    case Op::like: {
      if (!is_thing(n.property)) return std::nullopt;
      const std::string& pattern = n.values.front().string;
      const std::size_t wild = pattern.find_first_of("*?");
      if (wild == std::string::npos) return std::vector<ThingRange>{{pattern, false}};
      if (wild == 0) return std::nullopt;
      return std::vector<ThingRange>{{pattern.substr(0, wild), true}};
    }
    case Op::and_:
      for (const Filter::Node& c : n.children) {
        if (auto r = ranges(c)) return r;
      }
      return std::nullopt;
    case Op::or_: {
      std::vector<ThingRange> out;
      for (const Filter::Node& c : n.children) {
        auto r = ranges(c);
        if (!r) return std::nullopt;
        out.insert(out.end(), r->begin(), r->end());
      }
      return out;
    }
    default: return std::nullopt;
  }
}

// Narrows `b` to what `n` allows (see Filter::thing_bounds); false when it allows any thing.
bool narrow(const Filter::Node& n, ThingBounds& b) {
  if (n.op == Op::and_) {
    bool any = false;
    for (const Filter::Node& c : n.children) any = narrow(c, b) || any;
    return any;
  }
  const bool lower = n.op == Op::gt || n.op == Op::ge, upper = n.op == Op::lt || n.op == Op::le;
  if (!is_thing(n.property) || (!lower && !upper) || n.values.front().type != Literal::Type::string) return false;
  const std::string& v = n.values.front().string;
  if (lower && v.empty()) return false;  // ge(thing,""), gt(thing,""): every thing
  const bool open = n.op == Op::gt || n.op == Op::lt;
  if (lower && (!b.low || v > *b.low || (v == *b.low && open))) b.low = v, b.low_open = open;
  if (upper && (!b.high || v < *b.high || (v == *b.high && open))) b.high = v, b.high_open = open;
  return true;
}

// Appends the section fields and `name` under `n` (those a match must pass when `required`) to
// `out`, once.
void fields_worth_indexing(const Filter::Node& n, bool required, std::vector<std::string>& out) {
  if (n.op == Op::and_ || (!required && (n.op == Op::or_ || n.op == Op::not_))) {
    for (const Filter::Node& c : n.children) fields_worth_indexing(c, required, out);
    return;
  }
  if (n.op == Op::or_ || n.op == Op::not_ || !indexable(n.property)) return;
  // Every shadow has a name and the pseudo fields: no index narrows their `exists` or `ne`.
  if (!n.property.in_section() && (n.op == Op::exists || n.op == Op::ne)) return;
  if (std::find(out.begin(), out.end(), n.property.text) == out.end()) out.push_back(n.property.text);
}

// The index ranges one literal selects under `op` on a property of times (`@ts`, `@changed`,
// `_modified`) or not (see IndexableComparison). A string holding an RFC 3339 time selects that
// time on a property of times and the string elsewhere, as the comparison does: a leaf's string
// is entered as a time too, for time:now, but compares with a string bytewise.
void add_ranges(Op op, const Literal& l, bool of_times, std::vector<IndexRange>& out, bool& exact) {
  using T = IndexValue::Type;
  auto add = [&](T type, std::optional<IndexValue> v) {
    IndexRange r{type};
    const bool low = op == Op::eq || op == Op::in || op == Op::gt || op == Op::ge;
    const bool high = op == Op::eq || op == Op::in || op == Op::lt || op == Op::le;
    if (low) r.low = v, r.low_open = op == Op::gt;
    if (high) r.high = v, r.high_open = op == Op::lt;
    out.push_back(std::move(r));
  };
  // Entries hold times as Unix ns, those outside 1677–2262 as the span's nearest end: a time at
  // or past an end selects the end, closed, and its candidates are tested.
  auto add_time = [&](Timestamp t) {
    const std::int64_t ns = t.unix_nanos();
    if (ns == std::numeric_limits<std::int64_t>::min() || ns == std::numeric_limits<std::int64_t>::max()) {
      exact = false;
      op = op == Op::gt ? Op::ge : op == Op::lt ? Op::le : op;
    }
    add(T::time, IndexValue::of_time(ns));
  };
  const bool strict = op == Op::gt || op == Op::lt;
  switch (l.type) {
    case Literal::Type::null:  // only equal to null; unordered
    case Literal::Type::boolean:
      if (strict) return;
      {
        IndexValue v{l.type == Literal::Type::null ? T::null : T::boolean, l.boolean ? 1 : 0};
        IndexRange r{v.type, v, v};
        out.push_back(std::move(r));
      }
      return;
    case Literal::Type::number: {
      IndexValue v = index_number(l.number);
      if (v.real && v.number >= 0x1p63) {
        // Entries hold a whole number past int64 as the double it rounds to, as other numbers
        // do: the range takes in what rounds alike (a strict bound closed), and its candidates
        // are tested.
        exact = false;
        op = op == Op::gt ? Op::ge : op == Op::lt ? Op::le : op;
      }
      add(T::number, v);
      return;
    }
    case Literal::Type::string: {
      if (of_times) {
        if (l.time) add_time(*l.time);
        return;
      }
      IndexValue v{T::string};
      v.text = l.string;
      add(T::string, v);
      return;
    }
    case Literal::Type::time: add_time(*l.time); return;
  }
}

// The smallest string greater than every string with this prefix ("" if there is none).
std::string prefix_successor(std::string prefix) {
  while (!prefix.empty() && static_cast<unsigned char>(prefix.back()) == 0xFF) prefix.pop_back();
  if (!prefix.empty()) prefix.back() = static_cast<char>(static_cast<unsigned char>(prefix.back()) + 1);
  return prefix;
}

std::optional<IndexableComparison> indexable_comparison(const Filter::Node& n) {
  if (n.op == Op::or_) {  // every member selectable: the union of what they select
    IndexableComparison u;
    for (const Filter::Node& child : n.children) {
      std::optional<IndexableComparison> m = indexable_comparison(child);
      if (!m) return std::nullopt;
      for (IndexableComparison::Part& part : m->parts) u.parts.push_back(std::move(part));
      u.exact = u.exact && m->exact;
    }
    return u;
  }
  const Property& p = n.property;
  if (p.kind == Property::Kind::thing || p.kind == Property::Kind::delta || (p.in_section() && p.path.empty())) {
    return std::nullopt;
  }
  IndexableComparison c{{{&p, {}}}};
  std::vector<IndexRange>& ranges = c.parts.front().ranges;
  switch (n.op) {
    case Op::eq:
    case Op::in:
    case Op::gt:
    case Op::ge:
    case Op::lt:
    case Op::le:
      for (const Literal& l : n.values) {
        add_ranges(n.op, l, p.suffix != Property::Suffix::none || p.kind == Property::Kind::modified, ranges, c.exact);
      }
      return c;
    case Op::like: {  // with a literal prefix: else it would select every string
      const std::string& pattern = n.values.front().string;
      IndexRange r{IndexValue::Type::string};
      const std::string prefix = pattern.substr(0, pattern.find_first_of("*?"));
      if (prefix.empty()) return std::nullopt;
      r.low = IndexValue{IndexValue::Type::string, 0, 0, false, prefix};
      if (prefix.size() == pattern.size()) {
        r.high = r.low;
      } else if (std::string next = prefix_successor(prefix); !next.empty()) {
        r.high = IndexValue{IndexValue::Type::string, 0, 0, false, std::move(next)};
        r.high_open = true;
      }
      c.exact = prefix.size() == pattern.size() || pattern.substr(prefix.size()).find_first_not_of('*') == std::string::npos;
      ranges.push_back(std::move(r));
      return c;
    }
    default: return std::nullopt;
  }
}

}  // namespace

Property parse_property(std::string_view text, std::string_view field) {
  try {
    if (text.empty() || !is_valid_utf8(text)) throw Error::invalid_filter(0, kExpectedProperty);
    return interpret(text, 0);
  } catch (const Error& e) {
    throw Error::invalid_request(std::string(field) + ": '" + std::string(text) + "' at offset " +
                                     std::to_string(e.details().offset.value_or(0)) + ": expected " + e.details().expected,
                                 std::string(field));
  }
}

Subject::Subject(const ShadowKey& key, const ShadowRecord& record, const TimestampKeys& keys)
    : key_(key), record_(record), keys_(keys) {}

Subject::~Subject() = default;

const json::object& Subject::state(Section section) const {
  std::optional<json::object>& slot = states_[section == Section::desired];
  if (!slot) {
    const SectionRecord& r = record_.section(section);
    json::value v = r.exists() ? parse_stored_json(r.state_json) : json::value(json::object());
    slot = v.is_object() ? std::move(v.get_object()) : json::object();
  }
  return *slot;
}

const json::object& Subject::delta() const {
  if (!delta_) delta_ = compute_delta(state(Section::desired), state(Section::reported), keys_);
  return *delta_;
}

std::int64_t Subject::leaf_time(Section section, const std::vector<std::string>& path) const {
  const SectionRecord& r = record_.section(section);
  std::optional<json::value>& slot = times_[section == Section::desired];
  if (!slot) {
    slot.emplace();
    if (!r.times_json.empty()) {
      try {
        *slot = parse_stored_json(r.times_json);
      } catch (const Error&) {  // unreadable times read as the section's time
      }
    }
  }
  const json::value* node = &*slot;
  for (const std::string& token : path) {
    if (node->is_int64()) return node->get_int64();
    const json::object* o = node->if_object();
    node = o ? o->if_contains(token) : nullptr;
    if (!node) return r.timestamp_ns;
  }
  return latest(*node, r.timestamp_ns);
}

std::int64_t Subject::modified_ns() const noexcept {
  std::int64_t t = 0;
  for (const SectionRecord* r : {&record_.reported, &record_.desired}) {
    if (r->exists()) t = std::max(t, r->timestamp_ns);
  }
  return t;
}

bool append_property(std::string& out, const Subject& s, const Property& p) {
  using K = Property::Kind;
  const ShadowRecord& r = s.record();
  auto time = [&](Timestamp t) { append_json_string(out, format_rfc3339(t)); };
  switch (p.kind) {
    case K::thing: append_json_string(out, s.key().thing); return true;
    case K::name: append_json_string(out, s.key().name); return true;
    case K::reported_version: out += std::to_string(r.reported.exists() ? r.reported.version : 0); return true;
    case K::desired_version: out += std::to_string(r.desired.exists() ? r.desired.version : 0); return true;
    case K::modified:
      if (!r.exists()) return false;
      time(Timestamp::from_unix_nanos(s.modified_ns()));
      return true;
    case K::pending: out += s.delta().empty() ? "false" : "true"; return true;
    case K::reported:
    case K::desired:
    case K::delta: break;
  }
  if (p.path.empty()) {
    if (p.kind == K::delta) {
      append_json(out, json::value(s.delta()));
    } else {
      append_section_view(out, r.section(section_of(p.kind)));
    }
    return true;
  }
  const json::value* node = at_pointer(root_of(s, p), p.path);
  if (!node) return false;
  switch (p.suffix) {
    case Property::Suffix::none: append_json(out, *node); return true;
    case Property::Suffix::changed: time(Timestamp::from_unix_nanos(s.leaf_time(section_of(p.kind), p.path))); return true;
    case Property::Suffix::ts:
      if (const json::object* o = node->if_object()) {
        if (const json::value* ts = s.timestamp_keys().find(*o)) {
          if (auto t = parse_timestamp(*ts)) {
            time(*t);
            return true;
          }
        }
      }
      return false;
  }
  return false;
}

namespace {

std::vector<Sample> to_samples(const std::vector<Operand>& operands) {
  std::vector<Sample> out;
  for (const Operand& o : operands) {
    Sample& x = out.emplace_back();
    x.type = o.type;
    switch (o.type) {
      case Operand::Type::boolean: x.json = o.boolean; break;
      case Operand::Type::number: x.json = o.number; break;
      case Operand::Type::string: x.json = json::string(o.string); break;
      case Operand::Type::time: x.time = o.time; break;
      default: break;
    }
  }
  return out;
}

}  // namespace

std::vector<Sample> samples(const Subject& subject, const Property& property) { return to_samples(resolve(subject, property)); }

std::vector<Sample> samples_of(const json::value& value, const TimestampKeys& keys) {
  std::vector<Operand> operands;
  add_value(value, keys, operands);
  return to_samples(operands);
}

Filter::Filter() = default;

Filter Filter::parse(std::string_view text, std::int64_t now_ns, const FilterLimits& limits) {
  Filter f;
  f.root_ = std::make_shared<const Node>(Parser(text, now_ns, limits).parse());
  return f;
}

bool Filter::matches(const Subject& subject) const { return !root_ || evaluate(*root_, subject); }

std::optional<std::vector<ThingRange>> Filter::thing_ranges() const {
  return root_ ? ranges(*root_) : std::nullopt;
}

std::optional<ThingBounds> Filter::thing_bounds() const {
  ThingBounds b;
  if (!root_ || !narrow(*root_, b)) return std::nullopt;
  return b;
}

std::vector<IndexableComparison> Filter::indexable() const {
  std::vector<IndexableComparison> out;
  if (!root_) return out;
  if (root_->op != Op::and_) {
    if (auto c = indexable_comparison(*root_)) out.push_back(std::move(*c)), out.back().whole = out.back().exact;
    return out;
  }
  for (const Node& child : root_->children) {
    if (child.op == Op::and_ || child.op == Op::not_) continue;
    if (auto c = indexable_comparison(child)) out.push_back(std::move(*c));
  }
  if (root_->children.size() == 1 && out.size() == 1) out.front().whole = out.front().exact;
  return out;
}

std::vector<std::string> Filter::fields_to_index() const {
  std::vector<std::string> out;
  if (!root_) return out;
  fields_worth_indexing(*root_, true, out);
  fields_worth_indexing(*root_, false, out);
  return out;
}

bool indexable(const Property& p) noexcept {
  using K = Property::Kind;
  switch (p.kind) {
    case K::reported:
    case K::desired: return !p.path.empty();
    case K::name:
    case K::modified:
    case K::reported_version:
    case K::desired_version:
    case K::pending: return true;
    case K::thing:
    case K::delta: return false;
  }
  return false;
}

IndexValue index_number(const json::value& number) {
  IndexValue v{IndexValue::Type::number};
  if (number.is_int64()) {
    v.integer = number.get_int64();
  } else {
    v.real = true;
    v.number = number.to_number<double>();
  }
  return v;
}

}  // namespace deviceshadow::query
