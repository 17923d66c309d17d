// Runs the table-driven cases in cases/*.json through apply_update (and compute_delta).
//
// A case: {"name", "rule", "reported"?, "desired"?, "write"?: "reported"|"desired"|"both",
//          "state", "mode"?, "acknowledge"?, "arrays"?: "replace", "limits"?: {...},
//          "timestamp_keys"?: [...],
//          "expect": {"reported"?, "desired"?, "changes"?, "stale"?, "acknowledged"?,
//                     "changed"?, "delta"?}  |  "error": {"code", "path"?}}
// Omitted expectations are strict defaults: a section not named must be unchanged, lists
// not named must be empty, "changed" is true exactly when there are changes.
// With "write": "both", "state" is {"reported"?, "desired"?}: one write of both sections, and
// every expected change names its section. "rule" names the
// part of docs/semantics.md the case illustrates: a section ("acknowledgement", "equality",
// "limits", …) or a numbered rule of "Merge" ("merge 6").
#include "deviceshadow/document.hpp"
#include "deviceshadow/error.hpp"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

namespace ds = deviceshadow;
namespace json = boost::json;

namespace {

struct Case {
  std::string file;
  json::object spec;
};

void PrintTo(const Case& c, std::ostream* os) { *os << c.file << ": " << c.spec.at("name").as_string().c_str(); }

std::vector<Case> load_cases() {
  std::vector<Case> cases;
  std::vector<std::filesystem::path> files;
  for (const auto& entry : std::filesystem::directory_iterator(DS_CASES_DIR)) {
    if (entry.path().extension() == ".json") files.push_back(entry.path());
  }
  std::sort(files.begin(), files.end());
  for (const auto& path : files) {
    std::ifstream in(path);
    std::stringstream text;
    text << in.rdbuf();
    json::value file = ds::parse_json(text.str(), 256);
    for (const json::value& c : file.as_array()) {
      cases.push_back({path.stem().string(), c.as_object()});
    }
  }
  return cases;
}

const json::object& object_or_empty(const json::object& o, std::string_view key) {
  static const json::object empty;
  const json::value* v = o.if_contains(key);
  return v ? v->as_object() : empty;
}

std::string str(const json::value& v) { return ds::to_json(v); }

// The list rendered by append_json, read back as a JSON array.
template <class T>
json::value list_json(const std::vector<T>& items) {
  std::string text = "[";
  for (const auto& item : items) {
    if (text.size() > 1) text += ',';
    ds::append_json(text, item);
  }
  return ds::parse_json(text + "]");
}

class CaseTest : public ::testing::TestWithParam<Case> {};

TEST_P(CaseTest, Holds) {
  const json::object& c = GetParam().spec;
  SCOPED_TRACE(str(c));
  ds::DocumentOptions options;
  if (const json::value* limits = c.if_contains("limits")) {
    const json::object& l = limits->as_object();
    if (l.contains("max_depth")) options.limits.max_depth = l.at("max_depth").to_number<std::size_t>();
    if (l.contains("max_state_bytes")) options.limits.max_state_bytes = l.at("max_state_bytes").to_number<std::size_t>();
  }
  if (const json::value* keys = c.if_contains("timestamp_keys")) {
    std::vector<std::string> names;
    for (const json::value& k : keys->as_array()) names.emplace_back(k.as_string().c_str());
    options.timestamp_keys = ds::TimestampKeys(std::move(names));
  }
  ds::SectionWrite write;
  const bool both = c.contains("write") && c.at("write") == "both";
  if (const json::value* w = c.if_contains("write"); w && !both) write.section = *ds::parse_section(w->as_string().c_str());
  if (const json::value* m = c.if_contains("mode")) write.mode = *ds::parse_merge_mode(m->as_string().c_str());
  if (const json::value* a = c.if_contains("acknowledge")) write.acknowledge = a->as_bool();

  const json::object& reported = object_or_empty(c, "reported");
  const json::object& desired = object_or_empty(c, "desired");
  const json::object& incoming = c.at("state").as_object();
  const bool replace_arrays = c.contains("arrays") && c.at("arrays") == "replace";
  // The one-section overload unless the case needs the general one.
  auto apply = [&] {
    if (!both && !replace_arrays) return ds::apply_update(reported, desired, incoming, write, options);
    std::vector<ds::SectionInput> inputs;
    for (ds::Section s : {ds::Section::reported, ds::Section::desired}) {
      if (!both && s != write.section) continue;
      const json::value* state = both ? incoming.if_contains(ds::to_string(s)) : nullptr;
      if (both && !state) continue;
      inputs.push_back({s, both ? state->as_object() : incoming, write.mode});
    }
    return ds::apply_update(reported, desired, inputs, {write.acknowledge, replace_arrays}, options);
  };

  if (const json::value* error = c.if_contains("error")) {
    const json::object& e = error->as_object();
    try {
      apply();
      FAIL() << "expected error " << str(e);
    } catch (const ds::Error& err) {
      EXPECT_EQ(ds::code_name(err.code()), e.at("code").as_string().c_str()) << err.what();
      if (e.contains("path")) {
        EXPECT_EQ(err.details().path, e.at("path").as_string().c_str());
      }
    }
    return;
  }

  const json::object& expect = c.at("expect").as_object();
  ds::UpdateOutcome out = apply();

  EXPECT_EQ(str(out.reported), str(expect.contains("reported") ? expect.at("reported") : json::value(reported)));
  EXPECT_EQ(str(out.desired), str(expect.contains("desired") ? expect.at("desired") : json::value(desired)));

  json::array expected_changes;
  if (const json::value* changes = expect.if_contains("changes")) {
    for (const json::value& ch : changes->as_array()) {
      json::object o;  // canonical member order: section, op, path, old, new
      o["section"] = ch.as_object().contains("section") ? ch.at("section") : json::value(ds::to_string(write.section));
      for (const char* k : {"op", "path", "old", "new"}) {
        if (ch.as_object().contains(k)) o[k] = ch.at(k);
      }
      expected_changes.push_back(std::move(o));
    }
  }
  EXPECT_EQ(str(list_json(out.changes)), str(expected_changes));

  json::array stale;
  for (const auto& p : out.stale) stale.emplace_back(p);
  EXPECT_EQ(str(stale), str(expect.contains("stale") ? expect.at("stale") : json::array()));

  EXPECT_EQ(str(list_json(out.acknowledged)), str(expect.contains("acknowledged") ? expect.at("acknowledged") : json::array()));

  bool changed = expect.contains("changed") ? expect.at("changed").as_bool() : !expected_changes.empty();
  EXPECT_EQ(out.changed(), changed);
  // A section is written exactly when it has changes.
  auto has_changes_in = [&](ds::Section section) {
    return std::any_of(out.changes.begin(), out.changes.end(), [&](const ds::Change& ch) { return ch.section == section; });
  };
  EXPECT_EQ(out.reported_changed, has_changes_in(ds::Section::reported));
  EXPECT_EQ(out.desired_changed, has_changes_in(ds::Section::desired));
  // The serialized sections are exactly the resulting states.
  EXPECT_EQ(out.reported_json, out.reported_changed ? str(out.reported) : "");
  EXPECT_EQ(out.desired_json, out.desired_changed ? str(out.desired) : "");

  if (const json::value* delta = expect.if_contains("delta")) {
    EXPECT_EQ(str(ds::compute_delta(out.desired, out.reported, options.timestamp_keys)), str(*delta));
  }
}

std::string case_name(const ::testing::TestParamInfo<Case>& info) {
  std::string name = info.param.file + "_" + std::to_string(info.index) + "_";
  for (char ch : std::string(info.param.spec.at("name").as_string().c_str())) {
    name += std::isalnum(static_cast<unsigned char>(ch)) ? ch : '_';
  }
  return name;
}

INSTANTIATE_TEST_SUITE_P(Cases, CaseTest, ::testing::ValuesIn(load_cases()), case_name);

TEST(Cases, ThereAreAtLeastEightyCases) { EXPECT_GE(load_cases().size(), 80u); }

}  // namespace
