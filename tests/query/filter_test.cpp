// The filter language of fleet queries, one table per rule (docs/queries.md): each row is a
// filter and whether it matches one fixed shadow, or a bad filter and the offset and expectation
// of its error.
#include "query/filter.hpp"

#include "deviceshadow/error.hpp"
#include "support/sanitized.hpp"

#include <gtest/gtest.h>

#include <random>
#include <tuple>

namespace ds = deviceshadow;
namespace q = deviceshadow::query;

namespace {

std::int64_t at(std::string_view rfc3339) { return ds::parse_rfc3339(rfc3339)->unix_nanos(); }

const std::int64_t kNow = at("2026-11-27T04:20:00Z");

// The shadow every table runs against.
struct Fixture {
  ds::ShadowKey key{"plant-7/line-2/sensor-1", "main"};
  ds::ShadowRecord record;
  ds::TimestampKeys keys;

  Fixture() {
    ds::SectionRecord& r = record.reported;
    r.version = 7;
    r.timestamp_ns = at("2026-11-27T04:00:00Z");
    r.state_json =
        R"({"temp":{"value":21.5,"ts":"2026-11-27T03:00:00Z"},"fw":"1.2.0","count":3,"big":18446744073709551615,)"
        R"("neg":-4,"on":true,"tags":["a","b"],"readings":[{"id":1,"v":5},{"id":2,"v":9}],"note":"h\u00e9llo",)"
        R"("sl/ash":1,"ti~lde":2,"boot":"2026-11-27T02:00:00Z","cfg":{"mode":"eco","level":2},)"
        R"("pair":{"x":1,"ts":1795748400},"none":[]})";
    r.times_json = R"({"fw":)" + std::to_string(at("2026-11-27T03:30:00Z")) + "}";
    ds::SectionRecord& d = record.desired;
    d.version = 3;
    d.timestamp_ns = at("2026-11-27T04:10:00Z");
    d.state_json = R"({"fw":"1.3.0","cfg":{"mode":"eco"}})";
  }

  bool matches(std::string_view filter) const {
    return q::Filter::parse(filter, kNow).matches(q::Subject(key, record, keys));
  }
};

struct Row {
  const char* filter;
  bool match;
};

void run(const std::vector<Row>& rows) {
  Fixture f;
  for (const Row& row : rows) {
    try {
      EXPECT_EQ(f.matches(row.filter), row.match) << row.filter;
    } catch (const ds::Error& e) {
      ADD_FAILURE() << row.filter << ": " << e.what();
    }
  }
}

TEST(Filter, NumbersCompareAsNumbers) {
  run({{"eq(reported/count,3)", true},
       {"eq(reported/count,3.0)", true},
       {"eq(reported/count,3e0)", true},
       {"gt(reported/count,2.5)", true},
       {"lt(reported/count,3)", false},
       {"le(reported/count,3)", true},
       {"ge(reported/big,18446744073709551614)", true},
       {"gt(reported/big,1e19)", true},
       {"lt(reported/neg,18446744073709551615)", true},
       {"lt(reported/neg,-3.5)", true}});
}

TEST(Filter, TimestampedValuesCompareByTheirValue) {
  run({{"eq(reported/temp,21.5)", true},
       {"gt(reported/temp,21)", true},
       {"eq(reported/pair,1)", false},  // no "value" member: the value is the payload, an object
       {"ne(reported/pair,1)", true},
       {"exists(reported/pair)", true},
       {"eq(reported/temp/value,21.5)", true}});
}

TEST(Filter, StringsCompareBytewise) {
  run({{R"(eq(reported/fw,"1.2.0"))", true},
       {R"(lt(reported/fw,"1.10"))", false},
       {R"(gt(reported/note,"h"))", true},
       {R"(gt(reported/note,"hz"))", true},  // UTF-8 bytes: é (C3 A9) sorts after z
       {R"(eq(reported/cfg/mode,"eco"))", true}});
}

TEST(Filter, DifferentTypesNeverMatchExceptNe) {
  run({{R"(eq(reported/count,"3"))", false},
       {R"(ne(reported/count,"3"))", true},
       {R"(gt(reported/count,"2"))", false},
       {"eq(reported/fw,1)", false},
       {"eq(reported/on,true)", true},
       {R"(eq(reported/on,"true"))", false},
       {"ne(reported/on,1)", true},
       {"gt(reported/on,false)", false},
       {"lt(reported/on,true)", false},
       {"ge(reported/on,true)", true},  // unordered, but equal (docs/queries.md)
       {"le(reported/on,false)", false},
       {"eq(reported/cfg,1)", false},
       {"ne(reported/cfg,null)", true},
       {"eq(reported/count,null)", false}});
}

TEST(Filter, AMissingValueMatchesNoComparison) {
  run({{"eq(reported/nope,1)", false},
       {"ne(reported/nope,1)", false},
       {"not(eq(reported/nope,1))", true},
       {"exists(reported/nope)", false},
       {"exists(reported/cfg/mode)", true},
       {"exists(reported/fw/x)", false}});
}

TEST(Filter, OnAnArrayAnyElementMatches) {
  run({{R"(eq(reported/tags,"b"))", true},
       {R"(ne(reported/tags,"a"))", true},
       {R"(eq(reported/tags,"c"))", false},
       {"eq(reported/readings/v,9)", true},
       {"eq(reported/readings/1/v,9)", true},
       {"eq(reported/readings/0/v,9)", false},
       {R"(like(reported/tags,"?"))", true}});
}

// An empty array has no element for a comparison to see, but the leaf is there.
TEST(Filter, AnEmptyArrayExistsAndMatchesNoComparison) {
  run({{"exists(reported/none)", true},
       {"not(exists(reported/none))", false},
       {"eq(reported/none,1)", false},
       {"ne(reported/none,1)", false},
       {"exists(reported/none/0)", false},
       {"exists(reported/readings/v)", true}});
}

TEST(Filter, LikeHasStarAndQuestionMarkOnly) {
  run({{R"(like(thing,"plant-7/*"))", true},
       {R"(like(thing,"plant-?/*"))", true},
       {R"(like(thing,"Plant*"))", false},
       {R"(like(thing,"*sensor-1"))", true},
       {R"(like(thing,"plant-7/line-2/sensor-1"))", true},
       {R"(like(thing,"plant-7"))", false},
       {R"(like(reported/note,"h?llo"))", true},  // ? is one character, é two bytes
       {R"(like(reported/note,"h??llo"))", false},
       {R"(like(reported/count,"3"))", false},  // strings only
       {R"(like(reported/fw,"1.*.0"))", true},
       {R"(like(reported/fw,"[1]*"))", false},
       {R"(like(reported/fw,"1.2.0*"))", true},
       {R"(like(reported/fw,"*"))", true}});
}

// The code points of UTF-8 text.
std::u32string code_points(std::string_view s) {
  std::u32string out;
  for (std::size_t i = 0; i < s.size();) {
    const auto lead = static_cast<unsigned char>(s[i]);
    const std::size_t n = lead < 0x80 ? 1 : lead < 0xE0 ? 2 : lead < 0xF0 ? 3 : 4;
    char32_t c = n == 1 ? lead : lead & (0x3F >> (n - 1));
    for (std::size_t k = 1; k < n; ++k) c = c << 6 | (static_cast<unsigned char>(s[i + k]) & 0x3F);
    out += c;
    i += n;
  }
  return out;
}

// `like` as its definition reads, by dynamic programming over code points.
bool like_reference(std::string_view text, std::string_view pattern) {
  const std::u32string s = code_points(text), p = code_points(pattern);
  std::vector<std::vector<bool>> m(p.size() + 1, std::vector<bool>(s.size() + 1, false));  // m[i][j]: p[..i) ~ s[..j)
  m[0][0] = true;
  for (std::size_t i = 1; i <= p.size(); ++i) {
    for (std::size_t j = 0; j <= s.size(); ++j) {
      if (p[i - 1] == U'*') {
        m[i][j] = m[i - 1][j] || (j > 0 && m[i][j - 1]);
      } else {
        m[i][j] = j > 0 && m[i - 1][j - 1] && (p[i - 1] == U'?' || p[i - 1] == s[j - 1]);
      }
    }
  }
  return m[p.size()][s.size()];
}

bool like(std::string_view thing, std::string_view pattern) {
  Fixture f;
  f.key.thing = std::string(thing);
  return f.matches("like(thing,\"" + std::string(pattern) + "\")");
}

TEST(Filter, LikeAgreesWithItsDefinitionOnRandomText) {
  static constexpr std::string_view kText[] = {"a", "b", "\u00e9", "\u65e5", "\U0001F600"};
  static constexpr std::string_view kPattern[] = {"a", "b", "\u00e9", "\u65e5", "*", "?", "?", "*"};
  std::mt19937 rng(5);
  for (int round = 0; round < scaled_for_sanitizers(20'000); ++round) {
    std::string text, pattern;
    for (std::size_t n = rng() % 12; n > 0; --n) text += kText[rng() % std::size(kText)];
    for (std::size_t n = rng() % 8; n > 0; --n) pattern += kPattern[rng() % std::size(kPattern)];
    ASSERT_EQ(like(text, pattern), like_reference(text, pattern)) << text << " ~ " << pattern;
  }
  // The same past a pattern's first 64 bytes: `?` and multibyte characters across a word's end.
  for (int round = 0; round < scaled_for_sanitizers(5'000); ++round) {
    const std::size_t lead = 52 + rng() % 12;
    std::string text(lead + rng() % 3 - 1, 'a'), pattern(lead, 'a');
    for (std::size_t n = rng() % 12; n > 0; --n) text += kText[rng() % std::size(kText)];
    for (std::size_t n = rng() % 8; n > 0; --n) pattern += kPattern[rng() % std::size(kPattern)];
    ASSERT_EQ(like(text, pattern), like_reference(text, pattern)) << text << " ~ " << pattern;
  }
  // Long text against a long pattern that backtracking would try at every position; a pattern
  // past 64 bytes spans several words of states.
  const std::string as(60'000, 'a'), pattern = "*" + std::string(4'000, 'a') + "b";
  EXPECT_FALSE(like(as, pattern));
  EXPECT_TRUE(like(as + "b", pattern));
  EXPECT_TRUE(like(as, "*" + std::string(100, 'a') + "*" + std::string(100, '?')));
  EXPECT_FALSE(like(std::string(4'001, 'a'), std::string(4'000, '?')));
  EXPECT_TRUE(like(std::string(4'000, 'a'), std::string(4'000, '?')));
}

TEST(Filter, PathsArePointersWithEscapes) {
  run({{"eq(reported/sl~1ash,1)", true},
       {"eq(reported/ti~0lde,2)", true},
       {R"(eq("reported/cfg/mode","eco"))", true},
       {R"(eq( reported/cfg/level , 2 ))", true}});
}

// Years and months are calendar ones, from now's UTC date (2026-11-27T04:20:00Z here); a
// fraction may end any duration but one of years or months.
TEST(Filter, DurationsOfYearsAndMonthsFollowTheCalendar) {
  // The instant a literal names: the upper bound of the index range lt(_modified, it) reads.
  auto time_of = [](std::string_view literal, std::int64_t now = kNow) {
    const q::Filter f = q::Filter::parse(std::string("lt(_modified,") + std::string(literal) + ")", now);
    const std::vector<q::IndexableComparison> comparisons = f.indexable();
    return comparisons.front().parts.front().ranges.front().high->integer;
  };
  EXPECT_EQ(time_of("time:now-P1M"), at("2026-10-27T04:20:00Z"));
  EXPECT_EQ(time_of("time:now-P1Y"), at("2025-11-27T04:20:00Z"));
  EXPECT_EQ(time_of("time:now-P1Y2M3DT4H"), at("2025-09-24T00:20:00Z"));
  EXPECT_EQ(time_of("time:now-P12M"), at("2025-11-27T04:20:00Z"));
  EXPECT_EQ(time_of("time:now-PT1.5M"), at("2026-11-27T04:18:30Z"));
  EXPECT_EQ(time_of("time:now-P0.5D"), at("2026-11-26T16:20:00Z"));
  EXPECT_EQ(time_of("time:now-P1W1D"), at("2026-11-19T04:20:00Z"));
  EXPECT_EQ(time_of("time:now-P0.1D"), at("2026-11-27T01:56:00Z"));
  EXPECT_EQ(time_of("time:now-P200Y"), at("1826-11-27T04:20:00Z"));
  EXPECT_EQ(time_of("time:now-P73048DT12H"), kNow - (73048 * 24 + 12) * 3'600'000'000'000LL);
  EXPECT_EQ(time_of("time:now-P2400M"), at("1826-11-27T04:20:00Z"));
  // A day past the month's end becomes its last day.
  EXPECT_EQ(time_of("time:now-P1M", at("2028-03-31T12:00:00Z")), at("2028-02-29T12:00:00Z"));
  EXPECT_EQ(time_of("time:now-P1Y1M", at("2027-03-31T12:00:00Z")), at("2026-02-28T12:00:00Z"));
}

TEST(Filter, TimesCompareWithTimes) {
  run({{"lt(reported/temp@ts,time:now-PT15M)", true},
       {"gt(reported/temp@ts,time:now-PT2H)", true},
       {"gt(reported/temp@ts,time:now-P1D)", true},
       {"gt(reported/temp@ts,time:now-P1W)", true},
       {"lt(reported/temp@ts,time:now-PT1H0.5S)", true},
       {"gt(reported/temp@ts,time:now-PT1H20M1S)", true},
       {R"(eq(reported/temp@ts,"2026-11-27T03:00:00Z"))", true},
       {R"(eq(reported/temp@ts,"2026-11-27T04:00:00+01:00"))", true},
       {"gt(reported/temp@ts,1)", false},
       {"exists(reported/fw@ts)", false},
       {R"(eq(reported/pair@ts,"2026-11-27T03:00:00Z"))", true},  // epoch seconds
       {"lt(reported/boot,time:now)", true},                       // an RFC 3339 string against a time
       {R"(lt(reported/boot,"2026-11-27T02:00:00.5Z"))", false},   // string against string: bytewise
       {"lt(reported/fw,time:now)", false}});
}

TEST(Filter, ChangedIsTheLeafTimeTheServerKeeps) {
  run({{R"(eq(reported/fw@changed,"2026-11-27T03:30:00Z"))", true},
       {R"(eq(reported/count@changed,"2026-11-27T04:00:00Z"))", true},  // not in the times: the section's
       {R"(eq(reported/cfg@changed,"2026-11-27T04:00:00Z"))", true},
       {"gt(desired/fw@changed,time:now-PT15M)", true},
       {"exists(reported/nope@changed)", false}});
}

TEST(Filter, PseudoFields) {
  run({{"eq(_reportedVersion,7)", true},
       {"eq(_desiredVersion,3)", true},
       {R"(eq(_modified,"2026-11-27T04:10:00Z"))", true},
       {"gt(_modified,time:now-PT15M)", true},
       {"eq(_pending,true)", true}});
}

TEST(Filter, DeltaHoldsWhatIsStillPending) {
  run({{"exists(delta/fw)", true},
       {R"(eq(delta/fw,"1.3.0"))", true},
       {"exists(delta/cfg)", false},
       {"exists(delta)", true},
       {"exists(desired)", true},
       {R"(eq(desired/cfg/mode,"eco"))", true}});
}

TEST(Filter, ThingNameAndIn) {
  run({{R"(eq(name,"main"))", true},
       {R"(in(thing,"x","plant-7/line-2/sensor-1"))", true},
       {"in(reported/count,1,2,3)", true},
       {"in(reported/count,1,2)", false}});
}

TEST(Filter, Logic) {
  run({{R"(and(eq(name,"main"),eq(reported/count,3)))", true},
       {R"(and(eq(name,"main"),eq(reported/count,4)))", false},
       {R"(or(eq(name,"x"),eq(reported/count,3)))", true},
       {R"(or(eq(name,"x"),eq(reported/count,4)))", false},
       {R"(not(eq(name,"main")))", false},
       {R"(and(exists(delta/fw),like(thing,"plant-7/*")))", true}});
}

TEST(Filter, AShadowWithoutSectionsHasOnlyItsNames) {
  ds::ShadowRecord empty;
  ds::ShadowKey key{"t", "main"};
  ds::TimestampKeys keys;
  q::Subject s(key, empty, keys);
  EXPECT_TRUE(q::Filter::parse("eq(_reportedVersion,0)", kNow).matches(s));
  EXPECT_FALSE(q::Filter::parse("exists(_modified)", kNow).matches(s));
  EXPECT_FALSE(q::Filter::parse("exists(reported)", kNow).matches(s));
  EXPECT_TRUE(q::Filter().matches(s));
}

struct Bad {
  std::string filter;
  std::uint64_t offset;
  const char* expected;  // a part of what the error says it expected
};

// A comparison inside `nots` calls of not(); and() of `comparisons` comparisons; in() of `values` values.
std::string nested(int nots) {
  std::string f;
  for (int i = 0; i < nots; ++i) f += "not(";
  return f + "eq(thing,1)" + std::string(nots, ')');
}
std::string conjunction(int comparisons) {
  std::string f = "and(";
  for (int i = 0; i < comparisons; ++i) f += "eq(thing,1),";
  f.back() = ')';
  return f;
}
std::string in_list(int values) {
  std::string f = "in(thing";
  for (int i = 0; i < values; ++i) f += ",1";
  return f + ")";
}

TEST(Filter, ErrorsNameTheOffsetAndWhatWasExpected) {
  const std::vector<Bad> rows = {
      {"", 0, "an operator"},
      {"foo(thing)", 0, "an operator"},
      {"eq(thing", 8, "','"},
      {"eq(thing,)", 9, "a value"},
      {"eq(thing,1", 10, "')'"},
      {"eq(reported/a~2,1)", 13, "~0 or ~1"},
      {"eq(report/a,1)", 3, "a property"},
      {"eq(,1)", 3, "a property"},
      {"eq(thing,time:now-P1.5M)", 20, "whole years and months"},
      {"eq(thing,time:now-PT)", 20, "ISO 8601 duration"},
      {"eq(thing,time:now-PT1.5M1S)", 24, "only its last number"},
      {"eq(thing,time:now-P1D1Y)", 22, "in order"},
      {"eq(thing,time:now-P201Y)", 19, "at most 200 years"},
      {"eq(thing,time:now-P200Y1M)", 23, "at most 200 years"},
      {"eq(thing,time:now-P73048DT13H)", 26, "at most 200 years"},
      {"eq(thing,time:now-PT1.H)", 22, "a digit after"},
      {"eq(thing,time:nowx)", 17, "'-'"},
      {"and(eq(thing,1) eq(name,1))", 16, "',' or ')'"},
      {"like(thing,1)", 11, "\"string\" pattern"},
      {"eq(thing,\"abc)", 14, "closing"},
      {"eq(thing,\"a\\qb\")", 12, "JSON string escape"},
      {"eq(thing,1) x", 12, "the end of the filter"},
      {"eq(thing,01)", 9, "a JSON number"},
      {"eq(thing,tru)", 9, "a value"},
      {"eq(delta/a@changed,1)", 10, "delta has no change times"},
      {nested(16), 64, "nest at most 16"},
      {conjunction(65), 4 + 64 * 12, "at most 64"},
      {in_list(101), 8 + 100 * 2 + 1, "at most 100 values"},
      {"eq(thing,\"" + std::string(4090, 'a') + "\")", 4096, "at most 4096 bytes"},
      {"eq(thing,\"\xff\")", 10, "valid UTF-8"},
  };
  for (const Bad& row : rows) {
    try {
      q::Filter::parse(row.filter, kNow);
      ADD_FAILURE() << row.filter << " parsed";
    } catch (const ds::Error& e) {
      EXPECT_EQ(e.code(), ds::ErrorCode::invalid_filter) << row.filter;
      EXPECT_EQ(e.details().offset, row.offset) << row.filter << ": " << e.what();
      EXPECT_NE(e.details().expected.find(row.expected), std::string::npos) << row.filter << ": " << e.what();
    }
  }
}

TEST(Filter, LimitsAreInclusive) {
  for (const std::string& f : {nested(15), conjunction(64), in_list(100)}) EXPECT_NO_THROW(q::Filter::parse(f, kNow)) << f;
}

TEST(Filter, ThingRangesSelectWhatTheFilterCanMatch) {
  using R = std::vector<q::ThingRange>;
  auto ranges = [](std::string_view f) { return q::Filter::parse(f, kNow).thing_ranges(); };
  EXPECT_EQ(ranges(R"(eq(thing,"a"))"), (R{{"a", false}}));
  EXPECT_EQ(ranges(R"(in(thing,"a","b",3))"), (R{{"a", false}, {"b", false}}));
  EXPECT_EQ(ranges(R"(like(thing,"plant-7/*"))"), (R{{"plant-7/", true}}));
  EXPECT_EQ(ranges(R"(like(thing,"p?x*"))"), (R{{"p", true}}));
  EXPECT_EQ(ranges(R"(like(thing,"*x"))"), std::nullopt);
  EXPECT_EQ(ranges(R"(and(eq(reported/a,1),like(thing,"a*")))"), (R{{"a", true}}));
  EXPECT_EQ(ranges(R"(or(eq(thing,"a"),like(thing,"b*")))"), (R{{"a", false}, {"b", true}}));
  EXPECT_EQ(ranges(R"(or(eq(thing,"a"),eq(name,"b")))"), std::nullopt);
  EXPECT_EQ(ranges(R"(not(eq(thing,"a")))"), std::nullopt);
  EXPECT_EQ(ranges("eq(thing,1)"), R{});
  EXPECT_EQ(q::Filter().thing_ranges(), std::nullopt);
}

TEST(Filter, ThingBoundsComeFromRangesEveryMatchMustPass) {
  auto bounds = [](std::string_view f) { return q::Filter::parse(f, kNow).thing_bounds(); };
  const auto b = bounds(R"(and(ge(thing,"b"),lt(thing,"d"),gt(thing,"a"),le(thing,"e"),eq(reported/x,1)))");
  ASSERT_TRUE(b);
  EXPECT_EQ(std::tie(*b->low, b->low_open, *b->high, b->high_open), std::make_tuple(std::string("b"), false, std::string("d"), true));
  EXPECT_TRUE(b->below("a") && !b->below("b") && !b->above("c") && b->above("d"));
  const auto open = bounds(R"(and(ge(thing,"b"),gt(thing,"b")))");
  ASSERT_TRUE(open);
  EXPECT_TRUE(open->low_open && open->below("b") && !open->high);
  EXPECT_EQ(bounds(R"(or(gt(thing,"b"),eq(thing,"a")))"), std::nullopt);
  EXPECT_EQ(bounds(R"(not(gt(thing,"b")))"), std::nullopt);
  EXPECT_EQ(bounds("gt(thing,1)"), std::nullopt);
  EXPECT_EQ(bounds(R"(gt(name,"b"))"), std::nullopt);
  EXPECT_EQ(bounds(R"(ge(thing,""))"), std::nullopt);  // every thing
  const auto upper = bounds(R"(and(gt(thing,""),lt(thing,"b")))");
  ASSERT_TRUE(upper);
  EXPECT_TRUE(!upper->low && upper->high == "b");
}

TEST(Filter, FieldsToIndexPutWhatAMatchMustPassFirst) {
  using V = std::vector<std::string>;
  auto fields = [](std::string_view f) { return q::Filter::parse(f, kNow).fields_to_index(); };
  // A field with @ts or @changed is a field of its own.
  EXPECT_EQ(fields(R"(and(or(eq(reported/a,1),eq(reported/b,1)),lt(reported/c@ts,time:now)))"),
            (V{"reported/c@ts", "reported/a", "reported/b"}));
  EXPECT_EQ(fields(R"(or(eq(reported/a,1),not(eq(desired/b@changed,1)),eq(reported/a,2)))"),
            (V{"reported/a", "desired/b@changed"}));
  // Only what an index can be declared on: not thing or delta; the pseudo fields and name, but
  // not for exists or ne, which every shadow passes or nearly.
  EXPECT_EQ(fields(R"(eq(thing,"x"))"), V{});
  EXPECT_EQ(fields(R"(and(exists(delta/fw),eq(delta/a,1),gt(_modified,time:now-PT1H)))"), V{"_modified"});
  EXPECT_EQ(fields(R"(and(ne(name,"x"),exists(_pending),eq(_reportedVersion,3),eq(name,"a")))"),
            (V{"_reportedVersion", "name"}));
}

// A write may hold any instant of the years 0000-9999; queries compare them exactly, also past
// the span of int64 nanoseconds (1677-2262), and show them as they are.
TEST(Filter, TimesPastTheNanosecondSpanCompareExactly) {
  Fixture f;
  f.record.reported.state_json = R"({"far":{"value":1,"ts":"3000-01-01T00:00:00Z"},"farther":{"value":2,"ts":99999999999},)"
                                 R"("early":{"value":3,"ts":"1000-01-01T00:00:00Z"}})";
  for (const Row& row : std::vector<Row>{
           {R"(gt(reported/far@ts,"2999-12-31T23:59:59Z"))", true},
           {R"(gt(reported/far@ts,"3000-01-01T00:00:00Z"))", false},
           {R"(eq(reported/far@ts,"3000-01-01T00:00:00Z"))", true},
           {R"(eq(reported/far@ts,"9999-12-31T23:59:59.999999999Z"))", false},
           {R"(gt(reported/farther@ts,"3000-01-01T00:00:00Z"))", true},
           {R"(lt(reported/far@ts,"2262-04-11T23:47:16.854775807Z"))", false},
           {R"(lt(reported/early@ts,"1500-01-01T00:00:00Z"))", true},
           {R"(eq(reported/early@ts,"0001-01-01T00:00:00Z"))", false},
           {"lt(reported/early@ts,time:now-P200Y)", true},
       }) {
    EXPECT_EQ(q::Filter::parse(row.filter, kNow).matches(q::Subject(f.key, f.record, f.keys)), row.match) << row.filter;
  }
  std::string out;
  ASSERT_TRUE(q::append_property(out, q::Subject(f.key, f.record, f.keys), q::parse_property("reported/farther@ts")));
  EXPECT_EQ(out, R"("5138-11-16T09:46:39.000000000Z")");
  // An index range cannot hold such a time apart from the span's end: it selects the end, and
  // its candidates are tested.
  const q::Filter beyond = q::Filter::parse(R"(gt(reported/far@ts,"3000-01-01T00:00:00Z"))", kNow);
  const std::vector<q::IndexableComparison> c = beyond.indexable();
  ASSERT_EQ(c.size(), 1u);
  EXPECT_FALSE(c.front().exact);
  EXPECT_FALSE(c.front().parts.front().ranges.front().low_open);
  EXPECT_EQ(c.front().parts.front().ranges.front().low->integer, std::numeric_limits<std::int64_t>::max());
  EXPECT_TRUE(q::Filter::parse(R"(gt(reported/far@ts,"2000-01-01T00:00:00Z"))", kNow).indexable().front().exact);
}

TEST(Filter, Projection) {
  Fixture f;
  q::Subject s(f.key, f.record, f.keys);
  auto show = [&](std::string_view prop) {
    std::string out;
    return q::append_property(out, s, q::parse_property(prop)) ? out : std::string("(absent)");
  };
  EXPECT_EQ(show("reported/temp"), R"({"value":21.5,"ts":"2026-11-27T03:00:00Z"})");
  EXPECT_EQ(show("reported/temp@ts"), R"("2026-11-27T03:00:00.000000000Z")");
  EXPECT_EQ(show("reported/readings/1/v"), "9");
  EXPECT_EQ(show("reported/readings/v"), "(absent)");
  EXPECT_EQ(show("reported/nope"), "(absent)");
  EXPECT_EQ(show("delta"), R"({"fw":"1.3.0"})");
  EXPECT_EQ(show("_pending"), "true");
  EXPECT_EQ(show("_desiredVersion"), "3");
  EXPECT_EQ(show("reported/fw@changed"), R"("2026-11-27T03:30:00.000000000Z")");
  EXPECT_THROW(q::parse_property("reportd/x"), ds::Error);
}

}  // namespace
