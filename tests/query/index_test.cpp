// Declared indexes on every store (memory, SQLite, DynamoDB in both layouts): the values a field
// holds and the order ranges read them in, entries kept exact by writes (random writes against a
// rebuild), the background build with writes landing during it, removal, persistence,
// declarations by several processes on one DynamoDB table, and a store that keeps none.
#include "query/index.hpp"
#include "query/search.hpp"

#include "deviceshadow/engine.hpp"
#include "deviceshadow/error.hpp"
#include "support/forwarding_store.hpp"
#include "support/stores.hpp"

#include <gtest/gtest.h>

#include <condition_variable>
#include <mutex>
#include <random>
#include <set>
#include <thread>

namespace q = deviceshadow::query;
using T = ds::IndexValue::Type;

namespace {

bool on_dynamodb(const std::string& kind) { return kind.starts_with("dynamodb"); }
ds::DynamoDbLayout layout_of(const std::string& kind) {
  return kind == "dynamodb_combined" ? ds::DynamoDbLayout::combined : ds::DynamoDbLayout::separate;
}

std::unique_ptr<ds::StoreBackend> open_store(const std::string& kind, const TempDir& dir) {
  if (kind == "memory" || (on_dynamodb(kind) && dynamodb_endpoint().empty())) return ds::make_memory_store();  // skipped
  if (on_dynamodb(kind)) return open_dynamodb_for_test(dir.path(), layout_of(kind));
  ds::SqliteOptions o;
  o.path = (dir.path() / "shadows.db").string();
  o.durable = false;
  return ds::open_sqlite_store(o);
}

// Every entry of `field`, as "thing|name|type|value".
std::set<std::string> entries_of(ds::Store& store, const std::string& field) {
  std::set<std::string> out;
  for (T type : {T::null, T::boolean, T::number, T::string, T::time, T::absent}) {
    const ds::IndexHit* after = nullptr;
    std::vector<ds::IndexHit> page;
    for (;;) {
      std::vector<ds::IndexHit> next = store.index_range(field, {type}, after, 7);  // small pages: resuming is tested too
      if (next.empty()) break;
      for (const ds::IndexHit& h : next) {
        std::string v = h.value.type == T::string ? h.value.text
                        : h.value.real             ? std::to_string(h.value.number)
                                                   : std::to_string(h.value.integer);
        out.insert(h.thing + "|" + h.name + "|" + std::to_string(static_cast<int>(type)) + "|" + v);
      }
      page = std::move(next);
      after = &page.back();
    }
  }
  return out;
}

// The entries a rebuild from the stored shadows would make.
std::set<std::string> rebuilt(ds::Store& store, const std::string& field, const ds::TimestampKeys& keys) {
  const q::Property p = q::parse_index_field(field);
  std::set<std::string> out;
  for (const std::string& thing : store.list_things("", "", 100000)) {
    for (const ds::ShadowSummary& s : store.list_shadows(thing, "", 100000)) {
      const ds::ShadowKey key{thing, s.name};
      const ds::ShadowRecord r = store.read(key);
      q::Subject subject(key, r, keys);
      for (const ds::IndexValue& v : q::index_values(subject, p)) {
        std::string text = v.type == T::string ? v.text : v.real ? std::to_string(v.number) : std::to_string(v.integer);
        out.insert(thing + "|" + s.name + "|" + std::to_string(static_cast<int>(v.type)) + "|" + text);
      }
    }
  }
  return out;
}

// Drops a test's DynamoDB table once its store is closed.
struct DropTable {
  const std::string kind;
  const TempDir& dir;
  ~DropTable() {
    if (on_dynamodb(kind) && !dynamodb_endpoint().empty()) ds::delete_dynamodb_table(dynamodb_test_options(dir.path(), layout_of(kind)));
  }
};

struct Indexes : ::testing::TestWithParam<std::string> {
  TempDir dir;
  DropTable drop{GetParam(), dir};
  std::unique_ptr<ds::StoreBackend> store = open_store(GetParam(), dir);
  ds::Engine engine{*store};
  ds::TimestampKeys keys;
  std::unique_ptr<q::IndexKeeper> keeper = std::make_unique<q::IndexKeeper>(*store, keys);

  void SetUp() override {
    if (on_dynamodb(GetParam()) && dynamodb_endpoint().empty()) {
      if (std::getenv("DS_REQUIRE_DYNAMODB")) FAIL() << "DS_REQUIRE_DYNAMODB is set but DS_DYNAMODB_ENDPOINT is not";
      GTEST_SKIP() << "no DynamoDB endpoint (run through scripts/test.sh)";
    }
    engine.set_indexer(keeper.get());
  }
  void TearDown() override { engine.set_indexer(nullptr); }

  void write(ds::Section section, const std::string& thing, std::string_view state) {
    ds::UpdateRequest r;
    r.key = {thing, "main"};
    r.section = section;
    r.state = ds::parse_json(state).as_object();
    r.acknowledge = false;
    engine.update(r);
  }
  void report(const std::string& thing, std::string_view state) { write(ds::Section::reported, thing, state); }

  std::vector<ds::IndexValue> values(std::string_view state, const std::string& field) {
    ds::ShadowRecord r;
    r.reported.version = 1;
    r.reported.state_json = std::string(state);
    const ds::ShadowKey key{"t", "main"};
    q::Subject subject(key, r, keys);
    return q::index_values(subject, q::parse_index_field(field));
  }
};

TEST_P(Indexes, ValuesAreTypedAsFiltersCompareThem) {
  auto one = values(R"({"a":1})", "reported/a"), one_real = values(R"({"a":1.0})", "reported/a");
  ASSERT_EQ(one.size(), 1u);
  EXPECT_EQ(one, one_real);  // 1 = 1.0
  EXPECT_EQ(values(R"({"a":[3,1,3]})", "reported/a").size(), 2u);  // one entry per distinct element
  auto ts = values(R"({"a":{"value":"x","ts":1700000000}})", "reported/a");
  ASSERT_EQ(ts.size(), 1u);  // a timestamped value by its value
  EXPECT_EQ(ts[0].text, "x");
  auto at = values(R"({"a":{"value":"x","ts":1700000000}})", "reported/a@ts");
  ASSERT_EQ(at.size(), 1u);
  EXPECT_EQ(at[0], ds::IndexValue::of_time(1700000000LL * 1000000000));
  auto time_string = values(R"({"a":"2026-01-01T00:00:00Z"})", "reported/a");
  ASSERT_EQ(time_string.size(), 2u);  // a string and a time
  EXPECT_EQ(time_string[0].type, T::string);
  EXPECT_EQ(time_string[1].type, T::time);
  // Objects are not compared: a shadow holding no value has one entry, `absent`.
  EXPECT_EQ(values(R"({"a":{"b":1}})", "reported/a"), std::vector<ds::IndexValue>{{T::absent}});
  EXPECT_EQ(values(R"({"b":1})", "reported/a"), std::vector<ds::IndexValue>{{T::absent}});
  EXPECT_EQ(values(R"({"b":1})", "name"), (std::vector<ds::IndexValue>{{T::string, 0, 0, false, "main"}}));
  EXPECT_EQ(values(R"({"a":null})", "reported/a").front().type, T::null);
  EXPECT_EQ(values(R"({"a":true})", "reported/a").front().integer, 1);
}

// Every range of every type reads exactly the entries its bounds contain, in value order (ties by
// thing), both ways: numbers mixing integers and doubles of every magnitude and sign, strings with
// the bytes a store's keys may reserve, strings longer than a DynamoDB key holds, times, booleans.
TEST_P(Indexes, RangesReadWhatTheirBoundsContainInValueOrder) {
  // Longer than a DynamoDB key holds (400 bytes of a value, docs/storage.md), differing within them.
  const std::string long_a(500, 'x'), long_b = std::string(300, 'x') + "y" + std::string(200, 'x');
  const std::vector<std::string> values = {
      "-9223372036854775808", "-1e120", "-2.5", "-2", "-1.5", "-1", "-0.5", "-0.25", "0", "1e-120", "0.5", "1", "1.5",
      "2", "10", "9007199254740993", "9223372036854775807", "18446744073709551615", "1e19", "1e120",
      // Doubles holding whole numbers past 2^53, their shortest digits not theirs: equal to the integers.
      "36028797018963968", "3.602879701896397e16", "-9.223372036854775808e18", "9.223372036854775807e18", R"("")", R"("\u0000")", R"("\u0001")",
      R"("\u0002")", R"("a")", R"("a\u0000")", R"("a\u0003")", R"("ab")", R"("b")", R"("\u00e9")",
      "\"" + long_a + "\"", "\"" + long_b + "\"", R"("2026-01-01T00:00:00Z")", R"("1969-12-31T23:59:59Z")", "true",
      "false", "null"};
  for (std::size_t i = 0; i < values.size(); ++i) {
    ASSERT_NO_THROW(report("v" + std::to_string(i), R"({"x":)" + values[i] + "}")) << values[i];
    report("w" + std::to_string(i), R"({"x":)" + values[i] + "}");  // ties, ordered by thing
  }
  keeper->declare({"reported/x"});
  keeper->wait_until_built();
  for (T type : {T::null, T::boolean, T::number, T::string, T::time, T::absent}) {
    std::vector<ds::IndexHit> all = store->index_range("reported/x", {type}, nullptr, 1000);
    std::vector<ds::IndexHit> sorted = all;
    std::stable_sort(sorted.begin(), sorted.end(), [](const ds::IndexHit& a, const ds::IndexHit& b) {
      return std::tie(a.value, a.thing, a.name) < std::tie(b.value, b.thing, b.name);
    });
    EXPECT_EQ(all.size(), type == T::number ? 48u : type == T::string ? 28u : type == T::time ? 4u : type == T::null || type == T::absent ? 0u : 4u);  // null removes a member
    auto keys_of = [](const std::vector<ds::IndexHit>& hits) {
      std::vector<std::string> out;
      for (const ds::IndexHit& h : hits) out.push_back(h.thing);
      return out;
    };
    EXPECT_EQ(keys_of(all), keys_of(sorted)) << static_cast<int>(type);
    ds::IndexRange reverse{type};
    reverse.descending = true;
    std::vector<std::string> backwards = keys_of(store->index_range("reported/x", reverse, nullptr, 1000));
    std::reverse(backwards.begin(), backwards.end());
    EXPECT_EQ(backwards, keys_of(sorted));
    for (const ds::IndexHit& bound : all) {
      if (&bound != &all.front() && bound.value == (&bound - 1)->value) continue;
      for (int shape = 0; shape < 5; ++shape) {
        ds::IndexRange r{type};
        if (shape == 0 || shape == 1) r.low = bound.value, r.low_open = shape == 1;
        if (shape == 2 || shape == 3) r.high = bound.value, r.high_open = shape == 3;
        if (shape == 4) r.low = r.high = bound.value;
        std::vector<ds::IndexHit> expected;
        std::copy_if(sorted.begin(), sorted.end(), std::back_inserter(expected), [&](const ds::IndexHit& h) { return r.contains(h.value); });
        EXPECT_EQ(keys_of(store->index_range("reported/x", r, nullptr, 1000)), keys_of(expected)) << bound.thing << " " << shape;
        EXPECT_EQ(store->index_count("reported/x", r, 1000), expected.size()) << bound.thing << " " << shape;
      }
    }
  }
}

// A read of one value ends before its range's end (IndexRange::end), both ways and resumed; things
// sharing prefixes, non-ASCII ones, other shadow names and another value around it.
TEST_P(Indexes, ARangeOfOneValueEndsBeforeItsEnd) {
  const std::vector<std::string> things = {"a", "a/1", "a/2", "a0", "ab", "b", "b\u00e9", "\u00e9", "\u00e9/x", "\U0001F600"};
  for (const std::string& t : things) report(t, R"({"x":"v"})");
  ds::UpdateRequest other;
  other.key = {"a/1", "zz"};
  other.section = ds::Section::reported;
  other.state = ds::parse_json(R"({"x":"v"})").as_object();
  engine.update(other);
  report("a/3", R"({"x":"w"})");
  keeper->declare({"reported/x"});
  keeper->wait_until_built();
  std::vector<ds::IndexHit> all = store->index_range("reported/x", {T::string}, nullptr, 1000);
  ASSERT_EQ(all.size(), things.size() + 2);
  const ds::IndexValue v = all.front().value;
  std::erase_if(all, [&](const ds::IndexHit& h) { return !(h.value == v); });
  ASSERT_EQ(all.size(), things.size() + 1);
  auto keys_of = [](const std::vector<ds::IndexHit>& hits) {
    std::vector<std::string> out;
    for (const ds::IndexHit& h : hits) out.push_back(h.thing + "|" + h.name);
    return out;
  };
  std::vector<std::pair<std::string, std::string>> ends = {{"a/", ""}, {"a/1", "main"}, {"a/1", "\x7f"}, {"a0", ""},
                                                            {"a\u00e9", ""}, {"z", ""}, {"\u00e9/", ""}, {"\u00e9/y", ""}};
  for (const std::string& t : things) ends.emplace_back(t, ""), ends.emplace_back(t, "\x7f");
  for (const auto& [thing, name] : ends) {
    for (bool descending : {false, true}) {
      ds::IndexRange r{T::string, v, v};
      r.descending = descending;
      r.end = ds::IndexHit{v, thing, name};
      std::vector<ds::IndexHit> expected;
      std::copy_if(all.begin(), all.end(), std::back_inserter(expected),
                   [&](const ds::IndexHit& h) { return std::tie(h.thing, h.name) < std::tie(thing, name); });
      if (descending) std::reverse(expected.begin(), expected.end());
      EXPECT_EQ(keys_of(store->index_range("reported/x", r, nullptr, 1000)), keys_of(expected)) << thing << "|" << name;
      EXPECT_EQ(store->index_count("reported/x", r, 1000), expected.size()) << thing << "|" << name;
      if (expected.size() < 2 || descending) continue;
      expected.erase(expected.begin());  // resumed after the first
      EXPECT_EQ(keys_of(store->index_range("reported/x", r, &all.front(), 1000)), keys_of(expected)) << thing << "|" << name;
    }
  }
}

// A shadow holding more values than a DynamoDB transaction holds items: built in parts, and
// deleted whole (the deletes past the limit follow the commit). On DynamoDB a write adding that
// many entries at once is refused and stores nothing.
TEST_P(Indexes, AShadowHoldingManyValuesIsBuiltAndDeletedWhole) {
  auto array = [](int from) {
    std::string out = "[";
    for (int i = from; i < from + 150; ++i) out += (i > from ? "," : "") + std::to_string(i);
    return out + "]";
  };
  report("many", R"({"a":)" + array(0) + "}");
  report("other", R"({"a":1})");
  keeper->declare({"reported/a"});
  keeper->wait_until_built();
  EXPECT_EQ(entries_of(*store, "reported/a").size(), 151u);
  if (on_dynamodb(GetParam())) {
    try {
      report("many", R"({"a":)" + array(1000) + "}");
      FAIL() << "150 new entries in one transaction";
    } catch (const ds::Error& e) {
      EXPECT_EQ(e.code(), ds::ErrorCode::invalid_request);
      EXPECT_NE(std::string(e.what()).find("at most 100"), std::string::npos) << e.what();
    }
    EXPECT_EQ(entries_of(*store, "reported/a").size(), 151u);
    EXPECT_EQ(store->read({"many", "main"}).reported.version, 1u);
  }
  engine.remove({"many", "main"}, std::nullopt, std::nullopt, ds::WriteSource::api);
  EXPECT_EQ(entries_of(*store, "reported/a"), rebuilt(*store, "reported/a", keys));
  EXPECT_EQ(entries_of(*store, "reported/a").size(), 1u);
}

TEST_P(Indexes, RefusesFieldsThatCannotBeIndexed) {
  for (const char* bad : {"thing", "delta/x", "reported", "bogus/x", ""}) {
    EXPECT_THROW(keeper->declare({bad}), ds::Error) << bad;
  }
  EXPECT_THROW(keeper->declare({"reported/a", "reported/a"}), ds::Error);
  EXPECT_TRUE(keeper->status().empty());
}

TEST_P(Indexes, RandomWritesKeepTheIndexEqualToARebuild) {
  const std::vector<std::string> fields{"reported/temp", "reported/tags", "desired/sp", "reported/temp@changed",
                                        "_modified", "_pending", "reported/obj/v", "name"};
  keeper->declare(fields);
  keeper->wait_until_built();
  std::mt19937 rng(7);
  const char* values[] = {"1", "1.5", "-3", "\"a\"", "\"b\"", "true", "null", "[1,2]", "{\"value\":4,\"ts\":" "1700000000}"};
  for (int i = 0; i < 400; ++i) {
    const std::string thing = "t" + std::to_string(rng() % 20);
    const std::string v = values[rng() % std::size(values)];
    switch (rng() % 6) {
      case 0: report(thing, R"({"temp":)" + v + "}"); break;
      case 1: report(thing, R"({"tags":)" + v + R"(,"other":1})"); break;
      case 2: write(ds::Section::desired, thing, R"({"sp":)" + v + "}"); break;
      case 3: report(thing, R"({"obj":{"v":)" + v + "}}"); break;
      case 4: report(thing, R"({"unindexed":)" + v + "}"); break;
      case 5:
        try {
          engine.remove({thing, "main"}, rng() % 2 ? std::optional(ds::Section::reported) : std::nullopt);
        } catch (const ds::Error&) {  // nothing to delete
        }
        break;
    }
  }
  for (const std::string& f : fields) EXPECT_EQ(entries_of(*store, f), rebuilt(*store, f, keys)) << f;
}

TEST_P(Indexes, BuildsExistingShadowsInTheBackgroundWhileWritesGoOn) {
  for (int i = 0; i < 450; ++i) report("t" + std::to_string(i), R"({"n":)" + std::to_string(i % 10) + "}");
  std::atomic<bool> done = false;
  std::thread writer([&] {
    for (int i = 0; !done || i < 200; ++i) report("t" + std::to_string(i % 500), R"({"n":)" + std::to_string(i % 7) + "}");
  });
  auto states = keeper->declare({"reported/n"});
  ASSERT_EQ(states.size(), 1u);
  keeper->wait_until_built();
  done = true;
  writer.join();
  const auto status = keeper->status();
  ASSERT_EQ(status.size(), 1u);
  EXPECT_TRUE(status[0].ready);
  EXPECT_GE(status[0].indexed, 450u);
  EXPECT_TRUE(keeper->ready("reported/n"));
  EXPECT_EQ(entries_of(*store, "reported/n"), rebuilt(*store, "reported/n", keys));
  EXPECT_EQ(store->index_fields().fields, status);  // stored: every shadowd sees it
}

// The build skips a shadow written after it read it; that write stores the shadow's entries, also
// when it changes other leaves only.
TEST_P(Indexes, AWriteDuringTheBuildStoresTheEntriesTheBuildSkips) {
  for (int i = 0; i < 5; ++i) report("t" + std::to_string(i), R"({"n":)" + std::to_string(i) + "}");
  report("t5", R"({"other":0})");  // an `absent` entry
  class WriteAfterRead : public ForwardingStore {
   public:
    using ForwardingStore::ForwardingStore;
    std::function<void()> hook;
    std::vector<ds::ShadowRecord> read(std::span<const ds::ShadowKey> keys) override {
      std::vector<ds::ShadowRecord> out = inner_.read(keys);
      if (hook && keys.size() > 1) std::exchange(hook, nullptr)();
      return out;
    }
  } building{*store};
  q::IndexKeeper other(building, keys);
  engine.set_indexer(&other);
  building.hook = [&] {
    report("t1", R"({"other":1})");
    report("t5", R"({"other":1})");
  };
  other.declare({"reported/n"});
  other.wait_until_built();
  EXPECT_EQ(building.hook, nullptr);
  EXPECT_EQ(entries_of(*store, "reported/n"), rebuilt(*store, "reported/n", keys));
  EXPECT_EQ(entries_of(*store, "reported/n").size(), 6u);
  engine.set_indexer(nullptr);
}

// A build the store fails (a full disk) is tried again, and its failure told once, not each time.
TEST_P(Indexes, ABuildTheStoreFailsIsToldOnceAndTriedAgain) {
  for (int i = 0; i < 5; ++i) report("t" + std::to_string(i), R"({"n":)" + std::to_string(i) + "}");
  struct Failing : ForwardingStore {
    using ForwardingStore::ForwardingStore;
    std::atomic<int> failures{2};
    std::vector<ds::ShadowRecord> read(std::span<const ds::ShadowKey> keys) override {
      if (keys.size() > 1 && failures.fetch_sub(1) > 0) throw ds::Error(ds::ErrorCode::unavailable, "disk is full");
      return inner_.read(keys);
    }
  } failing{*store};
  std::mutex mutex;
  std::vector<std::string> told;
  q::IndexKeeper other(failing, keys, {.on_build_error = [&](const std::string& e) {
                         std::lock_guard lock(mutex);
                         told.push_back(e);
                       }});
  other.declare({"reported/n"});
  other.wait_until_built();
  EXPECT_EQ(told, std::vector<std::string>{"disk is full"});
  EXPECT_EQ(entries_of(*store, "reported/n").size(), 5u);
}

TEST_P(Indexes, AFieldLeftOutLosesItsEntriesAndTheOthersKeepTheirs) {
  for (int i = 0; i < 30; ++i) report("t" + std::to_string(i), R"({"a":1,"b":2})");
  keeper->declare({"reported/a", "reported/b"});
  keeper->wait_until_built();
  EXPECT_EQ(entries_of(*store, "reported/a").size(), 30u);
  auto states = keeper->declare({"reported/b"});
  ASSERT_EQ(states.size(), 1u);
  EXPECT_TRUE(states[0].ready);  // kept as it was
  EXPECT_TRUE(entries_of(*store, "reported/a").empty());
  EXPECT_FALSE(keeper->ready("reported/a"));
  report("t0", R"({"a":5})");
  EXPECT_TRUE(entries_of(*store, "reported/a").empty());
  EXPECT_EQ(entries_of(*store, "reported/b").size(), 30u);
}

TEST_P(Indexes, ADeclarationOutlivesTheKeeper) {
  report("t", R"({"a":1})");
  keeper->declare({"reported/a"});
  keeper->wait_until_built();
  engine.set_indexer(nullptr);
  keeper = std::make_unique<q::IndexKeeper>(*store, keys);
  engine.set_indexer(keeper.get());
  EXPECT_TRUE(keeper->ready("reported/a"));
  report("u", R"({"a":2})");
  EXPECT_EQ(entries_of(*store, "reported/a").size(), 2u);
}

// Two processes on one DynamoDB table: a field one declares is indexed by writes through the
// other, whether the other has read the declaration yet (its build waits for those writes) or
// not (its write fails the declaration's check and is decided again); a field left out is
// written by neither.
struct SharedIndexes : Indexes {};

TEST_P(SharedIndexes, ProcessesSharingATableIndexByTheSameDeclaration) {
  const q::IndexKeeperOptions shared{.refresh = std::chrono::milliseconds(50), .grace = std::chrono::milliseconds(500)};
  engine.set_indexer(nullptr);
  keeper = std::make_unique<q::IndexKeeper>(*store, keys, shared);
  engine.set_indexer(keeper.get());
  std::unique_ptr<ds::StoreBackend> other_store = open_dynamodb_for_test(dir.path(), layout_of(GetParam()));
  ds::Engine other(*other_store);
  // It reads the declaration only when told to or when a write fails its check.
  auto other_keeper = std::make_unique<q::IndexKeeper>(*other_store, keys, q::IndexKeeperOptions{.refresh = std::chrono::hours(1), .grace = shared.grace});
  other.set_indexer(other_keeper.get());
  auto write_other = [&](const std::string& thing, std::string_view state) {
    ds::UpdateRequest r;
    r.key = {thing, "main"};
    r.state = ds::parse_json(state).as_object();
    other.update(r);
  };
  keeper->declare({"reported/a"});
  for (int i = 0; i < 10; ++i) write_other("early" + std::to_string(i), R"({"a":1,"b":1})");  // maybe before it read it
  keeper->wait_until_built();
  EXPECT_EQ(entries_of(*store, "reported/a").size(), 10u);
  other_keeper->reload();  // its refresh
  EXPECT_TRUE(other_keeper->ready("reported/a"));
  keeper->declare({"reported/a", "reported/b"});
  write_other("late", R"({"a":2,"b":2})");  // by the list it read: the check fails, it reads again
  keeper->declare({"reported/b"});
  write_other("later", R"({"a":3,"b":3})");
  keeper->wait_until_built();
  other_keeper->wait_until_built();
  EXPECT_TRUE(entries_of(*store, "reported/a").empty());
  EXPECT_EQ(entries_of(*store, "reported/b"), rebuilt(*store, "reported/b", keys));
  EXPECT_EQ(entries_of(*store, "reported/b").size(), 12u);
  EXPECT_TRUE(other_keeper->ready("reported/b"));
  other.set_indexer(nullptr);
}

// A refresh that read the declaration before this process declared does not undo the
// declaration when it takes what it read.
TEST_P(SharedIndexes, ARefreshReadBeforeADeclarationKeepsIt) {
  struct SlowRead : ForwardingStore {
    using ForwardingStore::ForwardingStore;
    std::mutex mutex;
    std::condition_variable cv;
    int stage = 0;  // 1: a read is held back, 2: let it go
    ds::IndexDeclaration index_fields() override {
      ds::IndexDeclaration read = ForwardingStore::index_fields();
      std::unique_lock lock(mutex);
      if (stage == 0) {
        stage = 1;
        cv.notify_all();
        cv.wait(lock, [&] { return stage == 2; });
      }
      return read;
    }
  };
  engine.set_indexer(nullptr);
  keeper.reset();
  SlowRead slow(*store);
  slow.stage = 3;  // not the constructor's read
  q::IndexKeeper shared(slow, keys);
  slow.stage = 0;
  std::thread refresh([&] { shared.reload(); });
  {
    std::unique_lock lock(slow.mutex);
    slow.cv.wait(lock, [&] { return slow.stage == 1; });
  }
  shared.declare({"reported/a"});
  {
    std::lock_guard lock(slow.mutex);
    slow.stage = 2;
  }
  slow.cv.notify_all();
  refresh.join();
  ASSERT_EQ(shared.status().size(), 1u);
  EXPECT_EQ(shared.status()[0].field, "reported/a");
}

// Counts the shadows a query reads, so a test sees what the planner chose.
class ReadCounter : public ForwardingStore {
 public:
  using ForwardingStore::ForwardingStore;
  std::vector<ds::ShadowRecord> read(std::span<const ds::ShadowKey> keys) override {
    read_keys += keys.size();
    return inner_.read(keys);
  }
  std::uint64_t index_count(std::string_view field, const ds::IndexRange& range, std::uint64_t cap) override {
    ++index_counts;
    return inner_.index_count(field, range, cap);
  }
  std::vector<ds::IndexHit> index_range(std::string_view field, const ds::IndexRange& range, const ds::IndexHit* after,
                                        std::size_t limit) override {
    std::vector<ds::IndexHit> hits = inner_.index_range(field, range, after, limit);
    index_entries += hits.size();
    return hits;
  }
  std::size_t read_keys = 0;
  std::size_t index_counts = 0;
  std::size_t index_entries = 0;  // read by index_range
};

struct Planner : Indexes {
  ReadCounter counter{*store};

  void SetUp() override {
    Indexes::SetUp();
    for (int i = 0; i < 300; ++i) {
      const std::string thing = "plant-" + std::to_string(i % 3) + "/s" + std::to_string(i);
      report(thing, R"({"fw":")" + std::string(i % 10 == 0 ? "2.0" : "1.0") + R"(","temp":)" + std::to_string(i % 50) +
                        R"(,"tags":["a",")" + std::to_string(i % 4) + R"("],"at":"2026-01-0)" + std::to_string(1 + i % 9) +
                        R"(T00:00:00Z","flag":)" + (i % 2 ? "true" : "false") + "}");
    }
    report("plant-0/s0", R"({"temp":1.0})");
  }

  // The keys a search finds ("thing|name"), in order; `indexes` decides whether the index may serve.
  std::vector<std::string> find(std::string_view filter, bool indexes, std::optional<ds::ShadowKey> after = std::nullopt,
                                std::size_t budget = 200000, std::size_t limit = SIZE_MAX) {
    const q::Filter f = q::Filter::parse(filter, 1800000000LL * 1000000000);
    q::QueryOptions options{.budget = budget, .indexes = indexes ? keeper.get() : nullptr};
    std::vector<std::string> out;
    counter.read_keys = counter.index_counts = counter.index_entries = 0;
    q::scan(counter, keys, {f, {}, after, false}, options, [&](const q::Subject& s) {
      out.push_back(s.key().thing + "|" + s.key().name);
      return out.size() < limit;
    });
    return out;
  }
  // What a scan finds, as find(filter, false) would, from one scan of every shadow kept for the
  // whole test (on DynamoDB Local a scan per filter took most of a test's time).
  std::vector<std::string> scanned(std::string_view filter) {
    if (!fleet) {
      fleet.emplace();
      q::scan(counter, keys, {q::Filter::parse(R"(like(thing,"*"))", 0), {}, std::nullopt, false}, {.budget = 200000},
              [&](const q::Subject& s) {
                fleet->emplace_back(s.key(), s.record());
                return true;
              });
    }
    const q::Filter f = q::Filter::parse(filter, 1800000000LL * 1000000000);
    std::vector<std::string> out;
    for (const auto& [key, record] : *fleet) {
      if (f.matches(q::Subject(key, record, keys))) out.push_back(key.thing + "|" + key.name);
    }
    return out;
  }
  std::optional<std::vector<std::pair<ds::ShadowKey, ds::ShadowRecord>>> fleet;  // once scanned(): every shadow

  std::uint64_t count(std::string_view filter, bool indexes, std::span<const ds::ThingPattern> scope = {},
                      std::size_t budget = 200000) {
    const q::Filter f = q::Filter::parse(filter, 1800000000LL * 1000000000);
    counter.read_keys = counter.index_counts = counter.index_entries = 0;
    return q::count(counter, keys, {f, scope, std::nullopt, false}, {.budget = budget, .indexes = indexes ? keeper.get() : nullptr});
  }
};

// Every filter finds the same shadows in the same order with the index as without it.
TEST_P(Planner, FindsWhatAScanFinds) {
  keeper->declare({"reported/fw", "reported/temp", "reported/tags", "reported/at", "reported/flag", "_reportedVersion"});
  keeper->wait_until_built();
  for (const char* filter : {
           R"(eq(reported/fw,"2.0"))", "eq(reported/temp,1)", "eq(reported/temp,1.0)", "gt(reported/temp,45)",
           "ge(reported/temp,45)", "lt(reported/temp,2)", "le(reported/temp,1)", "in(reported/temp,3,4,1000)",
           R"(eq(reported/tags,"3"))", R"(like(reported/fw,"2*"))", R"(like(reported/fw,"*0"))",
           R"(like(reported/fw,"2*9"))", R"(like(reported/fw,"2?0"))", R"(like(reported/fw,"2.0*"))",
           R"(or(like(reported/fw,"2*1"),eq(reported/temp,7)))",
           R"(and(eq(reported/fw,"2.0"),gt(reported/temp,20)))", R"(and(eq(reported/fw,"1.0"),eq(reported/temp,7)))",
           R"(and(like(thing,"plant-1/*"),eq(reported/temp,7)))", "lt(reported/at,time:now)",
           R"(ge(reported/at,"2026-01-05T00:00:00Z"))", R"(gt(reported/at,"2026-01-05"))", "eq(reported/flag,true)",
           "gt(reported/flag,false)", "eq(reported/temp,null)", "ge(_reportedVersion,2)", R"(eq(reported/temp,"1"))",
           R"(and(eq(reported/temp,5),not(eq(reported/fw,"1.0"))))", R"(or(eq(reported/temp,5),eq(reported/temp,6)))",
           R"(or(eq(reported/fw,"2.0"),eq(reported/temp,7)))", R"(or(eq(reported/fw,"2.0"),eq(reported/temp,10)))",
           R"(or(gt(reported/temp,47),or(eq(reported/tags,"3"),lt(reported/at,"2026-01-02"))))",
           R"(or(eq(reported/fw,"2.0"),exists(reported/nothing)))", R"(or(eq(reported/fw,"2.0"),like(thing,"plant-1/*")))",
           R"(and(or(eq(reported/temp,7),eq(reported/temp,8)),eq(reported/flag,true)))",
           R"(and(le(thing,"plant-1/s70\u0001"),eq(reported/fw,"2.0")))", R"(and(like(thing,"plant-1/s7\u0001*"),eq(reported/fw,"2.0")))"}) {
    const std::vector<std::string> expected = scanned(filter);
    EXPECT_EQ(find(filter, true), expected) << filter;
    EXPECT_EQ(count(filter, true), expected.size()) << filter;
  }
  EXPECT_EQ(find(R"(eq(reported/fw,"2.0"))", false), scanned(R"(eq(reported/fw,"2.0"))")) << "scanned() is a scan";
}

TEST_P(Planner, ReadsOnlyWhatTheMostSelectiveComparisonSelects) {
  keeper->declare({"reported/fw", "reported/temp"});
  keeper->wait_until_built();
  EXPECT_EQ(find(R"(and(eq(reported/fw,"1.0"),eq(reported/temp,7)))", true).size(), 6u);
  EXPECT_EQ(counter.read_keys, 6u);  // temp = 7 selects 6, fw = 1.0 selects 270
  EXPECT_EQ(find(R"(eq(reported/fw,"2.0"))", true, std::nullopt, 200000, 5).size(), 5u);
  EXPECT_LE(counter.read_keys, 100u);  // a page reads no further than it needs
  EXPECT_EQ(count(R"(eq(reported/fw,"2.0"))", true), 30u);
  EXPECT_EQ(counter.read_keys, 0u);  // counted from the index alone
  EXPECT_EQ(counter.index_counts, 1u);  // one comparison: nothing to choose between, counted once
  EXPECT_EQ(find(R"(eq(reported/fw,"2.0"))", true).size(), 30u);
  EXPECT_EQ(counter.index_counts, 0u);
  EXPECT_EQ(count(R"(and(eq(reported/fw,"2.0"),eq(reported/temp,10)))", true), 6u);
  EXPECT_EQ(counter.index_counts, 2u);  // two to choose between: each counted, the fewer read
  EXPECT_EQ(counter.read_keys, 6u);
  EXPECT_EQ(count(R"(or(eq(reported/fw,"2.0"),eq(reported/temp,7)))", true), 36u);
  EXPECT_EQ(counter.index_counts, 0u);  // one comparison (an or): its entries read, not counted first
  EXPECT_EQ(find(R"(eq(reported/fw,"2.0"))", false).size(), 30u);
  EXPECT_EQ(counter.read_keys, 300u);
  EXPECT_EQ(find(R"(like(reported/fw,"*0"))", true).size(), 300u);
  EXPECT_EQ(counter.read_keys, 300u);  // no literal prefix: the index would select every string
  EXPECT_EQ(count(R"(like(reported/fw,"2.0"))", true), 30u);
  EXPECT_EQ(counter.read_keys, 0u);  // the pattern is its prefix: counted from the index alone
  EXPECT_EQ(count(R"(like(reported/fw,"2*9"))", true), 0u);
  EXPECT_EQ(counter.read_keys, 30u);  // its prefix's range holds more than it matches: each tested
}

// An `or` whose members the indexes all serve reads the union of what they select, each shadow
// once, and counts from the indexes alone when it is the whole filter.
TEST_P(Planner, AnOrOfDeclaredFieldsReadsTheUnionOfWhatItsMembersSelect) {
  keeper->declare({"reported/fw", "reported/temp", "reported/flag"});
  keeper->wait_until_built();
  EXPECT_EQ(find(R"(or(eq(reported/fw,"2.0"),eq(reported/temp,7)))", true).size(), 36u);
  EXPECT_EQ(counter.read_keys, 36u);  // fw = 2.0 selects 30, temp = 7 six others
  EXPECT_EQ(count(R"(or(eq(reported/fw,"2.0"),eq(reported/temp,10)))", true), 30u);  // temp = 10: all among fw = 2.0
  EXPECT_EQ(counter.read_keys, 0u);
  EXPECT_EQ(find(R"(and(or(eq(reported/temp,7),eq(reported/temp,8)),eq(reported/flag,true)))", true).size(), 6u);
  EXPECT_EQ(counter.read_keys, 12u);  // the or selects 12, flag = true 150
  EXPECT_EQ(find(R"(or(eq(reported/fw,"2.0"),in(reported/fw,"2.0","3.0")))", true, std::nullopt, 40).size(), 30u);
  EXPECT_EQ(counter.read_keys, 30u);  // 60 entries of 30 shadows: within a budget of 40
  EXPECT_EQ(find(R"(or(eq(reported/fw,"2.0"),eq(reported/tags,"3")))", true).size(), 105u);
  EXPECT_EQ(counter.read_keys, 300u);  // tags is not declared: every shadow is read
}

TEST_P(Planner, PagesResumeAfterTheCursorsShadow) {
  keeper->declare({"reported/fw", "reported/temp"});
  keeper->wait_until_built();
  for (const char* filter : {R"(eq(reported/fw,"2.0"))", "gt(reported/temp,40)"}) {
    const std::vector<std::string> all = find(filter, true);
    std::vector<std::string> paged;
    std::optional<ds::ShadowKey> after;
    for (;;) {
      std::vector<std::string> page = find(filter, true, after, 200000, 4);
      if (page.empty()) break;
      paged.insert(paged.end(), page.begin(), page.end());
      const std::size_t bar = page.back().find('|');
      after = ds::ShadowKey{page.back().substr(0, bar), page.back().substr(bar + 1)};
    }
    EXPECT_EQ(paged, all) << filter;
  }
}

// More matches than one store call returns (1,000 index entries: search.cpp's kHitPage).
TEST_P(Planner, ReadsEqualitiesAndRangesLongerThanOneStoreCall) {
  constexpr std::size_t kMany = 1100;
  for (std::size_t i = 0; i < kMany; ++i) report("many-" + std::to_string(i), R"({"fw":"9.9","temp":1000})");
  keeper->declare({"reported/fw", "reported/temp"});
  keeper->wait_until_built();
  for (const char* filter : {R"(eq(reported/fw,"9.9"))", "ge(reported/temp,1000)", R"(like(reported/fw,"9*"))"}) {
    const std::vector<std::string> expected = scanned(filter);
    ASSERT_EQ(expected.size(), kMany);
    EXPECT_EQ(find(filter, true), expected) << filter;
    EXPECT_EQ(count(filter, true), kMany) << filter;
  }
}

// A sorted search lists each matching shadow that holds the field once, at its least value
// (greatest when descending), ties by thing and name, then those holding none by thing and name;
// pages resume at the position given.
TEST_P(Planner, SortsByADeclaredField) {
  report("plant-1/s1", R"({"temp":[49,-1]})");  // listed at -1 ascending, at 49 descending
  report("plant-2/s2", R"({"temp":"warm"})");   // strings after numbers
  report("plant-2/x", R"({"fw":"3.0"})");       // no temp: listed last either way
  report("plant-0/x", R"({"fw":"3.0"})");
  report("plant-1/x", R"({"temp":{"c":20}})");  // an object: no value
  keeper->declare({"reported/temp"});
  keeper->wait_until_built();
  const q::Filter f = q::Filter::parse(R"(like(thing,"plant-*"))", 0);
  const q::Property temp = q::parse_index_field("reported/temp");
  for (bool descending : {false, true}) {
    // Expected: every match holding a value, by its first value in this order, then thing, name;
    // then those holding none, by thing and name.
    std::vector<std::tuple<ds::IndexValue, std::string, std::string>> expected, none;
    q::scan(counter, keys, {f, {}, std::nullopt, false}, {}, [&](const q::Subject& s) {
      const std::vector<ds::IndexValue> v = q::index_values(s, temp);
      (v.front().type == T::absent ? none : expected).emplace_back(descending ? v.back() : v.front(), s.key().thing, s.key().name);
      return true;
    });
    ASSERT_EQ(none.size(), 3u);
    std::sort(expected.begin(), expected.end());
    if (descending) std::reverse(expected.begin(), expected.end());
    std::sort(none.begin(), none.end());
    expected.insert(expected.end(), none.begin(), none.end());
    std::vector<std::tuple<ds::IndexValue, std::string, std::string>> listed;
    std::optional<q::SortPosition> after;
    for (bool more = true; more;) {
      std::size_t page = 0;
      more = false;
      q::sorted_scan(counter, keys, {f, {}, std::nullopt, false}, {"reported/temp", descending}, after, {},
                     [&](const q::Subject& s, const ds::IndexValue& v) {
                       listed.emplace_back(v, s.key().thing, s.key().name);
                       after = q::SortPosition{v, s.key()};
                       return more = ++page < 7;
                     });
      more = page == 7;
    }
    ASSERT_EQ(listed.size(), expected.size());
    EXPECT_TRUE(listed == expected) << descending;
    EXPECT_EQ(std::get<1>(listed.front()), descending ? "plant-2/s2" : "plant-1/s1");
  }
  // A comparison on the sort field that every match passes matches no shadow lacking the field:
  // their entries are not read.
  auto examined = [&](std::string_view filter) {
    return q::sorted_scan(counter, keys, {q::Filter::parse(filter, 0), {}, std::nullopt, false}, {"reported/temp", true},
                          std::nullopt, {}, [](const q::Subject&, const ds::IndexValue&) { return true; });
  };
  const std::size_t entries = entries_of(*store, "reported/temp").size();
  EXPECT_EQ(examined(R"(like(thing,"plant-*"))"), entries);
  EXPECT_EQ(examined(R"(and(like(thing,"plant-*"),ge(reported/temp,-100)))"), entries - 4);  // nor "warm"'s
  EXPECT_EQ(examined(R"(or(eq(reported/temp,1),gt(reported/temp,40)))"), entries - 3);
  EXPECT_EQ(examined(R"(not(eq(reported/temp,1)))"), entries);  // not matches a missing value
}

// A comparison on the sort field that every match passes bounds the walk to its ranges, and a
// shadow holding several values is listed at its first value within them.
TEST_P(Planner, AComparisonOnTheSortFieldBoundsTheWalk) {
  report("plant-1/s1", R"({"temp":[49,-1]})");
  keeper->declare({"reported/temp"});
  keeper->wait_until_built();
  using Listed = std::vector<std::pair<std::string, std::string>>;  // thing, value
  auto sorted = [&](std::string_view filter, bool descending, std::size_t budget, std::size_t page_size) {
    Listed out;
    std::optional<q::SortPosition> after;
    counter.read_keys = 0;
    for (bool more = true; more;) {
      std::size_t page = 0;
      q::sorted_scan(counter, keys, {q::Filter::parse(filter, 0), {}, std::nullopt, false}, {"reported/temp", descending},
                     after, {.budget = budget}, [&](const q::Subject& s, const ds::IndexValue& v) {
                       out.emplace_back(s.key().thing, v.real ? std::to_string(v.number) : std::to_string(v.integer));
                       after = q::SortPosition{v, s.key()};
                       return ++page < page_size;
                     });
      more = page == page_size;
    }
    return out;
  };
  // temp 48: s48, s98, …, s298 (6); 49: s49, …, s299 (6) and s1, whose -1 lies outside.
  const Listed up = sorted("gt(reported/temp,47)", false, 13, SIZE_MAX);
  ASSERT_EQ(up.size(), 13u);
  EXPECT_EQ(counter.read_keys, 13u);  // the range's entries alone: a budget of 13 holds it
  EXPECT_EQ(std::count_if(up.begin(), up.begin() + 6, [](const auto& l) { return l.second == "48"; }), 6);
  EXPECT_NE(std::find(up.begin() + 6, up.end(), std::pair<std::string, std::string>{"plant-1/s1", "49"}), up.end());
  Listed down = sorted("gt(reported/temp,47)", true, 13, SIZE_MAX);
  std::reverse(down.begin(), down.end());
  EXPECT_EQ(down, up);
  EXPECT_EQ(sorted("gt(reported/temp,47)", false, 13, 4), up);  // pages of 4 resume where they stopped
  EXPECT_EQ(sorted("and(lt(reported/temp,2),gt(reported/temp,-5))", false, 200000, SIZE_MAX).front(),
            (std::pair<std::string, std::string>{"plant-1/s1", "-1"}));  // the first comparison bounds it
}

// A sorted search reads and counts only the shadows of things it may match: a token limited to
// some things cannot learn from a refusal how many others sort before its own, and a filter
// naming things is not refused for the rest of the fleet.
TEST_P(Planner, ASortedSearchCountsOnlyTheThingsItMayMatch) {
  keeper->declare({"reported/temp"});
  keeper->wait_until_built();
  auto sorted = [&](std::string_view filter, std::span<const ds::ThingPattern> scope, std::size_t budget) {
    std::vector<std::string> out;
    counter.read_keys = 0;
    q::sorted_scan(counter, keys, {q::Filter::parse(filter, 0), scope, std::nullopt, false}, {"reported/temp", false},
                   std::nullopt, {.budget = budget}, [&](const q::Subject& s, const ds::IndexValue&) {
                     out.push_back(s.key().thing + "|" + s.key().name);
                     return true;
                   });
    return out;
  };
  const std::vector<ds::ThingPattern> scope{{"plant-1/", true}};
  const std::vector<std::string> everything = sorted("gt(reported/temp,-1)", {}, 200000);
  std::vector<std::string> own;
  std::copy_if(everything.begin(), everything.end(), std::back_inserter(own),
               [](const std::string& k) { return k.starts_with("plant-1/"); });
  ASSERT_EQ(own.size(), 100u);
  EXPECT_EQ(sorted("gt(reported/temp,-1)", scope, 100), own);  // 200 entries of other things sort among them
  EXPECT_EQ(counter.read_keys, 100u);
  EXPECT_THROW(sorted("gt(reported/temp,-1)", scope, 99), ds::Error);  // its own are over a budget of 99
  EXPECT_EQ(sorted(R"(eq(thing,"plant-2/s5"))", {}, 1), std::vector<std::string>{"plant-2/s5|main"});
  EXPECT_EQ(counter.read_keys, 1u);
  EXPECT_TRUE(sorted(R"(eq(thing,"plant-2/s5"))", scope, 1).empty());
  EXPECT_EQ(counter.read_keys, 0u);
}

TEST_P(Planner, ABudgetRefusesAnUndeclaredFieldAndNamesIt) {
  try {
    find("eq(reported/temp,7)", true, std::nullopt, 50);
    FAIL();
  } catch (const ds::Error& e) {
    EXPECT_EQ(e.code(), ds::ErrorCode::query_too_expensive);
    EXPECT_NE(std::string(e.what()).find("declare an index on reported/temp"), std::string::npos) << e.what();
  }
  keeper->declare({"reported/temp"});
  keeper->wait_until_built();
  EXPECT_EQ(find("eq(reported/temp,7)", true, std::nullopt, 50).size(), 6u);
  // A comparison selecting more than the budget is refused as well.
  EXPECT_THROW(find("ge(reported/temp,0)", true, std::nullopt, 50), ds::Error);
  // An `or` names its member that has no index, not the first one.
  try {
    find("or(eq(reported/temp,7),eq(reported/flag,true))", true, std::nullopt, 50);
    FAIL();
  } catch (const ds::Error& e) {
    EXPECT_EQ(e.code(), ds::ErrorCode::query_too_expensive);
    EXPECT_NE(std::string(e.what()).find("declare an index on reported/flag"), std::string::npos) << e.what();
  }
}

// A quoted RFC 3339 time compares with a string bytewise, with a time (_modified, @ts) as a
// time: the index, which enters such a string as a time too, selects as the scan does.
TEST_P(Planner, AQuotedTimeSelectsWithTheIndexWhatTheScanFinds) {
  report("plant-0/offset", R"({"at":"2026-01-05T01:00:00+02:00"})");  // 2026-01-04T23:00:00Z
  keeper->declare({"reported/at", "_modified"});
  keeper->wait_until_built();
  for (const char* filter : {R"(lt(reported/at,"2026-01-04T23:30:00Z"))", R"(eq(reported/at,"2026-01-04T23:00:00Z"))",
                             R"(ge(reported/at,"2026-01-05T01:00:00+02:00"))", "lt(reported/at,time:now)",
                             R"(lt(_modified,"2100-01-01T00:00:00Z"))", R"(gt(_modified,"2100-01-01T00:00:00+01:00"))"}) {
    const std::vector<std::string> expected = scanned(filter);
    EXPECT_EQ(find(filter, true), expected) << filter;
    EXPECT_EQ(count(filter, true), expected.size()) << filter;
  }
  EXPECT_EQ(count(R"(eq(reported/at,"2026-01-04T23:00:00Z"))", true), 0u);  // bytewise: another string
  EXPECT_EQ(count("lt(reported/at,time:now)", true), 301u);  // as a time: every one
}

// Whole numbers past int64 are entered as the doubles they round to, which several share: ranges
// near them take in what rounds alike and test it, and are not counted from the index alone.
TEST_P(Planner, NumbersPastInt64SelectWhatTheScanFinds) {
  report("big/a", R"({"big":18446744073709551614})");
  report("big/b", R"({"big":18446744073709551615})");
  report("big/c", R"({"big":9223372036854775809})");
  report("big/d", R"({"big":1.8446744073709552e19})");
  keeper->declare({"reported/big"});
  keeper->wait_until_built();
  for (const char* filter : {"eq(reported/big,18446744073709551615)", "gt(reported/big,18446744073709551614)",
                             "ge(reported/big,18446744073709551615)", "lt(reported/big,18446744073709551615)",
                             "gt(reported/big,9223372036854775808)", "le(reported/big,9223372036854775808)",
                             "in(reported/big,9223372036854775809,18446744073709551614)", "gt(reported/big,1e19)",
                             "eq(reported/big,1.8446744073709552e19)"}) {
    const std::vector<std::string> expected = scanned(filter);
    EXPECT_EQ(find(filter, true), expected) << filter;
    EXPECT_EQ(count(filter, true), expected.size()) << filter;
  }
  EXPECT_EQ(count("gt(reported/big,18446744073709551614)", true), 2u);  // b, and d (2^64)
}

// The budget holds a query nothing narrows; one narrowed by an index or by things reads what it
// selects, however many.
TEST_P(Planner, ANarrowedQueryReadsWhatItSelectsWhateverTheBudget) {
  keeper->declare({"reported/fw"});
  keeper->wait_until_built();
  EXPECT_EQ(find(R"(eq(reported/fw,"2.0"))", true, std::nullopt, 5, 2).size(), 2u);
  EXPECT_EQ(find(R"(eq(reported/fw,"2.0"))", true, std::nullopt, 5).size(), 30u);
  EXPECT_EQ(count(R"(and(eq(reported/fw,"2.0"),eq(reported/flag,false)))", true, {}, 5), 30u);
  EXPECT_EQ(count(R"(like(thing,"plant-1/*"))", false, {}, 5), 100u);
  EXPECT_EQ(find(R"(and(like(thing,"plant-1/*"),eq(reported/temp,7)))", false, std::nullopt, 5).size(), 2u);
  EXPECT_THROW(find("eq(reported/temp,7)", false, std::nullopt, 5), ds::Error);
  EXPECT_THROW(count("eq(reported/temp,7)", false, {}, 5), ds::Error);
  EXPECT_THROW(find(R"(and(ge(thing,""),eq(reported/temp,7)))", false, std::nullopt, 5), ds::Error);  // bounds nothing
  // An aggregate keeps what it reads: the budget holds it however it is narrowed.
  const q::Filter f = q::Filter::parse(R"(eq(reported/fw,"2.0"))", 0);
  EXPECT_THROW(q::scan(counter, keys, {f, {}, std::nullopt, false}, {.budget = 5, .budget_always = true, .indexes = keeper.get()},
                       [](const q::Subject&) { return true; }),
               ds::Error);
}

// gt, ge, lt and le on thing read only the things in their range, pages included.
TEST_P(Planner, AThingRangeReadsOnlyItsThings) {
  auto expected = [&](auto in_range) {
    std::vector<std::string> out;
    for (const std::string& k : find(R"(like(thing,"*"))", false)) {
      if (in_range(k.substr(0, k.find('|')))) out.push_back(k);
    }
    return out;
  };
  const auto plant_1 = expected([](const std::string& t) { return t >= "plant-1/" && t < "plant-2"; });
  ASSERT_EQ(plant_1.size(), 100u);
  EXPECT_EQ(find(R"(and(ge(thing,"plant-1/"),lt(thing,"plant-2")))", false, std::nullopt, 5), plant_1);
  EXPECT_EQ(counter.read_keys, 100u);
  const auto upto = expected([](const std::string& t) { return t <= "plant-0/s2"; });
  EXPECT_EQ(find(R"(le(thing,"plant-0/s2"))", false, std::nullopt, 5), upto);
  EXPECT_EQ(counter.read_keys, upto.size());
  const auto after = expected([](const std::string& t) { return t > "plant-2/s50"; });
  EXPECT_EQ(find(R"(gt(thing,"plant-2/s50"))", false, std::nullopt, 5), after);
  EXPECT_EQ(counter.read_keys, after.size());
  EXPECT_EQ(count(R"(and(gt(thing,"plant-1/s1"),le(thing,"plant-1/s4"),like(thing,"plant-1/*")))", false, {}, 5),
            expected([](const std::string& t) { return t > "plant-1/s1" && t <= "plant-1/s4"; }).size());
  std::vector<std::string> paged;
  std::optional<ds::ShadowKey> cursor;
  for (;;) {
    std::vector<std::string> page = find(R"(and(ge(thing,"plant-1/"),lt(thing,"plant-2")))", false, cursor, 5, 7);
    if (page.empty()) break;
    paged.insert(paged.end(), page.begin(), page.end());
    const std::size_t bar = page.back().find('|');
    cursor = ds::ShadowKey{page.back().substr(0, bar), page.back().substr(bar + 1)};
  }
  EXPECT_EQ(paged, plant_1);
}

// A comparison on one value reads its entries only within the things the filter allows (one
// value's entries are in thing order); a range of values is read by things when they are fewer
// than its entries.
TEST_P(Planner, AThingRangeAndAnIndexReadOnlyWhatBothSelect) {
  keeper->declare({"reported/fw", "reported/temp"});
  keeper->wait_until_built();
  // Each filter with the index entries read and the shadows read. The entries of one value are
  // read from the first in the filter's things to their last (IndexRange::end), no further; fw =
  // 2.0 selects 30 shadows, 10 of them in plant-1, 10 in plant-2. A range of temp is read by
  // things when they are fewer than its entries.
  struct Case {
    const char* filter;
    std::size_t entries, shadows;
  };
  for (const Case& c : std::vector<Case>{
           {R"(and(like(thing,"plant-1/*"),eq(reported/fw,"2.0")))", 10, 10},
           {R"(and(like(thing,"plant-1/*"),eq(reported/temp,7)))", 2, 2},
           {R"(and(like(thing,"plant-1/*"),in(reported/temp,7,8)))", 4, 4},
           {R"(and(like(thing,"plant-1/*"),or(eq(reported/temp,7),eq(reported/fw,"2.0"))))", 12, 12},
           {R"(and(ge(thing,"plant-1/s5"),lt(thing,"plant-2"),eq(reported/fw,"2.0")))", 1, 1},  // s70
           {R"(and(ge(thing,"plant-1/s5"),le(thing,"plant-1/s70"),eq(reported/fw,"2.0")))", 1, 1},
           {R"(and(eq(thing,"plant-1/s70"),eq(reported/fw,"2.0")))", 0, 1},  // named: read by things
           {R"(and(gt(thing,"plant-2/s50"),eq(reported/fw,"2.0")))", 2, 1},  // s50 (left out), s80
           // A bound holding a control character (no thing does) gives no end: read until past it.
           {R"(and(ge(thing,"plant-1/s5"),le(thing,"plant-1/s70\u0001"),eq(reported/fw,"2.0")))", 10, 1},
           {R"(and(like(thing,"plant-1/s1*"),gt(reported/temp,10)))", 0, 39},  // 39 things, 234 entries
           {R"(and(like(thing,"plant-1/*"),gt(reported/temp,47)))", 12, 4},     // 100 things, 12 entries
       }) {
    const std::vector<std::string> expected = scanned(c.filter);
    EXPECT_EQ(find(c.filter, true), expected) << c.filter;
    EXPECT_EQ(counter.index_entries, c.entries) << c.filter;
    EXPECT_EQ(counter.read_keys, c.shadows) << c.filter;
    EXPECT_EQ(count(c.filter, true), expected.size()) << c.filter;
  }
  // Pages resume within the range and read nothing before the cursor.
  const char* filter = R"(and(like(thing,"plant-1/*"),eq(reported/fw,"1.0")))";
  const std::vector<std::string> all = scanned(filter);
  ASSERT_EQ(all.size(), 90u);
  std::vector<std::string> paged;
  std::optional<ds::ShadowKey> cursor;
  for (;;) {
    std::vector<std::string> page = find(filter, true, cursor, 200000, 7);
    if (page.empty()) break;
    EXPECT_LE(counter.index_entries, 90 - paged.size());  // fw = 1.0 in plant-1 from the cursor on
    paged.insert(paged.end(), page.begin(), page.end());
    const std::size_t bar = page.back().find('|');
    cursor = ds::ShadowKey{page.back().substr(0, bar), page.back().substr(bar + 1)};
  }
  EXPECT_EQ(paged, all);
  // A token's things narrow the index as the filter's do.
  const std::vector<ds::ThingPattern> scope{{"plant-1/", true}};
  EXPECT_EQ(count(R"(eq(reported/fw,"2.0"))", true, scope), 10u);
  EXPECT_EQ(counter.index_entries, 10u);  // plant-1's, as above
}

// A declared `name` selects shadows by name across things: entries come when a shadow comes to
// exist and go when it is deleted, and other writes leave them be.
TEST_P(Planner, ADeclaredNameReadsOnlyTheShadowsItNames) {
  auto named = [&](const std::string& thing, const std::string& name, std::string_view state) {
    ds::UpdateRequest r;
    r.key = {thing, name};
    r.section = ds::Section::reported;
    r.state = ds::parse_json(state).as_object();
    engine.update(r);
  };
  for (int i = 0; i < 30; i += 3) named("plant-" + std::to_string(i % 3) + "/s" + std::to_string(i), "battery", R"({"v":1})");
  named("plant-1/s1", "battery-2", R"({"v":2})");
  named("plant-2/s2", "bat", R"({"v":3})");
  keeper->declare({"name"});
  keeper->wait_until_built();
  named("plant-2/s5", "battery", R"({"v":4})");  // written after the build: indexed by the write
  engine.remove({"plant-0/s3", "battery"});
  named("plant-0/s6", "battery", R"({"v":5})");  // an update: the entry stays as it was
  // Each filter with the number of shadows its comparison on name selects (what is read).
  for (const auto& [filter, selected] : std::vector<std::pair<const char*, std::size_t>>{
           {R"(eq(name,"battery"))", 10}, {R"(like(name,"batt*"))", 11}, {R"(in(name,"bat","battery-2"))", 2},
           {R"(and(gt(name,"bat"),lt(name,"battery-3")))", 12}, {R"(and(eq(name,"battery"),eq(reported/v,1)))", 10},
           {R"(or(eq(name,"bat"),eq(name,"nothing")))", 1}}) {
    const std::vector<std::string> expected = scanned(filter);
    EXPECT_EQ(find(filter, true, std::nullopt, 20), expected) << filter;  // a scan would read 300 and more
    EXPECT_EQ(counter.read_keys, selected) << filter;
    EXPECT_EQ(count(filter, true, {}, 20), expected.size()) << filter;
  }
  EXPECT_EQ(find(R"(eq(name,"battery"))", false).size(), 10u);  // 10 built, one deleted, one written since
  EXPECT_EQ(count(R"(eq(name,"battery"))", true), 10u);
  EXPECT_EQ(counter.read_keys, 0u);  // counted from the index alone
  EXPECT_EQ(entries_of(*store, "name"), rebuilt(*store, "name", keys));
  try {  // undeclared, a comparison on name names the index that would serve it
    keeper->declare({});
    find(R"(eq(name,"battery"))", true, std::nullopt, 20);
    FAIL();
  } catch (const ds::Error& e) {
    EXPECT_EQ(e.code(), ds::ErrorCode::query_too_expensive);
    EXPECT_NE(std::string(e.what()).find("declare an index on name"), std::string::npos) << e.what();
  }
}

TEST_P(Planner, CountsWithinTheTokensThings) {
  keeper->declare({"reported/fw"});
  keeper->wait_until_built();
  const std::vector<ds::ThingPattern> scope{{"plant-1/", true}};
  EXPECT_EQ(count(R"(eq(reported/fw,"2.0"))", true, scope), 10u);
  EXPECT_EQ(count(R"(eq(reported/fw,"2.0"))", false, scope), 10u);
}

INSTANTIATE_TEST_SUITE_P(Stores, Planner, ::testing::Values("memory", "sqlite", "dynamodb"));

INSTANTIATE_TEST_SUITE_P(Stores, Indexes, ::testing::Values("memory", "sqlite", "dynamodb", "dynamodb_combined"));

INSTANTIATE_TEST_SUITE_P(Stores, SharedIndexes, ::testing::Values("dynamodb", "dynamodb_combined"));

// A store that keeps no indexes (DynamoDB today) refuses a declaration and declares none.
class WithoutIndexes : public ForwardingStore {
 public:
  using ForwardingStore::ForwardingStore;
  ds::IndexDeclaration index_fields() override { return Store::index_fields(); }
  std::uint64_t put_index_fields(std::span<const ds::IndexFieldState> fields, std::uint64_t generation) override {
    return Store::put_index_fields(fields, generation);
  }
};

TEST(IndexesUnavailable, ADeclarationIsRefusedClearly) {
  auto backend = ds::make_memory_store();
  WithoutIndexes store(*backend);
  q::IndexKeeper keeper(store, {});
  try {
    keeper.declare({"reported/a"});
    FAIL();
  } catch (const ds::Error& e) {
    EXPECT_EQ(e.code(), ds::ErrorCode::invalid_request);
    EXPECT_NE(std::string(e.what()).find("keeps no declared indexes"), std::string::npos);
  }
  EXPECT_TRUE(keeper.status().empty());
}

}  // namespace
