#include "query/aggregate.hpp"

#include "deviceshadow/error.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>

namespace deviceshadow::query {
namespace {

__extension__ using Int128 = __int128;  // a sum of integer samples, exact (2^64 of them fit)

// A sample as a long double, which holds every int64, uint64 and double exactly (a double holds
// integers only to 2^53): min, max and percentiles are values that were reported.
long double exactly(const json::value& v) {
  if (v.is_int64()) return static_cast<long double>(v.get_int64());
  if (v.is_uint64()) return static_cast<long double>(v.get_uint64());
  return static_cast<long double>(v.get_double());
}

// What one metric has seen in one group.
struct Accumulator {
  std::uint64_t numbers = 0, times = 0;
  long double min = std::numeric_limits<long double>::infinity(), max = -std::numeric_limits<long double>::infinity();
  Int128 integer_sum = 0;
  long double double_sum = 0;  // wider than any value: finite values never sum to infinity
  bool doubles = false;        // a sample was not an integer: the sum is not exact
  Timestamp earliest{std::numeric_limits<std::int64_t>::max(), 0}, latest{std::numeric_limits<std::int64_t>::min(), 0};
  std::vector<long double> all;  // percentiles only

  void add(const json::value& v, bool keep) {
    ++numbers;
    const long double x = exactly(v);
    min = std::min(min, x);
    max = std::max(max, x);
    if (v.is_int64()) {
      integer_sum += v.get_int64();
    } else if (v.is_uint64()) {
      integer_sum += v.get_uint64();
    } else {
      double_sum += v.get_double();
      doubles = true;
    }
    if (keep) all.push_back(x);
  }
  void merge(const Accumulator& o) {
    numbers += o.numbers;
    times += o.times;
    min = std::min(min, o.min);
    max = std::max(max, o.max);
    integer_sum += o.integer_sum;
    double_sum += o.double_sum;
    doubles = doubles || o.doubles;
    earliest = std::min(earliest, o.earliest);
    latest = std::max(latest, o.latest);
    all.insert(all.end(), o.all.begin(), o.all.end());
  }
};

// A number (as exactly() holds it) in one form per value, so that equal numbers (1, 1.0, 1e0)
// write alike: a whole number within 64-bit range as that integer, anything else as the double
// it came from, in shortest round-trip form.
void append_number(std::string& out, long double v) {
  if (std::trunc(v) == v && v >= -0x1p63L && v < 0x1p63L) {
    out += std::to_string(static_cast<std::int64_t>(v));
  } else if (std::trunc(v) == v && v >= 0 && v < 0x1p64L) {
    out += std::to_string(static_cast<std::uint64_t>(v));
  } else {
    append_json(out, json::value(static_cast<double>(v)));
  }
}

void append_integer(std::string& out, Int128 v) {
  char digits[41];
  char* at = std::end(digits);
  const bool negative = v < 0;
  do {  // digit by digit from the lowest, each taken of a non-positive remainder (no overflow)
    const Int128 digit = v % 10;
    *--at = static_cast<char>('0' + (digit < 0 ? -digit : digit));
    v /= 10;
  } while (v != 0);
  if (negative) *--at = '-';
  out.append(at, std::end(digits));
}

// A sum or mean that is not an integer: as a double, or, past a double's range, to 17
// significant digits, as precise as a double's (JSON numbers have no range).
void append_real(std::string& out, long double v) {
  if (std::fabs(v) <= std::numeric_limits<double>::max()) return append_number(out, static_cast<long double>(static_cast<double>(v)));
  char text[64];
  out.append(text, static_cast<std::size_t>(std::snprintf(text, sizeof text, "%.17Lg", v)));
}

// The sum of the numbers seen, exact when every one was an integer; their mean when `mean`,
// exact when that is an integer too.
void append_sum(std::string& out, const Accumulator& a, bool mean) {
  const auto n = static_cast<Int128>(a.numbers);
  if (!a.doubles && (!mean || a.integer_sum % n == 0)) return append_integer(out, mean ? a.integer_sum / n : a.integer_sum);
  const long double sum = static_cast<long double>(a.integer_sum) + a.double_sum;
  append_real(out, mean ? sum / static_cast<long double>(a.numbers) : sum);
}

void append_time(std::string& out, Timestamp t) { append_json_string(out, format_rfc3339(t)); }

[[noreturn]] void bad_metric(const std::string& label, std::string_view why) {
  throw Error::invalid_request("metrics." + label + ": " + std::string(why), "metrics." + label);
}

}  // namespace

struct Aggregation::Group {
  std::string key;  // {"prop":value,…}
  std::uint64_t count = 0;
  std::vector<Accumulator> metrics;
};

Metric parse_metric(std::string label, std::string_view text) {
  Metric m;
  m.label = std::move(label);
  if (m.label.empty() || m.label == "key" || m.label == "groups") bad_metric(m.label, "a label may not be empty, key or groups");
  const std::size_t open = text.find('(');
  if (open == std::string_view::npos || !text.ends_with(")")) {
    bad_metric(m.label, "expected count(), min(prop), max(prop), sum(prop), avg(prop) or percentiles(prop,50,95,99)");
  }
  const std::string_view name = text.substr(0, open);
  std::string_view args = text.substr(open + 1, text.size() - open - 2);
  static constexpr std::pair<std::string_view, Metric::Kind> kKinds[] = {
      {"count", Metric::Kind::count}, {"min", Metric::Kind::min}, {"max", Metric::Kind::max},
      {"sum", Metric::Kind::sum},     {"avg", Metric::Kind::avg}, {"percentiles", Metric::Kind::percentiles},
  };
  const auto* kind = std::find_if(std::begin(kKinds), std::end(kKinds), [&](const auto& k) { return k.first == name; });
  if (kind == std::end(kKinds)) bad_metric(m.label, "unknown metric '" + std::string(name) + "'");
  m.kind = kind->second;
  if (m.kind == Metric::Kind::count) {
    if (!args.empty()) bad_metric(m.label, "count() takes no property");
    return m;
  }
  if (m.kind == Metric::Kind::percentiles) {  // the property, then the percents: the numbers at its end
    constexpr const char* kPercents = "percentiles(prop,p1,…) takes 1 to 20 different percents in (0, 100]";
    while (true) {
      const std::size_t comma = args.rfind(',');
      if (comma == std::string_view::npos) break;
      std::string_view token = args.substr(comma + 1);
      token.remove_prefix(std::min(token.find_first_not_of(' '), token.size()));
      // A token that starts as a number is a percent (a key of the property cannot start so).
      if (token.empty() || std::string_view("0123456789.+-").find(token.front()) == std::string_view::npos) break;
      const std::string percent(token);
      char* end = nullptr;
      const double p = std::strtod(percent.c_str(), &end);
      const bool decimal = percent.find_first_not_of("0123456789.eE+-") == std::string::npos && *end == '\0';
      if (!decimal || !(p > 0 && p <= 100)) bad_metric(m.label, std::string(kPercents) + ", not " + percent);
      if (std::any_of(m.percents.begin(), m.percents.end(), [&](const Metric::Percent& q) { return q.value == p; })) {
        bad_metric(m.label, std::string(kPercents) + ": " + percent + " is given twice");
      }
      m.percents.insert(m.percents.begin(), {p, percent});
      args = args.substr(0, comma);
    }
    if (m.percents.empty() || m.percents.size() > 20) bad_metric(m.label, kPercents);
  }
  m.property = parse_property(args, "metrics." + m.label);
  return m;
}

Aggregation::Aggregation(std::vector<Property> group_by, std::vector<Metric> metrics, std::size_t max_groups)
    : group_by_(std::move(group_by)), metrics_(std::move(metrics)), max_groups_(max_groups) {
  if (group_by_.empty()) groups_["{}"] = {"{}", 0, std::vector<Accumulator>(metrics_.size())};
}

Aggregation::~Aggregation() = default;

void Aggregation::add(const Subject& subject) {
  std::string key = "{";
  for (const Property& p : group_by_) {
    if (key.size() > 1) key += ',';
    append_json_string(key, p.text);
    key += ':';
    std::vector<Sample> values = samples(subject, p);
    if (values.size() > 1) key += '[';
    for (std::size_t i = 0; i < values.size(); ++i) {
      if (i) key += ',';
      if (values[i].type == Sample::Type::time) {
        append_time(key, values[i].time);
      } else if (values[i].type == Sample::Type::number) {
        append_number(key, exactly(values[i].json));  // 1 and 1.0 are one group
      } else {
        append_json(key, values[i].json);  // null for an object
      }
    }
    if (values.size() > 1) key += ']';
    if (values.empty()) key += "null";
  }
  key += '}';
  Group& g = groups_[key];
  if (g.key.empty()) g = {key, 0, std::vector<Accumulator>(metrics_.size())};
  ++g.count;
  for (std::size_t i = 0; i < metrics_.size(); ++i) {
    const Metric& m = metrics_[i];
    if (m.kind == Metric::Kind::count) continue;
    Accumulator& a = g.metrics[i];
    for (const Sample& s : samples(subject, m.property)) {
      if (s.type == Sample::Type::number) {
        a.add(s.json, m.kind == Metric::Kind::percentiles);
      } else if (s.type == Sample::Type::time) {
        ++a.times;
        a.earliest = std::min(a.earliest, s.time);
        a.latest = std::max(a.latest, s.time);
      }
    }
  }
}

std::string Aggregation::render() const {
  std::vector<const Group*> order;
  for (const auto& [key, g] : groups_) order.push_back(&g);
  std::stable_sort(order.begin(), order.end(), [](const Group* a, const Group* b) { return a->count > b->count; });
  auto append_metrics = [&](std::string& out, std::uint64_t count, const std::vector<Accumulator>& acc) {
    for (std::size_t i = 0; i < metrics_.size(); ++i) {
      const Metric& m = metrics_[i];
      const Accumulator& a = acc[i];
      out += ',';
      append_json_string(out, m.label);
      out += ':';
      switch (m.kind) {
        case Metric::Kind::count: out += std::to_string(count); break;
        case Metric::Kind::min:
        case Metric::Kind::max:
          if (a.numbers) {
            append_number(out, m.kind == Metric::Kind::min ? a.min : a.max);
          } else if (a.times) {
            append_time(out, m.kind == Metric::Kind::min ? a.earliest : a.latest);
          } else {
            out += "null";
          }
          break;
        case Metric::Kind::sum:
        case Metric::Kind::avg:
          if (!a.numbers) {
            out += "null";
          } else {
            append_sum(out, a, m.kind == Metric::Kind::avg);
          }
          break;
        case Metric::Kind::percentiles: {
          if (a.all.empty()) {
            out += "null";
            break;
          }
          std::vector<long double> sorted = a.all;
          std::sort(sorted.begin(), sorted.end());
          out += '{';
          for (std::size_t k = 0; k < m.percents.size(); ++k) {  // nearest rank: a value that was seen
            if (k) out += ',';
            append_json_string(out, m.percents[k].text);
            out += ':';
            const double rank = std::ceil(m.percents[k].value / 100.0 * static_cast<double>(sorted.size()));
            append_number(out, sorted[std::clamp<std::size_t>(static_cast<std::size_t>(rank), 1, sorted.size()) - 1]);
          }
          out += '}';
          break;
        }
      }
    }
  };
  std::string out = "{\"groups\":[";
  for (std::size_t i = 0; i < order.size() && i < max_groups_; ++i) {
    if (i) out += ',';
    out += "{\"key\":" + order[i]->key;
    append_metrics(out, order[i]->count, order[i]->metrics);
    out += '}';
  }
  out += ']';
  if (order.size() > max_groups_) {
    std::uint64_t count = 0;
    std::vector<Accumulator> rest(metrics_.size());
    for (std::size_t i = max_groups_; i < order.size(); ++i) {
      count += order[i]->count;
      for (std::size_t k = 0; k < rest.size(); ++k) rest[k].merge(order[i]->metrics[k]);
    }
    out += ",\"other\":{\"groups\":" + std::to_string(order.size() - max_groups_);
    append_metrics(out, count, rest);
    out += '}';
  }
  return out + "}";
}

}  // namespace deviceshadow::query
