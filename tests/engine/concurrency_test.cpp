// Many writers, no lost update; conflicts between processes are retried (docs/semantics.md,
// "Versions and concurrency").
#include "deviceshadow/error.hpp"
#include "support/engine_fixture.hpp"
#include "support/forwarding_store.hpp"
#include "support/sanitized.hpp"

#include <thread>

namespace {

constexpr int kThreads = 16;
constexpr int kReportsPerThread = 100;

// 16 threads x `per_thread` reports, each with a key of its own, spread over `shadows` shadows.
void hammer(ds::Engine& engine, int shadows, int per_thread = kReportsPerThread) {
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&engine, t, shadows, per_thread] {
      for (int i = 0; i < per_thread; ++i) {
        int n = t * per_thread + i;
        ds::UpdateRequest r;
        r.key = {"thing-" + std::to_string(n % shadows), "main"};
        r.state["k" + std::to_string(n)] = n;
        ASSERT_TRUE(engine.update(r).changed);
      }
    });
  }
  for (auto& t : threads) t.join();
}

using Concurrency = EngineTest;

// One shadow's document grows with every report, so the rounds cost their square: a quarter of
// them under a sanitizer.
TEST_P(Concurrency, SixteenWritersOnOneShadowLoseNothing) {
  constexpr int kPerThread = scaled_for_sanitizers(kReportsPerThread);
  hammer(engine(), 1, kPerThread);
  ds::ShadowView view = engine().get({"thing-0", "main"});
  constexpr int kTotal = kThreads * kPerThread;
  EXPECT_EQ(view.record.reported.version, static_cast<std::uint64_t>(kTotal));
  boost::json::object state = ds::parse_json(view.record.reported.state_json).as_object();
  for (int n = 0; n < kTotal; ++n) ASSERT_TRUE(state.contains("k" + std::to_string(n))) << n;
  ds::HistoryRequest all;
  all.limit = 1000;
  std::size_t events = 0;
  for (;;) {
    ds::HistoryPage page = engine().history({"thing-0", "main"}, all);
    events += page.events.size();
    if (page.cursor.empty()) break;
    all.cursor = page.cursor;
  }
  EXPECT_EQ(events, static_cast<std::size_t>(kTotal));
}

TEST_P(Concurrency, SixteenWritersOnAThousandShadowsLoseNothing) {
  hammer(engine(), 1000);
  std::vector<ds::ShadowKey> keys;
  for (int s = 0; s < 1000; ++s) keys.push_back({"thing-" + std::to_string(s), "main"});
  std::vector<ds::ShadowRecord> records = store().read(keys);
  std::uint64_t versions = 0;
  for (int s = 0; s < 1000; ++s) {
    boost::json::object state = ds::parse_json(records[s].reported.state_json).as_object();
    for (int n = s; n < kThreads * kReportsPerThread; n += 1000) ASSERT_TRUE(state.contains("k" + std::to_string(n)));
    versions += records[s].reported.version;
    EXPECT_EQ(engine().history(keys[s]).events.size(), records[s].reported.version);
  }
  EXPECT_EQ(versions, static_cast<std::uint64_t>(kThreads * kReportsPerThread));
}

INSTANTIATE_TEST_SUITE_P(Stores, Concurrency, ::testing::ValuesIn(all_store_kinds()), store_kind_name);

// A store that makes the first `failures` writes lose a race, as another process would.
class ConflictingStore final : public ForwardingStore {
 public:
  ConflictingStore(ds::Store& inner, int failures) : ForwardingStore(inner), failures_(failures) {}
  void write(const ds::ShadowWrite& w) override {
    ++attempts;
    if (failures_-- > 0) throw ds::Error::version_conflict(99);
    inner_.write(w);
  }

  int attempts = 0;

 private:
  int failures_;
};

ds::UpdateRequest simple_report() {
  ds::UpdateRequest r;
  r.key = {"t", "main"};
  r.state["a"] = 1;
  return r;
}

TEST(Retries, UnpinnedWritesRetryConflictsUpToTheLimit) {
  auto memory = ds::make_memory_store();
  ds::EngineOptions o;
  o.backoff_base = std::chrono::microseconds(10);
  ConflictingStore seven(*memory, 7);
  ds::Engine engine(seven, o);
  EXPECT_TRUE(engine.update(simple_report()).changed);
  EXPECT_EQ(seven.attempts, 8);

  auto other = ds::make_memory_store();
  ConflictingStore eight(*other, 8);
  ds::Engine failing(eight, o);
  try {
    failing.update(simple_report());
    FAIL() << "expected a conflict after 8 attempts";
  } catch (const ds::Error& e) {
    EXPECT_EQ(e.code(), ds::ErrorCode::version_conflict);
  }
  EXPECT_EQ(eight.attempts, 8);
}

// A store's conflict may come from the section a write does not store: a pinned write is
// decided again on a fresh read, and refused, without writing, once its pin no longer holds.
TEST(Retries, PinnedWritesRetryOnlyWhileThePinHolds) {
  auto memory = ds::make_memory_store();
  ConflictingStore once(*memory, 1);
  ds::EngineOptions o;
  o.backoff_base = std::chrono::microseconds(10);
  ds::Engine engine(once, o);
  ds::UpdateRequest r = simple_report();
  r.version = 0;
  EXPECT_EQ(engine.update(r).shadow.record.reported.version, 1u);
  EXPECT_EQ(once.attempts, 2);
  try {
    engine.update(r);  // the pin (0) is stale: refused at once, nothing written
    FAIL() << "a stale pin was accepted";
  } catch (const ds::Error& e) {
    EXPECT_EQ(e.code(), ds::ErrorCode::version_conflict);
    EXPECT_EQ(e.details().current_version, 1u);
  }
  EXPECT_EQ(once.attempts, 2);
}

}  // namespace
