// Per-leaf change times: maintenance from a write's changes, and reading them back.
#include "deviceshadow/leaf_times.hpp"

#include <gtest/gtest.h>

namespace ds = deviceshadow;
namespace json = boost::json;

namespace {

const ds::DocumentOptions options;

json::object obj(std::string_view text) { return ds::parse_json(text).as_object(); }

// One section as stored: its state, times and timestamp.
struct Stored {
  json::object state;
  std::string times;
  std::int64_t ns = 0;
};

// Writes `incoming` into `write.section` at time `ts`, maintaining both sections' times as the engine does.
void write(Stored& reported, Stored& desired, std::string_view incoming, std::int64_t ts,
           ds::SectionWrite w = {}) {
  ds::UpdateOutcome out = ds::apply_update(reported.state, desired.state, obj(incoming), w, options);
  for (auto [s, stored, changed, state] : {std::tuple{ds::Section::reported, &reported, out.reported_changed, &out.reported},
                                           std::tuple{ds::Section::desired, &desired, out.desired_changed, &out.desired}}) {
    if (!changed) continue;
    stored->times = ds::update_leaf_times(stored->times, stored->ns, *state, out.changes, s, ts);
    stored->state = *state;
    stored->ns = ts;
  }
}

std::string nanos(const Stored& s) {
  std::string out;
  ds::append_leaf_times(out, s.state, s.times, s.ns, options.timestamp_keys, ds::LeafTimeFormat::unix_nanos);
  return out;
}

Stored fresh() { return {json::object(), "{}", 0}; }

TEST(LeafTimes, FirstWriteDatesEveryLeafAndStoresOneTime) {
  Stored r = fresh(), d = fresh();
  write(r, d, R"({"a":1,"b":{"c":true,"d":[1,2]},"e":{}})", 100);
  EXPECT_EQ(r.times, "100");
  EXPECT_EQ(nanos(r), R"({"a":100,"b":{"c":100,"d":100},"e":100})");
  EXPECT_EQ(d.times, "{}");
}

TEST(LeafTimes, OnlyChangedLeavesMove) {
  Stored r = fresh(), d = fresh();
  write(r, d, R"({"a":1,"b":{"c":true,"d":2}})", 100);
  write(r, d, R"({"b":{"c":false},"a":1})", 200);  // a unchanged: no change, keeps 100
  EXPECT_EQ(nanos(r), R"({"a":100,"b":{"c":200,"d":100}})");
  write(r, d, R"({"b":{"d":3},"f":"x"})", 300);
  EXPECT_EQ(nanos(r), R"({"a":100,"b":{"c":200,"d":300},"f":300})");
  write(r, d, R"({"b":{"c":1}})", 400);
  write(r, d, R"({"b":{"d":1}})", 400);
  EXPECT_EQ(r.times, R"({"a":100,"b":400,"f":300})") << "a subtree whose leaves share a time is stored as one";
}

// A write that changes every leaf is answered without reading the old times; in any order of
// the changes, and with a leaf left unchanged, the times are those the general path gives.
TEST(LeafTimes, WritesOfEveryLeafInAnyOrder) {
  Stored r = fresh(), d = fresh();
  write(r, d, R"({"a":1,"b":{"c":2},"e":{}})", 100);
  write(r, d, R"({"b":{"c":3},"a":2})", 200);  // e is left as it was
  EXPECT_EQ(nanos(r), R"({"a":200,"b":{"c":200},"e":100})");
  write(r, d, R"({"e":{"x":1},"b":{"c":4},"a":3})", 300);
  EXPECT_EQ(r.times, "300");
  r.times = "{oops";  // never read when every leaf changes
  write(r, d, R"({"a":4,"b":{"c":5},"e":{"x":2}})", 400);
  EXPECT_EQ(r.times, "400");
}

TEST(LeafTimes, RemovalsDropTimesAndEmptiedObjectsBecomeLeaves) {
  Stored r = fresh(), d = fresh();
  write(r, d, R"({"a":1,"b":{"c":{"x":1}},"g":{"h":{"i":1}}})", 100);
  write(r, d, R"({"a":null,"b":{"c":{"x":null}}})", 200);  // b/c is now an empty object: a leaf
  EXPECT_EQ(r.state, obj(R"({"b":{"c":{}},"g":{"h":{"i":1}}})"));
  EXPECT_EQ(nanos(r), R"({"b":{"c":200},"g":{"h":{"i":100}}})");
  write(r, d, R"({"g":null})", 300);
  EXPECT_EQ(r.times, "200");
  write(r, d, R"({"b":{"c":{"y":2}}})", 400);
  EXPECT_EQ(nanos(r), R"({"b":{"c":{"y":400}}})");
}

TEST(LeafTimes, ClientIsMasterRemovalsAndKindChanges) {
  Stored r = fresh(), d = fresh();
  write(r, d, R"({"a":{"x":1,"y":2},"b":3,"c":[1]})", 100);
  write(r, d, R"({"a":5,"b":{"p":1,"q":2},"c":[1]})", 200, {ds::Section::reported, ds::MergeMode::client_is_master});
  EXPECT_EQ(nanos(r), R"({"a":200,"b":{"p":200,"q":200},"c":100})");
  write(r, d, R"({"b":{"p":1}})", 300, {ds::Section::reported, ds::MergeMode::client_is_master});
  EXPECT_EQ(nanos(r), R"({"b":{"p":200}})");
}

TEST(LeafTimes, TimestampedValuesAreLeaves) {
  Stored r = fresh(), d = fresh();
  write(r, d, R"({"t":{"value":1,"ts":10},"u":{"value":2,"ts":10}})", 100);
  write(r, d, R"({"t":{"value":3,"ts":20},"u":{"value":9,"ts":5}})", 200);  // u is stale
  EXPECT_EQ(nanos(r), R"({"t":200,"u":100})");
  std::string v1;
  ds::append_leaf_times(v1, r.state, r.times, r.ns, options.timestamp_keys, ds::LeafTimeFormat::rfc3339);
  EXPECT_EQ(v1, R"({"t":"1970-01-01T00:00:00.000000200Z","u":"1970-01-01T00:00:00.000000100Z"})");
}

TEST(LeafTimes, AnArrayMergedByElementIsOneLeafDatedByAnyChangeInside) {
  Stored r = fresh(), d = fresh();
  write(r, d, R"({"zones":[{"id":1,"on":true},{"id":2,"on":false}],"n":1})", 100);
  write(r, d, R"({"zones":[{"id":2,"on":true}]})", 200);
  EXPECT_EQ(nanos(r), R"({"zones":200,"n":100})");
  write(r, d, R"({"zones":[{"id":3}]})", 300);
  EXPECT_EQ(nanos(r), R"({"zones":300,"n":100})");
  write(r, d, R"({"zones":[{"id":3}],"n":1})", 400, {ds::Section::reported, ds::MergeMode::client_is_master});
  EXPECT_EQ(nanos(r), R"({"zones":400,"n":100})") << "elements removed date the array";
  write(r, d, R"({"zones":null})", 500);
  EXPECT_EQ(nanos(r), R"({"n":100})");
}

TEST(LeafTimes, AcknowledgementRemovesDesiredTimesAndPrunesEmptiedObjects) {
  Stored r = fresh(), d = fresh();
  write(r, d, R"({"m":{"sp":22,"mode":"eco"},"x":1})", 100, {ds::Section::desired});
  write(r, d, R"({"m":{"sp":22}})", 200);
  EXPECT_EQ(nanos(d), R"({"m":{"mode":100},"x":100})");
  write(r, d, R"({"m":{"mode":"eco"},"x":1})", 300);
  EXPECT_EQ(d.state, json::object());
  EXPECT_EQ(d.times, "{}");
  EXPECT_EQ(nanos(r), R"({"m":{"sp":200,"mode":300},"x":300})");
}

TEST(LeafTimes, DataWithoutTimesReadsAndKeepsTheSectionTime) {
  Stored r{obj(R"({"a":1,"b":{"c":2,"d":3}})"), "", 50};
  EXPECT_EQ(nanos(r), R"({"a":50,"b":{"c":50,"d":50}})");
  Stored d = fresh();
  write(r, d, R"({"b":{"c":9}})", 100);
  EXPECT_EQ(nanos(r), R"({"a":50,"b":{"c":100,"d":50}})");
  // No change of the section (a write that only set its time zone): the old time is kept explicitly.
  EXPECT_EQ(ds::update_leaf_times("", 50, r.state, {}, ds::Section::reported, 100), "50");
  EXPECT_EQ(ds::update_leaf_times(R"({"a":1})", 50, r.state, {}, ds::Section::reported, 100), R"({"a":1})");
}

TEST(LeafTimes, MalformedTimesReadAsTheSectionTime) {
  const json::object state = obj(R"({"a":1,"b":[1]})");
  for (std::string_view bad : {"{", "[1]", "\"x\"", "1.5", R"({"a":"x","b":{}})"}) {
    std::string out;
    ds::append_leaf_times(out, state, bad, 7, options.timestamp_keys, ds::LeafTimeFormat::unix_nanos);
    EXPECT_TRUE(out == R"({"a":7,"b":7})") << bad << " -> " << out;
  }
}

TEST(LeafTimes, KeysNeedingEscapes) {
  Stored r = fresh(), d = fresh();
  write(r, d, R"({"a/b":{"~c":1,"d":2},"e\"f":3})", 100);
  write(r, d, R"({"a/b":{"~c":5}})", 200);
  EXPECT_EQ(nanos(r), R"({"a/b":{"~c":200,"d":100},"e\"f":100})");
}

TEST(LeafTimes, AwsMetadataGivesEpochSecondsAtEachLeafAndArraysByElement) {
  const json::object state = obj(R"({"a":1,"arr":[1,{"x":2},[3]],"t":{"value":1,"ts":5},"e":{}})");
  std::string out;
  ds::append_aws_metadata(out, state, R"({"a":1500000000123456789,"arr":1600000000999999999})", 1700000000000000000,
                          options.timestamp_keys);
  EXPECT_EQ(out, R"({"a":{"timestamp":1500000000},)"
                 R"("arr":[{"timestamp":1600000000},{"x":{"timestamp":1600000000}},[{"timestamp":1600000000}]],)"
                 R"("t":{"timestamp":1700000000},"e":{"timestamp":1700000000}})");
  out.clear();
  ds::append_aws_metadata(out, json::object(), "", 1, options.timestamp_keys);
  EXPECT_EQ(out, "{}");
}

}  // namespace
