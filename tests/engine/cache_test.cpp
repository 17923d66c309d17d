// The engine's read cache: steady-state writes cost one store request, and a stale cache
// (another process wrote meanwhile) never loses or misjudges a write.
#include "support/engine_fixture.hpp"
#include "support/forwarding_store.hpp"

namespace {

namespace json = boost::json;

// Counts the store requests an engine makes.
class CountingStore final : public ForwardingStore {
 public:
  using ForwardingStore::ForwardingStore;
  std::vector<ds::ShadowRecord> read(std::span<const ds::ShadowKey> keys) override {
    ++reads;
    return inner_.read(keys);
  }
  void write(const ds::ShadowWrite& w) override {
    ++writes;
    inner_.write(w);
  }

  int reads = 0;
  int writes = 0;
};

class ReadCache : public EngineTest {
 protected:
  // A second engine on the same store: another process, with a cache of its own.
  std::unique_ptr<ds::Engine> other() {
    ds::EngineOptions o;
    o.clock = [this] { return clock_.load(); };
    return std::make_unique<ds::Engine>(store(), o);
  }
};

TEST_P(ReadCache, ASteadyStateReportCostsOneStoreRequest) {
  CountingStore counting(store());
  ds::Engine engine(counting);
  ds::UpdateRequest r = request("t", ds::Section::reported, R"({"n":0})");
  engine.update(r);
  EXPECT_EQ(counting.reads, 1);
  EXPECT_EQ(counting.writes, 1);
  for (int i = 1; i <= 10; ++i) {
    r.state = ds::parse_json("{\"n\":" + std::to_string(i) + "}").as_object();
    engine.update(r);
  }
  EXPECT_EQ(counting.reads, 1);
  EXPECT_EQ(counting.writes, 11);
  engine.update(r);  // no change: confirmed on a fresh read, nothing written
  EXPECT_EQ(counting.reads, 2);
  EXPECT_EQ(counting.writes, 11);
}

TEST_P(ReadCache, AStaleCacheStillAcknowledgesDesiredFromAnotherProcess) {
  report("t", R"({"a":1})");  // cached here
  other()->update(request("t", ds::Section::desired, R"({"sp":22})"));
  ds::UpdateResult r = report("t", R"({"sp":22})");
  ASSERT_EQ(r.acknowledged.size(), 1u);
  EXPECT_EQ(store().read({"t", "main"}).desired.state_json, "{}");
  EXPECT_EQ(ds::to_json(r.shadow.delta), "{}");
}

TEST_P(ReadCache, AStaleCacheNeverTurnsAWriteIntoANoOp) {
  report("t", R"({"x":1})");  // cached here
  other()->update(request("t", ds::Section::reported, R"({"x":2})"));
  EXPECT_TRUE(report("t", R"({"x":1})").changed);
  EXPECT_EQ(store().read({"t", "main"}).reported.state_json, R"({"x":1})");
}

TEST_P(ReadCache, AStaleCacheDoesNotRejectACorrectlyPinnedVersion) {
  report("t", R"({"x":1})");  // cached at version 1
  ds::UpdateResult by_other = other()->update(request("t", ds::Section::reported, R"({"x":2})"));
  ds::UpdateRequest pinned = request("t", ds::Section::reported, R"({"x":3})");
  pinned.version = by_other.shadow.record.reported.version;
  EXPECT_EQ(engine().update(pinned).shadow.record.reported.version, pinned.version.value() + 1);
  pinned.version = 1;  // really stale now
  EXPECT_EQ(error_of([&] { engine().update(pinned); }), "version_conflict");
}

TEST_P(ReadCache, TimestampsAreJudgedAgainstTheStoredValue) {
  report("t", R"({"s":{"v":1,"ts":100}})");  // cached here
  other()->update(request("t", ds::Section::reported, R"({"s":{"v":2,"ts":300}})"));
  ds::UpdateResult r = report("t", R"({"s":{"v":3,"ts":200}})");
  EXPECT_FALSE(r.changed);  // older than what the other process stored
  EXPECT_EQ(r.stale, std::vector<std::string>{"/s"});
  EXPECT_EQ(store().read({"t", "main"}).reported.state_json, R"({"s":{"v":2,"ts":300}})");
}

INSTANTIATE_TEST_SUITE_P(Stores, ReadCache, ::testing::ValuesIn(all_store_kinds()), store_kind_name);

}  // namespace
