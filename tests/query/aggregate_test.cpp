// Aggregation: each metric, groups, maxGroups and "other", and the metric parser's refusals.
#include "query/aggregate.hpp"

#include "deviceshadow/error.hpp"

#include <gtest/gtest.h>

namespace ds = deviceshadow;
namespace q = deviceshadow::query;

namespace {

struct Shadow {
  ds::ShadowKey key;
  ds::ShadowRecord record;
};

Shadow shadow(std::string thing, std::string reported) {
  Shadow s{{std::move(thing), "main"}, {}};
  s.record.reported.version = 1;
  s.record.reported.timestamp_ns = 1'795'748'400'000'000'000;
  s.record.reported.state_json = std::move(reported);
  return s;
}

std::string aggregate(const std::vector<std::string>& group_by, const std::vector<std::pair<std::string, std::string>>& metrics,
                      std::size_t max_groups = 100) {
  static const std::vector<Shadow> fleet = {
      shadow("a", R"({"fw":"1.2","temp":{"value":20,"ts":"2026-11-27T01:00:00Z"},"tags":[1,2]})"),
      shadow("b", R"({"fw":"1.2","temp":{"value":22.5,"ts":"2026-11-27T02:00:00Z"}})"),
      shadow("c", R"({"fw":"1.3","temp":{"value":30,"ts":"2026-11-27T03:00:00Z"}})"),
      shadow("d", R"({"fw":"1.3","temp":"broken"})"),
      shadow("e", R"({"temp":{"value":10,"ts":"2026-11-27T04:00:00Z"}})"),
  };
  const ds::TimestampKeys keys;
  std::vector<q::Property> props;
  for (const std::string& p : group_by) props.push_back(q::parse_property(p, "groupBy"));
  std::vector<q::Metric> parsed;
  for (const auto& [label, text] : metrics) parsed.push_back(q::parse_metric(label, text));
  q::Aggregation a(std::move(props), std::move(parsed), max_groups);
  for (const Shadow& s : fleet) a.add(q::Subject(s.key, s.record, keys));
  return a.render();
}

TEST(Aggregate, WithoutGroupByOneGroupHoldsEverything) {
  EXPECT_EQ(aggregate({}, {{"n", "count()"}, {"lo", "min(reported/temp)"}, {"hi", "max(reported/temp)"},
                           {"sum", "sum(reported/temp)"}, {"avg", "avg(reported/temp)"}}),
            R"({"groups":[{"key":{},"n":5,"lo":10,"hi":30,"sum":82.5,"avg":20.625}]})");
}

// Sums are kept wider than a double: finite values never sum to infinity (written as null).
TEST(Aggregate, SumsPastADoublesRangeStayNumbers) {
  const std::vector<Shadow> huge = {shadow("a", R"({"x":1e308})"), shadow("b", R"({"x":1e308})")};
  const ds::TimestampKeys keys;
  q::Aggregation a({}, {q::parse_metric("s", "sum(reported/x)"), q::parse_metric("m", "avg(reported/x)")}, 100);
  for (const Shadow& s : huge) a.add(q::Subject(s.key, s.record, keys));
  EXPECT_EQ(a.render(), R"({"groups":[{"key":{},"s":2e+308,"m":1e+308}]})");
}

// Integers past 2^53 (where a double has gaps) are measured and written exactly.
TEST(Aggregate, LargeIntegersAreExact) {
  const std::vector<Shadow> big = {shadow("a", R"({"x":9007199254740993})"), shadow("b", R"({"x":9007199254740995})"),
                                   shadow("c", R"({"y":18446744073709551615})"), shadow("d", R"({"y":-9223372036854775808})"),
                                   shadow("e", R"({"y":-9223372036854775808})")};
  const ds::TimestampKeys keys;
  q::Aggregation a({}, {q::parse_metric("lo", "min(reported/x)"), q::parse_metric("hi", "max(reported/x)"),
                        q::parse_metric("p", "percentiles(reported/x,50,100)"), q::parse_metric("s", "sum(reported/x)"),
                        q::parse_metric("m", "avg(reported/x)"), q::parse_metric("ylo", "min(reported/y)"),
                        q::parse_metric("yhi", "max(reported/y)"), q::parse_metric("ys", "sum(reported/y)")},
                   100);
  for (const Shadow& s : big) a.add(q::Subject(s.key, s.record, keys));
  EXPECT_EQ(a.render(), R"({"groups":[{"key":{},"lo":9007199254740993,"hi":9007199254740995,)"
                        R"("p":{"50":9007199254740993,"100":9007199254740995},"s":18014398509481988,"m":9007199254740994,)"
                        R"("ylo":-9223372036854775808,"yhi":18446744073709551615,"ys":-1}]})");
}

// Equal numbers are one group however they are written, and compare as numbers in metrics.
TEST(Aggregate, EqualNumbersAreOneGroup) {
  const std::vector<Shadow> ones = {shadow("a", R"({"v":1})"), shadow("b", R"({"v":1.0})"), shadow("c", R"({"v":1e0})"),
                                    shadow("d", R"({"v":10e-1})"), shadow("e", R"({"v":9007199254740993})"),
                                    shadow("f", R"({"v":9007199254740992.0})"), shadow("g", R"({"v":-0.0})")};
  const ds::TimestampKeys keys;
  q::Aggregation a({q::parse_property("reported/v", "groupBy")},
                   {q::parse_metric("n", "count()"), q::parse_metric("s", "sum(reported/v)")}, 100);
  for (const Shadow& s : ones) a.add(q::Subject(s.key, s.record, keys));
  EXPECT_EQ(a.render(), R"({"groups":[{"key":{"reported/v":1},"n":4,"s":4},{"key":{"reported/v":0},"n":1,"s":0},)"
                        R"({"key":{"reported/v":9007199254740992},"n":1,"s":9007199254740992},)"
                        R"({"key":{"reported/v":9007199254740993},"n":1,"s":9007199254740993}]})");
}

TEST(Aggregate, PercentilesAreExactNearestRank) {
  EXPECT_EQ(aggregate({}, {{"p", "percentiles(reported/temp,25,50,100)"}}),
            R"({"groups":[{"key":{},"p":{"25":10,"50":20,"100":30}}]})");
  EXPECT_EQ(aggregate({}, {{"p", "percentiles(reported/tags,50,99.9)"}}), R"({"groups":[{"key":{},"p":{"50":1,"99.9":2}}]})");
  // Each percent is keyed as the request wrote it.
  EXPECT_EQ(aggregate({}, {{"p", "percentiles(reported/tags, 50.0,0.0001)"}}), R"({"groups":[{"key":{},"p":{"50.0":1,"0.0001":1}}]})");
}

TEST(Aggregate, TimesGiveTheEarliestAndLatest) {
  EXPECT_EQ(aggregate({}, {{"first", "min(reported/temp@ts)"}, {"last", "max(reported/temp@ts)"}, {"s", "sum(reported/temp@ts)"}}),
            R"({"groups":[{"key":{},"first":"2026-11-27T01:00:00.000000000Z","last":"2026-11-27T04:00:00.000000000Z","s":null}]})");
}

TEST(Aggregate, GroupsByValueLargestFirst) {
  EXPECT_EQ(aggregate({"reported/fw"}, {{"n", "count()"}, {"avg", "avg(reported/temp)"}}),
            R"({"groups":[{"key":{"reported/fw":"1.2"},"n":2,"avg":21.25},{"key":{"reported/fw":"1.3"},"n":2,"avg":30},)"
            R"({"key":{"reported/fw":null},"n":1,"avg":10}]})");
}

TEST(Aggregate, PastMaxGroupsTheRestIsOther) {
  EXPECT_EQ(aggregate({"reported/fw"}, {{"n", "count()"}, {"hi", "max(reported/temp)"}}, 1),
            R"({"groups":[{"key":{"reported/fw":"1.2"},"n":2,"hi":22.5}],"other":{"groups":2,"n":3,"hi":30}})");
}

TEST(Aggregate, MetricsThatDoNotParseNameTheirLabel) {
  for (const char* bad : {"count", "count(reported/x)", "median(reported/x)", "min()", "min(reportd/x)", "percentiles(reported/x)",
                          "percentiles(reported/x,0)", "percentiles(reported/x,101)", "percentiles(reported/x,101,50)",
                          "percentiles(reported/x,-1,50)", "percentiles(reported/x,0x10,50)", "percentiles(reported/x,50,50.0)"}) {
    try {
      q::parse_metric("m", bad);
      ADD_FAILURE() << bad;
    } catch (const ds::Error& e) {
      EXPECT_EQ(e.code(), ds::ErrorCode::invalid_request) << bad;
      EXPECT_EQ(e.details().field, "metrics.m") << bad;
    }
  }
  EXPECT_THROW(q::parse_metric("key", "count()"), ds::Error);
}

}  // namespace
