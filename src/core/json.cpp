#include "deviceshadow/json.hpp"
#include "deviceshadow/json_builder.hpp"

#include "deviceshadow/error.hpp"

#include <boost/json/basic_parser_impl.hpp>

#include <array>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <limits>

namespace deviceshadow {
namespace {

// The double of a JSON number's text without an exponent part and with at most 15 digits:
// the digits and the power of ten are then exact doubles, so one division rounds correctly
// (Clinger's fast path). Returns false for any other text, which std::from_chars must read.
bool parse_short_double(std::string_view text, double& out) noexcept {
  static constexpr double kPow10[] = {1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15};
  const char* p = text.data();
  const char* end = p + text.size();
  const bool negative = p != end && *p == '-';
  p += negative;
  std::uint64_t digits = 0;
  int count = 0, fraction = 0;
  for (; p != end && *p >= '0' && *p <= '9'; ++p, ++count) digits = digits * 10 + static_cast<unsigned>(*p - '0');
  if (p != end && *p == '.') {
    for (++p; p != end && *p >= '0' && *p <= '9'; ++p, ++count, ++fraction) {
      digits = digits * 10 + static_cast<unsigned>(*p - '0');
    }
  }
  if (p != end || count > 15) return false;
  out = static_cast<double>(digits) / kPow10[fraction];
  if (negative) out = -out;
  return true;
}

void line_and_column(std::string_view text, std::size_t offset, std::uint64_t& line,
                     std::uint64_t& column) {
  line = 1;
  std::size_t line_start = 0;
  for (std::size_t i = 0; i < offset && i < text.size(); ++i) {
    if (text[i] == '\n') {
      ++line;
      line_start = i + 1;
    }
  }
  column = offset - line_start + 1;
}

}  // namespace

bool ValueBuilder::on_double(double, json::string_view s, json::error_code& ec) {
  std::string_view text(s.data(), s.size());
  if (!number_text.empty()) {
    number_text.append(s.data(), s.size());
    text = number_text;
  }
  double d = 0;
  if (parse_short_double(text, d)) {
    number_text.clear();
    stack.push_double(d);
    return true;
  }
  auto [ptr, err] = std::from_chars(text.data(), text.data() + text.size(), d);
  number_text.clear();
  if (err == std::errc::result_out_of_range) {
    // from_chars leaves d unset; strtod tells overflow (infinite) from underflow, which
    // rounds to zero or a subnormal and is a faithful reading of the text.
    d = std::strtod(std::string(text).c_str(), nullptr);
  } else if (err != std::errc() || ptr != text.data() + text.size()) {
    number_out_of_range = true;
    ec = json::error::exponent_overflow;
    return false;
  }
  if (!std::isfinite(d)) {
    number_out_of_range = true;
    ec = json::error::exponent_overflow;
    return false;
  }
  stack.push_double(d);
  return true;
}

json::value parse_request_json(std::string_view text, std::size_t limit, std::size_t envelope) {
  try {
    return parse_json(text, limit + envelope + 8);
  } catch (const Error& e) {
    if (e.code() == ErrorCode::too_deep) throw Error::too_deep("", limit);
    throw;
  }
}

json::value parse_stored_json(std::string_view text, json::storage_ptr sp) {
  try {
    return parse_json(text, kStoredDepthBound, std::move(sp));
  } catch (const Error& e) {
    throw Error(ErrorCode::internal, std::string("stored data is not valid JSON: ") + e.what());
  }
}

json::value parse_json(std::string_view text, std::size_t max_depth, json::storage_ptr sp) {
  json::parse_options options;
  options.max_depth = max_depth;
  unsigned char scratch[4096];
  json::basic_parser<ValueBuilder> parser(options, scratch, sizeof scratch);
  parser.handler().stack.reset(std::move(sp));
  json::error_code ec;
  std::size_t consumed = parser.write_some(false, text.data(), text.size(), ec);
  if (!ec && consumed < text.size()) ec = json::error::extra_data;
  if (ec) {
    if (ec == json::error::too_deep) {
      throw Error::too_deep("", max_depth);
    }
    std::uint64_t line = 0, column = 0;
    line_and_column(text, consumed, line, column);
    std::string what;
    if (parser.handler().number_out_of_range) {
      what = "number out of range";
    } else if (ec == json::error::extra_data) {
      what = "unexpected data after the JSON document";
    } else if (ec == json::error::incomplete) {
      what = text.empty() ? "empty document" : "unexpected end of JSON";
    } else if (consumed < text.size() && static_cast<unsigned char>(text[consumed]) >= 0x80) {
      what = "invalid UTF-8";
    } else {
      what = "invalid JSON (" + ec.message() + ")";
    }
    throw Error::invalid_json(std::move(what), line, column);
  }
  return parser.handler().stack.release();
}

namespace {

template <class Integer>
void append_integer(std::string& out, Integer i) {
  char buf[24];
  auto [end, err] = std::to_chars(buf, buf + sizeof buf, i);
  out.append(buf, end);
}

// Writes d as m / 10^k for the smallest k <= 4 that reads back exactly, when that form is
// the one std::to_chars would choose (fixed notation strictly shorter than scientific:
// 0.01 <= |d| < 1e15 with a fraction, or an integer below 1e4). Returns false otherwise.
// Most sensor values take this path, which is several times cheaper than to_chars.
bool append_short_decimal(std::string& out, double d) {
  static constexpr double kPow10[] = {1, 10, 100, 1000, 10000};
  const double magnitude = std::fabs(d);
  if (!(magnitude >= 0.01 && magnitude < 1e15)) return false;
  for (int k = 0; k <= 4; ++k) {
    const double scaled = d * kPow10[k];
    if (std::fabs(scaled) >= 9007199254740992.0) return false;  // m must be exact
    const double m = std::nearbyint(scaled);
    // m / 10^k is correctly rounded, so equality means the decimal text reads back as d.
    if (m / kPow10[k] != d) continue;
    if (k == 0 && magnitude >= 1e4) return false;  // 10000.0 is "1e+04" for to_chars
    char digits[24];
    auto [end, err] = std::to_chars(digits, digits + sizeof digits, static_cast<std::int64_t>(std::fabs(m)));
    std::string_view text(digits, static_cast<std::size_t>(end - digits));
    if (d < 0 || (d == 0 && std::signbit(d))) out += '-';
    if (k == 0) {
      out += text;
      out += ".0";
    } else if (text.size() > static_cast<std::size_t>(k)) {
      out += text.substr(0, text.size() - k);
      out += '.';
      out += text.substr(text.size() - k);
    } else {
      out += "0.";
      out.append(static_cast<std::size_t>(k) - text.size(), '0');
      out += text;
    }
    return true;
  }
  return false;
}

void append_double(std::string& out, double d) {
  if (!std::isfinite(d)) {
    out += "null";
    return;
  }
  if (append_short_decimal(out, d)) return;
  char buf[32];
  auto [end, err] = std::to_chars(buf, buf + sizeof buf, d);
  std::string_view text(buf, static_cast<std::size_t>(end - buf));
  if (text.find_first_of(".e") != std::string_view::npos) {
    out += text;
    return;
  }
  // An integral double keeps its double-ness visible so that it reads back as a double: below
  // 1e16 with ".0" (427000.0), from there in shortest scientific form (2^64 is
  // 1.8446744073709552e+19, not 18446744073709551616.0) -- the forms Python's repr writes.
  if (std::fabs(d) < 1e16) {
    out += text;
    out += ".0";
    return;
  }
  char* scientific_end = std::to_chars(buf, buf + sizeof buf, d, std::chars_format::scientific).ptr;
  out.append(buf, scientific_end);
}

// True for the bytes a JSON string must escape: control characters, '"' and '\\'.
constexpr auto kMustEscape = [] {
  std::array<bool, 256> table{};
  for (int c = 0; c < 0x20; ++c) table[c] = true;
  table['"'] = table['\\'] = true;
  return table;
}();

}  // namespace

void append_json_string(std::string& out, std::string_view s) {
  static constexpr char hex[] = "0123456789abcdef";
  out.reserve(out.size() + s.size() + 2);
  out += '"';
  const char* run = s.data();  // start of the pending run of bytes that need no escaping
  const char* end = s.data() + s.size();
  for (const char* p = run; p != end; ++p) {
    const auto c = static_cast<unsigned char>(*p);
    if (!kMustEscape[c]) continue;
    out.append(run, p);
    run = p + 1;
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      default:
        out += "\\u00";
        out += hex[c >> 4];
        out += hex[c & 0xF];
    }
  }
  out.append(run, end);
  out += '"';
}

void append_json(std::string& out, const json::value& v) {
  switch (v.kind()) {
    case json::kind::null: out += "null"; break;
    case json::kind::bool_: out += v.get_bool() ? "true" : "false"; break;
    case json::kind::int64: append_integer(out, v.get_int64()); break;
    case json::kind::uint64: append_integer(out, v.get_uint64()); break;
    case json::kind::double_: append_double(out, v.get_double()); break;
    case json::kind::string: {
      const json::string& s = v.get_string();
      append_json_string(out, std::string_view(s.data(), s.size()));
      break;
    }
    case json::kind::array: {
      out += '[';
      bool first = true;
      for (const json::value& e : v.get_array()) {
        if (!first) out += ',';
        first = false;
        append_json(out, e);
      }
      out += ']';
      break;
    }
    case json::kind::object: {
      out += '{';
      bool first = true;
      for (const json::key_value_pair& m : v.get_object()) {
        if (!first) out += ',';
        first = false;
        append_json_string(out, std::string_view(m.key().data(), m.key().size()));
        out += ':';
        append_json(out, m.value());
      }
      out += '}';
      break;
    }
  }
}

std::string to_json(const json::value& v) {
  std::string out;
  out.reserve(256);
  append_json(out, v);
  return out;
}

void append_pointer_token(std::string& pointer, std::string_view key) {
  pointer += '/';
  for (char c : key) {
    if (c == '~') {
      pointer += "~0";
    } else if (c == '/') {
      pointer += "~1";
    } else {
      pointer += c;
    }
  }
}

void append_pointer_index(std::string& pointer, std::size_t index) {
  pointer += '/';
  append_integer(pointer, index);
}

namespace {

// Exact comparison of a double with an integer: equal only if d is integral and, converted
// without rounding, is the same integer.
bool double_equals_int64(double d, std::int64_t i) noexcept {
  if (d != std::trunc(d) || d < -9223372036854775808.0 || d >= 9223372036854775808.0) return false;
  return static_cast<std::int64_t>(d) == i;
}

bool double_equals_uint64(double d, std::uint64_t u) noexcept {
  if (d != std::trunc(d) || d < 0 || d >= 18446744073709551616.0) return false;
  return static_cast<std::uint64_t>(d) == u;
}

}  // namespace

bool numbers_equal(const json::value& a, const json::value& b) noexcept {
  switch (a.kind()) {
    case json::kind::int64:
      switch (b.kind()) {
        case json::kind::int64: return a.get_int64() == b.get_int64();
        case json::kind::uint64:
          return a.get_int64() >= 0 && static_cast<std::uint64_t>(a.get_int64()) == b.get_uint64();
        case json::kind::double_: return double_equals_int64(b.get_double(), a.get_int64());
        default: return false;
      }
    case json::kind::uint64:
      switch (b.kind()) {
        case json::kind::int64:
        case json::kind::double_: return numbers_equal(b, a);
        case json::kind::uint64: return a.get_uint64() == b.get_uint64();
        default: return false;
      }
    case json::kind::double_:
      switch (b.kind()) {
        case json::kind::int64: return double_equals_int64(a.get_double(), b.get_int64());
        case json::kind::uint64: return double_equals_uint64(a.get_double(), b.get_uint64());
        case json::kind::double_: return a.get_double() == b.get_double();
        default: return false;
      }
    default: return false;
  }
}

}  // namespace deviceshadow
