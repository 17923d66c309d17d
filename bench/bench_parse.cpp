// What parsing an incoming report costs, Boost.JSON (the document core's parser, into a
// per-request arena) against simdjson 3.0 (Debian's libsimdjson-dev), on the fixtures of
// bench/go_original/make_fixtures.py: is a faster parser worth the document core's change?
//
//   bench_parse FIXTURES_DIR     (bench/parse_compare.sh builds it and makes the fixtures)
//
// Prints, for each size, ns per report:
//   boost       ds::parse_json into an arena, as a report is parsed now
//   dom         simdjson's DOM parse (its tape; nothing the merge can walk)
//   dom+build   the DOM parse, then the same Boost.JSON document built from it in an arena:
//               the parse the core would get keeping Boost.JSON as its model
//   ondemand    simdjson On-Demand touching every key and value once, building nothing: the
//               floor of a merge that works on the text as it is parsed
#include "deviceshadow/arena.hpp"
#include "deviceshadow/json.hpp"

#include <simdjson.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace ds = deviceshadow;
namespace json = boost::json;

namespace {

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// Runs `op` in batches until a batch takes a second; ns per op of that batch.
template <typename Op>
double ns_per_op(Op op) {
  std::size_t sink = 0;
  for (std::size_t n = 16;; n *= 2) {
    const auto start = std::chrono::steady_clock::now();
    for (std::size_t i = 0; i < n; ++i) sink += op();
    const double ns = std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - start).count();
    if (ns >= 1e9) {
      if (sink == 42) std::puts("");  // keeps the work observable
      return ns / static_cast<double>(n);
    }
  }
}

json::value build(simdjson::dom::element e, const json::storage_ptr& sp) {
  switch (e.type()) {
    case simdjson::dom::element_type::OBJECT: {
      json::object o(sp);
      for (auto field : simdjson::dom::object(e)) o.emplace(field.key, build(field.value, sp));
      return o;
    }
    case simdjson::dom::element_type::ARRAY: {
      json::array a(sp);
      for (simdjson::dom::element v : simdjson::dom::array(e)) a.push_back(build(v, sp));
      return a;
    }
    case simdjson::dom::element_type::STRING: return json::string(std::string_view(e), sp);
    case simdjson::dom::element_type::INT64: return json::value(std::int64_t(e), sp);
    case simdjson::dom::element_type::UINT64: return json::value(std::uint64_t(e), sp);
    case simdjson::dom::element_type::DOUBLE: return json::value(double(e), sp);
    case simdjson::dom::element_type::BOOL: return json::value(bool(e), sp);
    case simdjson::dom::element_type::NULL_VALUE: return json::value(nullptr, sp);
  }
  return json::value(sp);
}

// Touches every key and scalar of an On-Demand value; returns a number that depends on them.
std::size_t touch(simdjson::ondemand::value v) {
  std::size_t n = 0;
  switch (v.type()) {
    case simdjson::ondemand::json_type::object:
      for (auto field : v.get_object()) {
        n += std::string_view(field.unescaped_key()).size();
        n += touch(field.value());
      }
      return n;
    case simdjson::ondemand::json_type::array:
      for (auto element : v.get_array()) n += touch(element.value());
      return n;
    case simdjson::ondemand::json_type::string: return std::string_view(v.get_string()).size();
    case simdjson::ondemand::json_type::number: return static_cast<std::size_t>(double(v.get_double()));
    case simdjson::ondemand::json_type::boolean: return bool(v.get_bool()) ? 1 : 0;
    case simdjson::ondemand::json_type::null: return v.is_null() ? 1 : 0;
  }
  return n;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: bench_parse FIXTURES_DIR\n");
    return 2;
  }
  std::vector<unsigned char> buffer(64 << 20);
  simdjson::dom::parser dom;
  simdjson::ondemand::parser ondemand;
  std::printf("leaves bytes boost_ns dom_ns dom_build_ns ondemand_ns\n");
  for (const char* leaves : {"10", "100", "1000"}) {
    const std::string text = read_file(std::string(argv[1]) + "/" + leaves + "/report.json");
    const simdjson::padded_string padded(text);
    const double boost = ns_per_op([&] {
      ds::Arena arena(buffer.data(), buffer.size());
      json::storage_ptr sp(&arena);
      return ds::parse_json(text, 64, sp).as_object().size();
    });
    const double dom_only = ns_per_op([&] { return dom.parse(padded).get_object().value().size(); });
    const double dom_build = ns_per_op([&] {
      ds::Arena arena(buffer.data(), buffer.size());
      json::storage_ptr sp(&arena);
      return build(dom.parse(padded).value(), sp).as_object().size();
    });
    const double walked = ns_per_op([&] {
      simdjson::ondemand::document doc = ondemand.iterate(padded);
      return touch(doc.get_value().value());
    });
    std::printf("%s %zu %.0f %.0f %.0f %.0f\n", leaves, text.size(), boost, dom_only, dom_build, walked);
  }
  return 0;
}
