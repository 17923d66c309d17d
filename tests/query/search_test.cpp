// Search and count over a store: the plan (which things are read), the budget, DynamoDB's
// consent to scan, resuming after a cursor's shadow, and the cursors themselves.
#include "query/cursor.hpp"
#include "query/search.hpp"

#include "deviceshadow/error.hpp"
#include "deviceshadow/memory_store.hpp"
#include "deviceshadow/validation.hpp"
#include "support/forwarding_store.hpp"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include <unistd.h>

namespace ds = deviceshadow;
namespace q = deviceshadow::query;

namespace {

// Counts the things whose shadows are listed, so a test sees what a query reads.
class CountingStore : public ForwardingStore {
 public:
  using ForwardingStore::ForwardingStore;
  std::vector<ds::ShadowSummary> list_shadows(std::string_view thing, std::string_view after, std::size_t limit) override {
    visited.emplace_back(thing);
    return inner_.list_shadows(thing, after, limit);
  }
  std::vector<std::string> visited;
};

struct Fleet : ::testing::Test {
  std::unique_ptr<ds::StoreBackend> backend = ds::make_memory_store();
  CountingStore store{*backend};
  ds::Engine engine{store};
  ds::TimestampKeys keys;

  void report(const std::string& thing, const std::string& name, std::string_view state) {
    ds::UpdateRequest r;
    r.key = {thing, name};
    r.state = ds::parse_json(state).as_object();
    engine.update(r);
  }

  void SetUp() override {
    for (int i = 0; i < 5; ++i) report("plant-7/s" + std::to_string(i), "main", R"({"n":)" + std::to_string(i) + "}");
    report("plant-7/s1", "aux", R"({"n":10})");
    report("plant-8/s0", "main", R"({"n":0})");
    report("other", "main", R"({"n":3})");
  }

  // The keys the filter matches, each "thing|name", in order.
  std::vector<std::string> find(std::string_view filter, std::span<const ds::ThingPattern> scope = {},
                                std::optional<ds::ShadowKey> after = std::nullopt, q::QueryOptions options = {}) {
    store.visited.clear();
    const q::Filter f = filter.empty() ? q::Filter() : q::Filter::parse(filter, 0);
    std::vector<std::string> out;
    q::scan(store, keys, {f, scope, after, false}, options, [&](const q::Subject& s) {
      out.push_back(s.key().thing + "|" + s.key().name);
      return true;
    });
    return out;
  }
};

using Strings = std::vector<std::string>;

TEST(Plan, IntersectsTheFilterWithTheTokenAndDropsRangesInsideOthers) {
  using R = std::vector<q::ThingRange>;
  const std::vector<ds::ThingPattern> scope = {{"plant-7/", true}, {"other", false}};
  EXPECT_EQ(q::plan(std::nullopt, {}), (R{{"", true}}));
  EXPECT_EQ(q::plan(std::nullopt, scope), (R{{"other", false}, {"plant-7/", true}}));
  EXPECT_EQ(q::plan(R{{"plant-", true}}, scope), (R{{"plant-7/", true}}));
  EXPECT_EQ(q::plan(R{{"plant-7/s1", false}, {"plant-8/x", false}}, scope), (R{{"plant-7/s1", false}}));
  EXPECT_EQ(q::plan(R{{"a", true}, {"ab", true}, {"abc", false}, {"b", false}, {"b", false}}, {}),
            (R{{"a", true}, {"b", false}}));
  EXPECT_EQ(q::plan(R{}, {}), R{});
}

// The end of a prefix's things (where an index read of one value stops): the prefix with its
// last character raised, valid UTF-8 across the encodings' boundaries.
TEST(Plan, AfterEveryTextWithAPrefixComesItsLastCharacterRaised) {
  using O = std::optional<std::string>;
  EXPECT_EQ(q::after_every("plant-7/"), O("plant-70"));
  EXPECT_EQ(q::after_every("a\x7f"), O("a\xc2\x80"));                 // U+007F -> U+0080
  EXPECT_EQ(q::after_every("\xc3\xa9"), O("\xc3\xaa"));               // é -> ê
  EXPECT_EQ(q::after_every("\xdf\xbf"), O("\xe0\xa0\x80"));          // U+07FF -> U+0800
  EXPECT_EQ(q::after_every("x\xed\x9f\xbf"), O("x\xee\x80\x80"));   // U+D7FF -> U+E000, past the surrogates
  EXPECT_EQ(q::after_every("\xef\xbf\xbf"), O("\xf0\x90\x80\x80")); // U+FFFF -> U+10000
  EXPECT_EQ(q::after_every("\xf0\x9f\x98\x80"), O("\xf0\x9f\x98\x81"));
  EXPECT_EQ(q::after_every("a\xf4\x8f\xbf\xbf"), std::nullopt);      // U+10FFFF: nothing above it
  EXPECT_EQ(q::after_every(""), std::nullopt);
  EXPECT_EQ(q::after_every("a\xff"), std::nullopt);                      // not UTF-8
  for (const std::string p : {"plant-7/", "\xc3\xa9", "x\xed\x9f\xbf", "\xef\xbf\xbf"}) {
    const std::string above = *q::after_every(p);
    EXPECT_LT(p + "\xf4\x8f\xbf\xbf\xf4\x8f\xbf\xbf", above) << p;  // above every text it starts
    EXPECT_TRUE(ds::is_valid_utf8(above)) << p;
  }
}

TEST_F(Fleet, FindsInThingThenNameOrder) {
  EXPECT_EQ(find("ge(reported/n,3)"), (Strings{"other|main", "plant-7/s1|aux", "plant-7/s3|main", "plant-7/s4|main"}));
  EXPECT_EQ(find("").size(), 8u);
}

TEST_F(Fleet, AThingPrefixReadsOnlyThoseThings) {
  EXPECT_EQ(find(R"(and(like(thing,"plant-7/s1*"),exists(reported/n)))"), (Strings{"plant-7/s1|aux", "plant-7/s1|main"}));
  EXPECT_EQ(store.visited, Strings{"plant-7/s1"});
  EXPECT_EQ(find(R"(in(thing,"plant-8/s0","nothing"))"), Strings{"plant-8/s0|main"});
  EXPECT_EQ(store.visited, (Strings{"nothing", "plant-8/s0"}));
}

TEST_F(Fleet, TheTokenPatternsLimitWhatIsRead) {
  const std::vector<ds::ThingPattern> scope = {{"plant-8/", true}, {"other", false}};
  EXPECT_EQ(find("", scope), (Strings{"other|main", "plant-8/s0|main"}));
  EXPECT_EQ(store.visited, (Strings{"other", "plant-8/s0"}));
  EXPECT_EQ(find(R"(like(thing,"plant-7/*"))", scope), Strings{});
  EXPECT_TRUE(store.visited.empty());
}

TEST_F(Fleet, ResumesAfterAShadow) {
  EXPECT_EQ(find("", {}, ds::ShadowKey{"plant-7/s1", "aux"}).front(), "plant-7/s1|main");
  EXPECT_EQ(find("", {}, ds::ShadowKey{"plant-7/s4", "main"}), Strings{"plant-8/s0|main"});
  EXPECT_EQ(find(R"(like(thing,"plant-7/*"))", {}, ds::ShadowKey{"plant-7/s3", "main"}), Strings{"plant-7/s4|main"});
  EXPECT_EQ(find(R"(in(thing,"other","plant-8/s0"))", {}, ds::ShadowKey{"other", "main"}), Strings{"plant-8/s0|main"});
}

TEST_F(Fleet, PastTheBudgetTheQueryIsRefusedNamingAFieldToIndex) {
  try {
    find(R"(and(eq(reported/n,1),exists(desired)))", {}, std::nullopt, {.budget = 3});
    FAIL() << "no error";
  } catch (const ds::Error& e) {
    EXPECT_EQ(e.code(), ds::ErrorCode::query_too_expensive);
    EXPECT_EQ(e.details().field, "reported/n");
  }
  EXPECT_EQ(find(R"(like(thing,"plant-7/s1*"))", {}, std::nullopt, {.budget = 2}).size(), 2u);
  // The field named is one an index can be declared on: @ts is a field of its own, delta none.
  auto field_named = [&](std::string_view filter) {
    try {
      find(filter, {}, std::nullopt, {.budget = 3});
    } catch (const ds::Error& e) {
      EXPECT_EQ(e.code(), ds::ErrorCode::query_too_expensive);
      return e.details().field;
    }
    return std::string("no error");
  };
  EXPECT_EQ(field_named("lt(reported/n@ts,time:now)"), "reported/n@ts");
  EXPECT_EQ(field_named("and(eq(delta/n,1),lt(reported/n@changed,time:now))"), "reported/n@changed");
  EXPECT_EQ(field_named("eq(delta/n,1)"), "thing");
}

// The budget counts shadows one by one: a query that stops early (a full page) is not refused
// for the ones it never examined.
TEST_F(Fleet, TheBudgetCountsWhatIsExamined) {
  for (int i = 0; i < 5; ++i) report("many", "s" + std::to_string(i), R"({"n":1})");
  const q::Filter f = q::Filter::parse(R"(eq(thing,"many"))", 0);
  int seen = 0;
  const std::size_t examined = q::scan(store, keys, {f, {}, std::nullopt, false}, {.budget = 2, .budget_always = true},
                                       [&](const q::Subject&) { return ++seen < 2; });
  EXPECT_EQ(seen, 2);
  EXPECT_EQ(examined, 2u);
  EXPECT_THROW(q::scan(store, keys, {f, {}, std::nullopt, false}, {.budget = 2, .budget_always = true},
                       [&](const q::Subject&) { return true; }),
               ds::Error);
}

TEST_F(Fleet, OnDynamoDbReadingEveryThingNeedsConsent) {
  const q::QueryOptions dynamodb{.scan_needs_consent = true};
  EXPECT_THROW(find("eq(reported/n,1)", {}, std::nullopt, dynamodb), ds::Error);
  EXPECT_EQ(find(R"(like(thing,"plant-8/*"))", {}, std::nullopt, dynamodb).size(), 1u);
  const std::vector<ds::ThingPattern> scope = {{"plant-8/", true}};
  EXPECT_EQ(find("", scope, std::nullopt, dynamodb).size(), 1u) << "a token's prefixes narrow it too";
  const q::Filter all;
  EXPECT_EQ(q::scan(store, keys, {all, {}, std::nullopt, true}, dynamodb, [](const q::Subject&) { return true; }), 8u);
}

TEST(Cursor, SealsTheKeyForOneBinding) {
  const q::CursorKey key = q::CursorKey::random();
  const ds::ShadowKey last{"My House#Basement", "main"};
  const std::string binding = q::cursor_binding("eq(name,\"main\")", "+thing,+name", "abc");
  const std::string cursor = key.seal(last, binding);
  EXPECT_EQ(key.open(cursor, binding), last);
  EXPECT_EQ(cursor.find("House"), std::string::npos);
  EXPECT_NE(key.seal(last, binding), cursor) << "a fresh nonce each time";
  EXPECT_THROW(key.open(cursor, q::cursor_binding("eq(name,\"aux\")", "+thing,+name", "abc")), ds::Error);
  EXPECT_THROW(key.open(cursor, q::cursor_binding("eq(name,\"main\")", "+thing,+name", "abd")), ds::Error);
  EXPECT_THROW(q::CursorKey::random().open(cursor, binding), ds::Error);
  std::string tampered = cursor;
  tampered[tampered.size() / 2] = tampered[tampered.size() / 2] == 'A' ? 'B' : 'A';
  EXPECT_THROW(key.open(tampered, binding), ds::Error);
  EXPECT_THROW(key.open("not a cursor!", binding), ds::Error);
  EXPECT_THROW(key.open("", binding), ds::Error);
}

TEST(Cursor, AKeyFileOutlivesTheProcess) {
  const auto path = std::filesystem::temp_directory_path() / ("cursor-key-" + std::to_string(::getpid()));
  std::filesystem::remove(path);
  const std::string binding = q::cursor_binding("", "+thing,+name", "");
  const std::string cursor = q::CursorKey::from_file(path.string()).seal({"t", "n"}, binding);
  EXPECT_EQ(std::filesystem::file_size(path), 32u);
  EXPECT_EQ(std::filesystem::status(path).permissions() & std::filesystem::perms::all, std::filesystem::perms::owner_read | std::filesystem::perms::owner_write);
  EXPECT_EQ(q::CursorKey::from_file(path.string()).open(cursor, binding), (ds::ShadowKey{"t", "n"}));
  std::ofstream(path) << "short";
  EXPECT_THROW(q::CursorKey::from_file(path.string()), std::runtime_error);
  std::filesystem::remove(path);
}

TEST(Cursor, AKeyFileOthersCanReadIsRefused) {
  const auto path = std::filesystem::temp_directory_path() / ("cursor-key-open-" + std::to_string(::getpid()));
  std::ofstream(path) << std::string(32, 'k');
  using std::filesystem::perms;
  for (perms extra : {perms::group_read, perms::group_write, perms::others_read, perms::others_write}) {
    std::filesystem::permissions(path, perms::owner_read | perms::owner_write | extra);
    try {
      q::CursorKey::from_file(path.string());
      ADD_FAILURE() << "a key file with mode " << static_cast<int>(extra) << " was taken";
    } catch (const std::runtime_error& e) {
      EXPECT_NE(std::string(e.what()).find("chmod 600 " + path.string()), std::string::npos) << e.what();
    }
  }
  for (perms taken : {perms::none, perms::group_exec | perms::others_exec}) {  // execute bits give no access to it
    std::filesystem::permissions(path, perms::owner_read | perms::owner_write | taken);
    EXPECT_NO_THROW(q::CursorKey::from_file(path.string()));
  }
  std::filesystem::remove(path);
}

}  // namespace
