// The dispatcher on the stores with an outbox (memory, SQLite), with a scripted target that
// records what it is given and fails as a test tells it to (the webhook target is tested
// against real receivers in webhook_test.cpp and tests/e2e/test_notify.py).
#include "deviceshadow/error.hpp"
#include "deviceshadow/json.hpp"
#include "deviceshadow/memory_store.hpp"
#include "deviceshadow/sqlite_store.hpp"
#include "notify/dispatcher.hpp"
#include "notify/stream/stream_feed.hpp"
#include "support/forwarding_store.hpp"
#include "support/stream_records.hpp"

#include <gtest/gtest.h>
#include <sqlite3.h>

#include <atomic>
#include <cerrno>
#include <filesystem>
#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <system_error>
#include <thread>
#include <utility>

namespace ds = deviceshadow;
namespace notify = deviceshadow::notify;
using Outcome = notify::DeliveryResult::Outcome;

namespace {

// What every target built by a ScriptedTargets has delivered, and how it should answer.
class ScriptedTargets {
 public:
  // Decides the outcome of one attempt: (registration, thing, attempt number of this event).
  using Script = std::function<Outcome(const std::string&, const std::string&, int)>;
  void set_script(Script script) {
    std::lock_guard lock(mutex_);
    script_ = std::move(script);
  }
  // Targets report outcomes only when woken (as when their worker stops), not as they come.
  void report_only_when_woken() { report_only_when_woken_ = true; }
  // The largest event the targets take; a larger one is handed back to be built again, as a
  // queue whose limit a target learns does.
  void set_max_event_bytes(std::size_t bytes) { max_event_bytes_ = bytes; }

  notify::TargetFactory factory() {
    return [this](const notify::Registration& r) -> std::unique_ptr<notify::Target> {
      // Other types are refused, as by a factory that cannot deliver to them.
      if (!std::holds_alternative<notify::WebhookTarget>(r.target)) {
        throw ds::Error::invalid_request("target.type: only webhooks here", "target.type");
      }
      return std::make_unique<Scripted>(*this, r.id);
    };
  }

  // Delivered CloudEvents of a registration, parsed, in delivery order.
  std::vector<ds::json::value> delivered(const std::string& registration) {
    std::lock_guard lock(mutex_);
    return delivered_[registration];
  }
  int attempts(const std::string& event_id) {
    std::lock_guard lock(mutex_);
    return attempts_[event_id];
  }

 private:
  // Decides each outcome when the delivery starts and reports it on the next run().
  class Scripted final : public notify::Target {
   public:
    Scripted(ScriptedTargets& owner, std::string id) : owner_(owner), id_(std::move(id)) {}
    std::size_t max_event_bytes() const override { return owner_.max_event_bytes_; }
    void start(std::uint64_t tag, const notify::Delivery& d) override {
      int attempt;
      Script script;
      {
        std::lock_guard lock(owner_.mutex_);
        attempt = ++owner_.attempts_[std::string(d.id)];
        script = owner_.script_;
      }
      Outcome outcome = d.body.size() > max_event_bytes() ? Outcome::rebuild : script(id_, std::string(d.thing), attempt);
      if (outcome == Outcome::delivered) {
        std::lock_guard lock(owner_.mutex_);
        owner_.delivered_[id_].push_back(ds::parse_json(d.body));
      }
      std::lock_guard lock(mutex_);
      finished_.emplace_back(tag, notify::DeliveryResult{
                                      outcome, outcome == Outcome::delivered ? "" : "scripted failure " + std::to_string(attempt)});
    }
    void run(std::chrono::milliseconds timeout, const Done& done) override {
      std::vector<std::pair<std::uint64_t, notify::DeliveryResult>> finished;
      {
        std::unique_lock lock(mutex_);
        cv_.wait_for(lock, timeout, [&] { return (!finished_.empty() && !owner_.report_only_when_woken_) || woken_; });
        if (owner_.report_only_when_woken_ && !woken_) return;
        woken_ = false;
        finished.swap(finished_);
      }
      for (auto& [tag, result] : finished) done(tag, std::move(result));
    }
    void wake() override {
      {
        std::lock_guard lock(mutex_);
        woken_ = true;
      }
      cv_.notify_all();
    }

   private:
    ScriptedTargets& owner_;
    std::string id_;
    std::mutex mutex_;
    std::condition_variable cv_;
    bool woken_ = false;
    std::vector<std::pair<std::uint64_t, notify::DeliveryResult>> finished_;
  };
  std::mutex mutex_;
  std::atomic<bool> report_only_when_woken_ = false;
  std::atomic<std::size_t> max_event_bytes_ = SIZE_MAX;
  Script script_ = [](auto&, auto&, int) { return Outcome::delivered; };
  std::map<std::string, std::vector<ds::json::value>> delivered_;
  std::map<std::string, int> attempts_;
};

// Waits (10 s at most unless told: a bound on liveness, not a timing assertion) until done() holds.
bool eventually(const std::function<bool()>& done, int seconds = 10) {
  for (int i = 0; i < seconds * 200; ++i) {
    if (done()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return done();
}

notify::DispatcherOptions fast_options() {
  notify::DispatcherOptions o;
  o.concurrency = 4;
  o.retry_base = std::chrono::milliseconds(1);
  o.retry_max = std::chrono::milliseconds(4);
  o.checkpoint_interval = std::chrono::milliseconds(0);
  o.trim_interval = std::chrono::milliseconds(10);
  o.poll = std::chrono::milliseconds(20);
  return o;
}

std::string hook(const std::string& extra = "") {
  return R"({"target":{"type":"webhook","url":"http://127.0.0.1:9/"})" + extra + "}";
}

void report(ds::Engine& engine, const std::string& thing, const std::string& name, int value) {
  ds::UpdateRequest r;
  r.key = {thing, name};
  r.section = ds::Section::reported;
  r.state = ds::parse_json(R"({"v":)" + std::to_string(value) + "}").as_object();
  engine.update(r);
}

class DispatcherTest : public testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    if (GetParam() == "sqlite") {
      dir_ = std::filesystem::temp_directory_path() /
             ("dispatcher-" + std::to_string(::getpid()) + "-" + testing::UnitTest::GetInstance()->current_test_info()->name());
      std::filesystem::remove_all(dir_);
      std::filesystem::create_directories(dir_);
    }
    open();
  }
  void TearDown() override {
    dispatcher.reset();
    engine.reset();
    store.reset();
    if (!dir_.empty()) std::filesystem::remove_all(dir_);
  }
  void open() {
    if (GetParam() == "sqlite") {
      ds::SqliteOptions o;
      o.path = (dir_ / "shadows.db").string();
      o.durable = false;
      store = ds::open_sqlite_store(o);
    } else {
      store = ds::make_memory_store();
    }
    engine = std::make_unique<ds::Engine>(*store);
    dispatcher = std::make_unique<notify::Dispatcher>(*engine, *store, fast_options(), targets.factory());
  }
  // Restarts the dispatcher and engine on the same data (SQLite: reopened, as by a new process).
  void restart() {
    dispatcher.reset();
    engine.reset();
    if (GetParam() == "sqlite") store.reset();
    if (store) {
      engine = std::make_unique<ds::Engine>(*store);
      dispatcher = std::make_unique<notify::Dispatcher>(*engine, *store, fast_options(), targets.factory());
    } else {
      open();
    }
  }

  ScriptedTargets targets;
  std::unique_ptr<ds::StoreBackend> store;
  std::unique_ptr<ds::Engine> engine;
  std::unique_ptr<notify::Dispatcher> dispatcher;
  std::filesystem::path dir_;
};

std::vector<std::int64_t> versions_of(const std::vector<ds::json::value>& events, const std::string& thing) {
  std::vector<std::int64_t> out;
  for (const auto& e : events) {
    if (e.at("data").at("thing").as_string() == thing) out.push_back(e.at("data").at("reported").at("version").as_int64());
  }
  return out;
}

std::vector<std::int64_t> one_to(std::int64_t n) {
  std::vector<std::int64_t> v;
  for (std::int64_t i = 1; i <= n; ++i) v.push_back(i);
  return v;
}

TEST_P(DispatcherTest, DeliversEveryMatchingWriteInVersionOrderPerShadow) {
  dispatcher->put("all", hook());
  dispatcher->put("only-a", hook(R"(,"match":"a#.*")"));
  EXPECT_TRUE(engine->change_feed());
  for (int i = 0; i < 40; ++i) {
    report(*engine, "a", "main", i);
    report(*engine, "b", "main", i);
  }
  ASSERT_TRUE(eventually([&] { return targets.delivered("all").size() == 80 && targets.delivered("only-a").size() == 40; }));
  EXPECT_EQ(versions_of(targets.delivered("all"), "a"), one_to(40));
  EXPECT_EQ(versions_of(targets.delivered("all"), "b"), one_to(40));
  EXPECT_EQ(versions_of(targets.delivered("only-a"), "b"), std::vector<std::int64_t>{});
  const ds::json::value first = targets.delivered("only-a").front();
  EXPECT_EQ(first.at("type").as_string(), "deviceshadow.shadow.updated");
  EXPECT_EQ(first.at("subject").as_string(), "a#main");
  EXPECT_EQ(first.at("data").at("registration").as_string(), "only-a");
  // Every entry is finished, so the checkpoints reach the feed's end and the feed is trimmed.
  ASSERT_TRUE(eventually([&] { return store->read_feed(0, 10).empty(); }));
  EXPECT_EQ(store->checkpoint("all"), store->feed_end());
  EXPECT_EQ(dispatcher->status("all")->delivered, 80u);
  EXPECT_EQ(dispatcher->status("all")->pending, 0u);
}

TEST_P(DispatcherTest, RetriesInOrderAndDeadLettersAfterMaxAttempts) {
  // Shadow "bad" fails every attempt; shadow "flaky" fails twice per event, then succeeds.
  targets.set_script([](const std::string&, const std::string& thing, int attempt) {
    if (thing == "bad") return Outcome::retry;
    if (thing == "flaky") return attempt <= 2 ? Outcome::retry : Outcome::delivered;
    return Outcome::delivered;
  });
  dispatcher->put("r", hook(R"(,"maxAttempts":3)"));
  for (int i = 0; i < 5; ++i) {
    report(*engine, "bad", "main", i);
    report(*engine, "flaky", "main", i);
    report(*engine, "good", "main", i);
  }
  // The counters follow the store's writes: wait for them too.
  ASSERT_TRUE(eventually([&] {
    const auto s = *dispatcher->status("r");
    return s.dead_letters == 5 && s.dead_lettered == 5 && s.failed == 5u * 3 + 5u * 2 && targets.delivered("r").size() == 10;
  }));
  EXPECT_EQ(versions_of(targets.delivered("r"), "flaky"), one_to(5));
  EXPECT_EQ(versions_of(targets.delivered("r"), "good"), one_to(5));
  const auto status = *dispatcher->status("r");
  EXPECT_EQ(status.failed, 5u * 3 + 5u * 2);
  EXPECT_EQ(status.dead_lettered, 5u);
  EXPECT_EQ(status.last_error.value_or("").rfind("scripted failure", 0), 0u);
  std::vector<ds::DeadLetter> letters = store->dead_letters("r", "", 100);
  ASSERT_EQ(letters.size(), 5u);
  for (const auto& letter : letters) {
    EXPECT_EQ(letter.attempts, 3);
    EXPECT_EQ(letter.last_error, "scripted failure 3");
    EXPECT_EQ(ds::parse_json(letter.event).at("data").at("thing").as_string(), "bad");
  }

  // Once the target heals, a redrive delivers them and removes them.
  targets.set_script([](auto&, auto&, int) { return Outcome::delivered; });
  EXPECT_EQ(dispatcher->redrive("r", std::vector<std::string>{letters[0].event_id}), 1u);
  ASSERT_TRUE(eventually([&] { return store->dead_letters("r", "", 100).size() == 4; }));
  EXPECT_EQ(dispatcher->redrive("r", std::nullopt), 4u);
  ASSERT_TRUE(eventually([&] { return store->dead_letters("r", "", 100).empty(); }));
  EXPECT_EQ(versions_of(targets.delivered("r"), "bad").size(), 5u);
  EXPECT_TRUE(eventually([&] { return dispatcher->status("r")->dead_letters == 0; }));  // counted after the store
}

// An event the target hands back to be built again (built for a larger limit than it learnt
// since) is built and sent again without counting an attempt, even with maxAttempts 1; a
// redriven dead letter, which cannot be built again, is dead-lettered again.
TEST_P(DispatcherTest, AnEventHandedBackToBeBuiltAgainIsNotAnAttempt) {
  targets.set_script([](const std::string&, const std::string&, int attempt) {
    return attempt == 1 ? Outcome::rebuild : Outcome::delivered;
  });
  dispatcher->put("r", hook(R"(,"maxAttempts":1)"));
  for (int i = 0; i < 3; ++i) report(*engine, "t" + std::to_string(i), "main", i);
  ASSERT_TRUE(eventually([&] { return targets.delivered("r").size() == 3; }));
  const auto status = *dispatcher->status("r");
  EXPECT_EQ(status.failed, 0u);
  EXPECT_EQ(status.dead_lettered, 0u);
  EXPECT_TRUE(store->dead_letters("r", "", 100).empty());

  targets.set_script([](auto&, auto&, int) { return Outcome::reject; });
  report(*engine, "x", "main", 1);
  ASSERT_TRUE(eventually([&] { return store->dead_letters("r", "", 100).size() == 1; }));
  targets.set_script([](auto&, auto&, int) { return Outcome::rebuild; });
  EXPECT_EQ(dispatcher->redrive("r", std::nullopt), 1u);
  ASSERT_TRUE(eventually([&] { return dispatcher->status("r")->dead_lettered == 2; }));
  EXPECT_EQ(store->dead_letters("r", "", 100).size(), 1u) << "stored again, not sent forever";
}

// An event still larger than the target takes once built without old and new is refused and
// dead-lettered at once, saying why; it was handed back to be built again forever, and its
// shadow's later events waited behind it.
TEST_P(DispatcherTest, AnEventTooLargeEvenTruncatedIsDeadLetteredAndItsShadowGoesOn) {
  targets.set_max_event_bytes(1000);
  dispatcher->put("r", hook());
  ds::UpdateRequest big;
  big.key = {"x", "main"};
  big.state = ds::parse_json(R"({"blob":")" + std::string(3000, 'z') + R"("})").as_object();
  engine->update(big);
  report(*engine, "x", "main", 1);
  ASSERT_TRUE(eventually([&] { return targets.delivered("r").size() == 1; }));
  const auto letters = store->dead_letters("r", "", 10);
  ASSERT_EQ(letters.size(), 1u);
  EXPECT_EQ(letters[0].attempts, 1);
  EXPECT_NE(letters[0].last_error.find("over the target's limit of 1000 bytes"), std::string::npos) << letters[0].last_error;
  EXPECT_EQ(targets.delivered("r")[0].at("data").at("reported").at("version"), 2);
}

TEST_P(DispatcherTest, ARejectedEventIsDeadLetteredAtOnceAndCanBeDeleted) {
  targets.set_script([](auto&, const std::string& thing, int) { return thing == "x" ? Outcome::reject : Outcome::delivered; });
  dispatcher->put("r", hook());
  report(*engine, "x", "main", 1);
  report(*engine, "x", "main", 2);
  ASSERT_TRUE(eventually([&] { return store->dead_letters("r", "", 10).size() == 2; }));
  EXPECT_EQ(store->dead_letters("r", "", 10)[0].attempts, 1);
  std::string first = store->dead_letters("r", "", 10)[0].event_id;
  EXPECT_EQ(dispatcher->delete_dead_letters("r", std::vector<std::string>{first}), 1u);
  EXPECT_EQ(dispatcher->delete_dead_letters("r", std::nullopt), 1u);
  EXPECT_TRUE(store->dead_letters("r", "", 10).empty());
  EXPECT_EQ(dispatcher->status("r")->dead_letters, 0u);
  EXPECT_THROW(dispatcher->redrive("nobody", std::nullopt), ds::Error);
}

TEST_P(DispatcherTest, AStuckShadowOrRegistrationDelaysNoOther) {
  // "stuck" does not succeed until it heals (and never dead-letters within the test); everything
  // else flows.
  std::atomic<bool> healed = false;
  targets.set_script([&](const std::string& registration, const std::string& thing, int) {
    return registration == "down" || (thing == "stuck" && !healed) ? Outcome::retry : Outcome::delivered;
  });
  dispatcher->put("down", hook(R"(,"maxAttempts":1000)"));
  dispatcher->put("up", hook(R"(,"maxAttempts":1000)"));
  report(*engine, "stuck", "main", 0);
  constexpr int kFree = 200;  // many entries finish behind the stuck one
  for (int i = 0; i < kFree; ++i) report(*engine, "free", "main", i);
  ASSERT_TRUE(eventually([&] { return targets.delivered("up").size() == kFree; }));
  EXPECT_EQ(versions_of(targets.delivered("up"), "free"), one_to(kFree));
  EXPECT_TRUE(targets.delivered("down").empty());
  // The stuck event holds the checkpoint back, so nothing after it is trimmed away.
  EXPECT_EQ(store->checkpoint("up"), store->checkpoint("down"));
  // The target reports a delivery before the worker has counted it: wait for the count.
  EXPECT_TRUE(eventually([&] { return dispatcher->status("up")->pending == 1u; })) << dispatcher->status("up")->pending;
  EXPECT_GT(dispatcher->status("up")->failed, 0u);
  // Once it is delivered, the checkpoint moves past everything delivered behind it.
  healed = true;
  ASSERT_TRUE(eventually([&] { return store->checkpoint("up") == store->feed_end(); }));
  EXPECT_EQ(dispatcher->status("up")->pending, 0u);
  EXPECT_EQ(targets.delivered("up").size(), kFree + 1u);
}

// The process's threads, from /proc.
std::size_t thread_count() {
  return static_cast<std::size_t>(std::distance(std::filesystem::directory_iterator("/proc/self/task"),
                                                std::filesystem::directory_iterator()));
}

// Registrations share the dispatcher's sender threads: a hundred of them, delivering, start no
// thread of their own.
TEST_P(DispatcherTest, RegistrationsShareTheSenderThreads) {
  const std::size_t before = thread_count();
  for (int i = 0; i < 100; ++i) dispatcher->put("r" + std::to_string(i), hook());
  for (int i = 0; i < 20; ++i) report(*engine, "t" + std::to_string(i), "main", i);
  ASSERT_TRUE(eventually([&] { return targets.delivered("r99").size() == 20 && targets.delivered("r0").size() == 20; }));
  EXPECT_EQ(thread_count(), before) << "a thread per registration";
  for (int i = 0; i < 100; ++i) dispatcher->remove("r" + std::to_string(i));
}

TEST_P(DispatcherTest, OutcomesReportedAsAWorkerStopsAreSettled) {
  targets.report_only_when_woken();
  dispatcher->put("r", hook());
  report(*engine, "t", "main", 0);
  ASSERT_TRUE(eventually([&] { return targets.delivered("r").size() == 1; }));  // its outcome not reported yet
  dispatcher->put("r", hook(R"(,"enabled":false)"));  // stops the worker, which wakes the target
  EXPECT_TRUE(eventually([&] { return store->checkpoint("r") == store->feed_end(); }));  // delivered: not sent again
}

TEST_P(DispatcherTest, ARegistrationWithAFullWindowCatchesUpWithoutHoldingOthersBack) {
  // A small window and page: "down" fills its window and falls far behind "up", which the
  // shared reader keeps serving; once "down" heals it reads its own way through the backlog.
  std::atomic<bool> healed = false;
  targets.set_script([&](const std::string& registration, const std::string&, int) {
    return registration == "down" && !healed ? Outcome::retry : Outcome::delivered;
  });
  notify::DispatcherOptions o = fast_options();
  o.window = 8;
  o.page = 5;
  o.retry_base = o.retry_max = std::chrono::milliseconds(50);  // "down" dead-letters nothing before it heals
  dispatcher = std::make_unique<notify::Dispatcher>(*engine, *store, o, targets.factory());
  dispatcher->put("down", hook(R"(,"maxAttempts":1000)"));
  dispatcher->put("up", hook());
  for (int i = 0; i < 60; ++i) report(*engine, "t" + std::to_string(i % 6), "main", i);
  ASSERT_TRUE(eventually([&] { return targets.delivered("up").size() == 60; }));
  EXPECT_GE(dispatcher->status("down")->pending, 60u - 8u);
  healed = true;
  ASSERT_TRUE(eventually([&] { return targets.delivered("down").size() == 60; }));
  for (int t = 0; t < 6; ++t) EXPECT_EQ(versions_of(targets.delivered("down"), "t" + std::to_string(t)), one_to(10));
  ASSERT_TRUE(eventually([&] { return store->read_feed(0, 10).empty(); }));
}

// The store wakes the reader after each commit that appended: with a poll of an hour, every
// write is still delivered.
TEST_P(DispatcherTest, EachWriteWakesTheReader) {
  notify::DispatcherOptions o = fast_options();
  o.poll = std::chrono::hours(1);
  dispatcher.reset();  // before its successor: stopping clears the store's listener
  dispatcher = std::make_unique<notify::Dispatcher>(*engine, *store, o, targets.factory());
  dispatcher->put("r", hook());
  for (std::size_t i = 1; i <= 3; ++i) {
    report(*engine, "t", "main", static_cast<int>(i));
    ASSERT_TRUE(eventually([&] { return targets.delivered("r").size() == i; })) << i;
  }
}

TEST_P(DispatcherTest, ANewRegistrationStartsAtTheFeedsEndAndADisabledOneSkipsWrites) {
  EXPECT_FALSE(engine->change_feed());  // nothing registered: writes carry no entry
  report(*engine, "t", "main", 0);
  EXPECT_EQ(store->feed_end(), 0u);
  dispatcher->put("r", hook());
  report(*engine, "t", "main", 1);
  ASSERT_TRUE(eventually([&] { return targets.delivered("r").size() == 1; }));
  EXPECT_EQ(versions_of(targets.delivered("r"), "t"), std::vector<std::int64_t>{2});

  dispatcher->put("r", hook(R"(,"enabled":false)"));
  EXPECT_FALSE(engine->change_feed());
  report(*engine, "t", "main", 2);
  dispatcher->put("r", hook());
  report(*engine, "t", "main", 3);
  ASSERT_TRUE(eventually([&] { return targets.delivered("r").size() == 2; }));
  EXPECT_EQ(versions_of(targets.delivered("r"), "t"), (std::vector<std::int64_t>{2, 4}));

  EXPECT_TRUE(dispatcher->remove("r"));
  EXPECT_FALSE(dispatcher->remove("r"));
  EXPECT_FALSE(engine->change_feed());
  EXPECT_FALSE(store->checkpoint("r"));
}

TEST_P(DispatcherTest, AFilterLetsThroughOnlyTheWritesThatLeaveTheShadowPassingIt) {
  dispatcher->put("hot", hook(R"x(,"filter":"gt(reported/v,10)")x"));
  dispatcher->put("all", hook());
  for (int i = 0; i < 20; ++i) report(*engine, "a", "main", i);  // version i + 1
  // A write of desired alone: the filter sees reported as stored when the write is read from
  // the feed (v 19: passes).
  ds::UpdateRequest desire;
  desire.key = {"a", "main"};
  desire.section = ds::Section::desired;
  desire.state = ds::parse_json(R"({"x":1})").as_object();
  engine->update(desire);
  // Both registrations have judged the desired write before reported changes again: "hot" reads
  // the reported section as stored when it judges the write (docs/notifications.md, "Filters").
  ASSERT_TRUE(eventually([&] { return targets.delivered("all").size() == 21 && targets.delivered("hot").size() == 10; }));
  report(*engine, "a", "main", 3);  // no longer passes
  ASSERT_TRUE(eventually([&] { return targets.delivered("all").size() == 22 && targets.delivered("hot").size() == 10; }));
  const std::vector<ds::json::value> hot = targets.delivered("hot");
  std::vector<std::int64_t> expected;
  for (std::int64_t v = 12; v <= 20; ++v) expected.push_back(v);
  EXPECT_EQ(versions_of({hot.begin(), hot.end() - 1}, "a"), expected);
  EXPECT_TRUE(hot.back().at("data").as_object().contains("desired"));
  EXPECT_FALSE(hot.back().at("data").as_object().contains("reported"));
  ASSERT_TRUE(eventually([&] { return dispatcher->status("hot")->pending == 0; }));
  EXPECT_EQ(targets.delivered("hot").size(), 10u);
}

TEST_P(DispatcherTest, ARestartResumesFromTheCheckpoint) {
  targets.set_script([](auto&, auto&, int) { return Outcome::retry; });  // the target is down
  dispatcher->put("r", hook(R"(,"maxAttempts":1000)"));
  for (int i = 0; i < 30; ++i) report(*engine, "t" + std::to_string(i % 3), "main", i);
  ASSERT_TRUE(eventually([&] { return dispatcher->status("r")->failed >= 3; }));
  restart();
  targets.set_script([](auto&, auto&, int) { return Outcome::delivered; });
  ASSERT_TRUE(eventually([&] { return targets.delivered("r").size() == 30; }));
  for (int t = 0; t < 3; ++t) EXPECT_EQ(versions_of(targets.delivered("r"), "t" + std::to_string(t)), one_to(10));
}

TEST_P(DispatcherTest, RefusesTargetsItCannotDeliverToAndStoresWithoutAFeed) {
  try {
    dispatcher->put("q", R"({"target":{"type":"mqtt","broker":"mqtt://127.0.0.1:1883"}})");
    FAIL() << "an mqtt registration was accepted";
  } catch (const ds::Error& e) {
    EXPECT_EQ(e.code(), ds::ErrorCode::invalid_request);
    EXPECT_EQ(e.details().field, "target.type");
  }
  EXPECT_TRUE(dispatcher->list().empty());

  struct NoFeed final : ForwardingDeliveryStore {
    using ForwardingDeliveryStore::ForwardingDeliveryStore;
    std::uint64_t feed_end() override { throw ds::Error(ds::ErrorCode::unavailable, "no outbox"); }
  } no_feed(*store);
  dispatcher.reset();
  ds::Engine other(*store);
  notify::Dispatcher d(other, no_feed, fast_options(), targets.factory());
  EXPECT_FALSE(d.available());
  try {
    d.put("r", hook());
    FAIL() << "a registration was accepted without a feed";
  } catch (const ds::Error& e) {
    EXPECT_EQ(e.code(), ds::ErrorCode::unavailable);
  }
}

// A DynamoDB table's feed: entries made of stream records, whose records are done (their
// shard's checkpoint may pass them) only once every registration has their events.
TEST_P(DispatcherTest, DeliversFromAStreamFeedAndItsRecordsAreDoneOnceDelivered) {
  using stream_records::report_record;
  dispatcher.reset();
  notify::stream::StreamFeed feed;
  notify::Dispatcher d(*engine, *store, fast_options(), targets.factory(), {}, &feed);
  targets.set_script([](auto&, auto&, int attempt) { return attempt < 3 ? Outcome::retry : Outcome::delivered; });
  d.put("r", hook());
  d.put("all", hook());
  std::vector<notify::stream::StreamRecord> records{report_record("11", "a", 1), report_record("12", "b", 1),
                                                    report_record("13", "a", 2)};
  std::size_t done = feed.take("shard", records);
  EXPECT_EQ(done, 0u) << "nothing is delivered yet";
  ASSERT_TRUE(eventually([&] {
    done += feed.take("shard", std::span(records).subspan(done));
    return done == records.size();
  }));
  for (const std::string r : {"r", "all"}) {
    ASSERT_EQ(targets.delivered(r).size(), 3u) << r;
    std::vector<std::string> a;
    for (const auto& e : targets.delivered(r)) {
      if (e.at("data").at("name") == "a") a.push_back(std::string(e.at("id").as_string()));
    }
    EXPECT_EQ(a, (std::vector<std::string>{"00000000000000001001#R1", "00000000000000001002#R2"})) << "in version order";
  }
  EXPECT_EQ(feed.size(), 0u) << "trimmed";
}

// After a restart the shards are read again from their stored checkpoints, possibly before the
// dispatcher comes up (an orderly stop frees the leases at once): registrations start at the
// first entry read again, not at the feed's end.
TEST_P(DispatcherTest, RegistrationsStartAtTheFirstEntryOfAStreamFeedReadBeforeTheyCameUp) {
  using stream_records::report_record;
  dispatcher->put("r", hook());
  dispatcher.reset();
  notify::stream::StreamFeed feed;
  std::vector<notify::stream::StreamRecord> records{report_record("11", "a", 1), report_record("12", "a", 2)};
  EXPECT_EQ(feed.take("shard", records), 0u);
  notify::Dispatcher d(*engine, *store, fast_options(), targets.factory(), {}, &feed);
  ASSERT_TRUE(eventually([&] { return targets.delivered("r").size() == 2; }));
  std::size_t done = 0;
  ASSERT_TRUE(eventually([&] {
    done += feed.take("shard", std::span(records).subspan(done));
    return done == records.size();
  }));
}

// Several processes on one store learn of each other's registrations by refresh().
TEST_P(DispatcherTest, RefreshPicksUpRegistrationsPutAndRemovedElsewhere) {
  ds::Engine other_engine(*store);
  notify::Dispatcher other(other_engine, *store, fast_options(), targets.factory());
  dispatcher->put("r", hook());
  EXPECT_FALSE(other.get("r"));
  other.refresh();
  ASSERT_TRUE(other.get("r"));
  EXPECT_TRUE(other.status("r")) << "running";
  EXPECT_EQ(other.statuses().size(), 1u);
  other.refresh();  // unchanged: the worker goes on
  EXPECT_EQ(other.statuses().size(), 1u);
  dispatcher->put("r", hook(R"(,"enabled":false)"));
  other.refresh();
  EXPECT_FALSE(other.get("r")->enabled);
  EXPECT_TRUE(other.statuses().empty()) << "its worker stopped";
  dispatcher->remove("r");
  other.refresh();
  EXPECT_FALSE(other.get("r"));
  EXPECT_TRUE(other.list().empty());
}

TEST_P(DispatcherTest, DeletingARedrivenDeadLetterCancelsItsRedrive) {
  targets.set_script([](auto&, const std::string& thing, int) { return thing == "x" ? Outcome::reject : Outcome::delivered; });
  dispatcher->put("r", hook(R"(,"maxAttempts":1000)"));
  report(*engine, "x", "main", 1);
  ASSERT_TRUE(eventually([&] { return store->dead_letters("r", "", 10).size() == 1; }));
  // The shadow's queue is held up by a newer event that keeps failing, so the redrive waits.
  targets.set_script([](auto&, const std::string& thing, int) { return thing == "x" ? Outcome::retry : Outcome::delivered; });
  report(*engine, "x", "main", 2);
  ASSERT_TRUE(eventually([&] { return dispatcher->status("r")->failed >= 2; }));
  EXPECT_EQ(dispatcher->redrive("r", std::nullopt), 1u);
  EXPECT_EQ(dispatcher->redrive("r", std::nullopt), 0u);  // already queued
  EXPECT_EQ(dispatcher->redrive("r", std::vector<std::string>{}), 0u);  // an empty list names none
  EXPECT_EQ(dispatcher->delete_dead_letters("r", std::nullopt), 1u);
  targets.set_script([](auto&, auto&, int) { return Outcome::delivered; });
  ASSERT_TRUE(eventually([&] { return targets.delivered("r").size() == 1; }));
  std::this_thread::sleep_for(std::chrono::milliseconds(100));  // time for a wrong delivery to show
  EXPECT_EQ(versions_of(targets.delivered("r"), "x"), std::vector<std::int64_t>{2});
  EXPECT_TRUE(store->dead_letters("r", "", 10).empty());
  EXPECT_EQ(dispatcher->status("r")->dead_letters, 0u);
}

// A registration keeps at most max_dead_letters: storing more removes the oldest (by event id,
// that is by write time), counted. Each letter expires dead_letter_retention after it failed.
TEST_P(DispatcherTest, KeepsAtMostMaxDeadLettersTheOldestGoFirst) {
  notify::DispatcherOptions o = fast_options();
  o.max_dead_letters = 3;
  o.dead_letter_retention = std::chrono::hours(1);
  dispatcher = std::make_unique<notify::Dispatcher>(*engine, *store, o, targets.factory());
  targets.set_script([](auto&, const std::string& thing, int) { return thing == "x" ? Outcome::reject : Outcome::delivered; });
  dispatcher->put("r", hook());
  for (int i = 1; i <= 5; ++i) report(*engine, "x", "main", i);
  ASSERT_TRUE(eventually([&] { return dispatcher->status("r")->dead_lettered == 5; }));
  std::vector<ds::DeadLetter> letters = store->dead_letters("r", "", 10);
  std::vector<std::int64_t> versions;
  for (const auto& letter : letters) {
    versions.push_back(ds::parse_json(letter.event).at("data").at("reported").at("version").as_int64());
    EXPECT_EQ(letter.expires_ns, letter.failed_ns + std::int64_t{3600} * 1'000'000'000);
  }
  EXPECT_EQ(versions, (std::vector<std::int64_t>{3, 4, 5}));
  EXPECT_EQ(dispatcher->status("r")->dead_letters, 3u);
  EXPECT_EQ(dispatcher->status("r")->dead_letters_evicted, 2u);
  std::string metrics;
  notify::render_metrics(metrics, dispatcher->statuses());
  EXPECT_NE(metrics.find(R"(shadowd_notify_dead_letters_evicted_total{registration="r"} 2)"), std::string::npos) << metrics;

  // The retention: purge drops them once they expired.
  EXPECT_EQ(store->purge_dead_letters(letters.back().expires_ns), 3u);
  EXPECT_TRUE(store->dead_letters("r", "", 10).empty());
}

// The worker's count misses letters removed behind its back (expired and purged, deleted by
// another process): it counts again before it removes any, so none goes for nothing.
TEST_P(DispatcherTest, DeadLettersRemovedElsewhereAreCountedBeforeTheOldestGo) {
  notify::DispatcherOptions o = fast_options();
  o.max_dead_letters = 3;
  o.dead_letter_recount = std::chrono::milliseconds(0);
  dispatcher = std::make_unique<notify::Dispatcher>(*engine, *store, o, targets.factory());
  targets.set_script([](auto&, const std::string& thing, int) { return thing == "x" ? Outcome::reject : Outcome::delivered; });
  dispatcher->put("r", hook());
  for (int i = 1; i <= 3; ++i) report(*engine, "x", "main", i);
  ASSERT_TRUE(eventually([&] { return dispatcher->status("r")->dead_letters == 3; }));
  std::vector<ds::DeadLetter> letters = store->dead_letters("r", "", 10);
  ASSERT_EQ(letters.size(), 3u);
  const std::vector<std::string> two{letters[0].event_id, letters[1].event_id};
  EXPECT_EQ(store->remove_dead_letters("r", std::span<const std::string>(two)), 2u);  // not through the dispatcher
  for (int i = 4; i <= 5; ++i) report(*engine, "x", "main", i);
  ASSERT_TRUE(eventually([&] { return dispatcher->status("r")->dead_lettered == 5; }));
  ASSERT_EQ(store->dead_letters("r", "", 10).size(), 3u);
  EXPECT_EQ(store->dead_letters("r", "", 10)[0], letters[2]) << "kept: there was room";
  EXPECT_EQ(dispatcher->status("r")->dead_letters, 3u);
  EXPECT_EQ(dispatcher->status("r")->dead_letters_evicted, 0u);
}

// The error a call fails with (ds::Error only; anything else fails the test).
ds::Error error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const ds::Error& e) {
    return e;
  }
  ADD_FAILURE() << "no ds::Error";
  return ds::Error(ds::ErrorCode::internal, "none");
}

std::vector<std::string> stored_ids(ds::DeliveryStore& store) {
  std::vector<std::string> ids;
  for (const auto& r : store.list_registrations()) ids.push_back(r.id);
  return ids;
}

TEST_P(DispatcherTest, ANewRegistrationPastMaxRegistrationsIsRefusedNamingTheLimit) {
  notify::DispatcherOptions o = fast_options();
  o.max_registrations = 2;
  dispatcher = std::make_unique<notify::Dispatcher>(*engine, *store, o, targets.factory());
  dispatcher->put("a", hook());
  dispatcher->put("b", hook(R"(,"enabled":false)"));  // disabled ones count too
  const ds::Error e = error_of([&] { dispatcher->put("c", hook()); });
  EXPECT_EQ(e.code(), ds::ErrorCode::invalid_request);
  EXPECT_EQ(e.details().limit, 2u);
  EXPECT_NE(std::string(e.what()).find("--max-registrations"), std::string::npos) << e.what();
  EXPECT_EQ(stored_ids(*store), (std::vector<std::string>{"a", "b"}));
  EXPECT_FALSE(dispatcher->get("c"));
  dispatcher->put("a", hook(R"(,"match":"t#.*")"));  // replacing one is no new one
  EXPECT_TRUE(dispatcher->remove("b"));
  dispatcher->put("c", hook());
  EXPECT_EQ(stored_ids(*store), (std::vector<std::string>{"a", "c"}));
}

// Out of descriptors while its target starts: 503 unavailable saying so, and nothing stored; a
// registration being replaced goes on as it was.
TEST_P(DispatcherTest, ATargetThatCannotStartIsUnavailableAndStoresNothing) {
  std::atomic<bool> out_of_descriptors = false;
  auto factory = [&, inner = targets.factory()](const notify::Registration& r) -> std::unique_ptr<notify::Target> {
    if (out_of_descriptors) {
      throw std::system_error(EMFILE, std::generic_category(), "webhook: cannot set up its event loop");
    }
    return inner(r);
  };
  dispatcher = std::make_unique<notify::Dispatcher>(*engine, *store, fast_options(), factory);
  dispatcher->put("a", hook());
  out_of_descriptors = true;
  for (const std::string id : {"b", "a"}) {
    const ds::Error e = error_of([&] { dispatcher->put(id, hook(R"(,"match":"nothing#.*")")); });
    EXPECT_EQ(e.code(), ds::ErrorCode::unavailable) << id;
    EXPECT_STREQ(e.what(), "cannot start the target: too many open files");
  }
  EXPECT_EQ(stored_ids(*store), std::vector<std::string>{"a"});
  EXPECT_FALSE(dispatcher->get("b"));
  EXPECT_EQ(dispatcher->get("a")->match, ".*") << "unchanged";
  report(*engine, "t", "main", 1);
  ASSERT_TRUE(eventually([&] { return targets.delivered("a").size() == 1; })) << "still delivering";
}

// A failure after the registration was stored (here the store, as its worker starts; as well a
// thread that cannot be had) is undone: a new registration is removed, a replaced one restored
// and restarted.
TEST_P(DispatcherTest, AWorkerThatCannotStartIsUndone) {
  struct FailingStart final : ForwardingDeliveryStore {
    using ForwardingDeliveryStore::ForwardingDeliveryStore;
    std::atomic<int> failures = 0;  // the next count_dead_letters calls that fail
    std::uint64_t count_dead_letters(std::string_view r) override {
      if (failures > 0 && failures-- > 0) throw std::system_error(EAGAIN, std::generic_category(), "no thread");
      return ForwardingDeliveryStore::count_dead_letters(r);
    }
  } failing(*store);
  dispatcher.reset();
  notify::Dispatcher d(*engine, failing, fast_options(), targets.factory());
  failing.failures = 1;
  ds::Error e = error_of([&] { d.put("new", hook()); });
  EXPECT_EQ(e.code(), ds::ErrorCode::unavailable);
  EXPECT_STREQ(e.what(), "cannot start the target: resource temporarily unavailable");
  EXPECT_TRUE(stored_ids(*store).empty());
  EXPECT_TRUE(d.list().empty());
  EXPECT_FALSE(engine->change_feed()) << "no registration: the feed is off again";

  d.put("a", hook());
  const std::string stored = store->list_registrations().at(0).json;
  failing.failures = 1;
  e = error_of([&] { d.put("a", hook(R"(,"match":"nothing#.*")")); });
  EXPECT_EQ(e.code(), ds::ErrorCode::unavailable);
  EXPECT_EQ(store->list_registrations().at(0).json, stored) << "the replaced registration is stored again";
  EXPECT_EQ(d.get("a")->match, ".*");
  EXPECT_FALSE(d.status("a")->last_error) << "and runs";
  report(*engine, "t", "main", 1);
  ASSERT_TRUE(eventually([&] { return targets.delivered("a").size() == 1; }));
}

// A filter judged on a shadow the store cannot read: a passing failure (unavailable) holds the
// event until the store answers; one that would repeat lets the event through, logged, so that
// the registration is never held up for good.
TEST_P(DispatcherTest, AFilterThatCannotBeJudgedWaitsForTheStoreOrLetsTheEventThrough) {
  // Fails the reads of every thread but the test's (which writes): the dispatcher's.
  struct FailingReads final : ForwardingStore {
    using ForwardingStore::ForwardingStore;
    std::thread::id writer = std::this_thread::get_id();
    std::atomic<int> failing{0};  // 0: reads work; 1: unavailable; 2: internal
    std::vector<ds::ShadowRecord> read(std::span<const ds::ShadowKey> keys) override {
      if (std::this_thread::get_id() != writer && failing == 1) throw ds::Error(ds::ErrorCode::unavailable, "the store is away");
      if (std::this_thread::get_id() != writer && failing == 2) throw ds::Error(ds::ErrorCode::internal, "the record is corrupt");
      return ForwardingStore::read(keys);
    }
  } reads(*store);
  dispatcher.reset();
  ds::Engine judged(reads);
  notify::Dispatcher d(judged, *store, fast_options(), targets.factory());
  d.put("hot", hook(R"x(,"filter":"gt(reported/v,10)")x"));
  reads.failing = 1;
  report(judged, "a", "main", 20);
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  EXPECT_TRUE(targets.delivered("hot").empty()) << "held while the store is away";
  reads.failing = 0;
  ASSERT_TRUE(eventually([&] { return targets.delivered("hot").size() == 1; }));
  reads.failing = 2;
  report(judged, "a", "main", 1);  // would not pass, but cannot be judged: delivered
  ASSERT_TRUE(eventually([&] { return targets.delivered("hot").size() == 2; }));
  reads.failing = 0;
  report(judged, "a", "main", 2);  // judged again: does not pass
  report(judged, "a", "main", 30);
  ASSERT_TRUE(eventually([&] { return targets.delivered("hot").size() == 3; }));
  EXPECT_EQ(versions_of(targets.delivered("hot"), "a"), (std::vector<std::int64_t>{1, 2, 4}));
}

TEST_P(DispatcherTest, CountersSurviveReplacingTheRegistration) {
  dispatcher->put("r", hook());
  report(*engine, "t", "main", 1);
  ASSERT_TRUE(eventually([&] { return dispatcher->status("r")->delivered == 1; }));
  dispatcher->put("r", hook(R"(,"match":"t#.*")"));
  report(*engine, "t", "main", 2);
  ASSERT_TRUE(eventually([&] { return dispatcher->status("r")->delivered == 2; }));
  EXPECT_EQ(dispatcher->status("r")->latency.count, 2u);
}


// A target that answers every delivery with a retry after `delay`, as a receiver that accepts
// connections and never answers does after the registration's timeout; it records what it
// was given.
class TimingOutTarget final : public notify::Target {
 public:
  explicit TimingOutTarget(std::chrono::milliseconds delay, std::atomic<int>& started) : delay_(delay), started_(started) {}
  void start(std::uint64_t tag, const notify::Delivery&) override {
    ++started_;
    std::lock_guard lock(mutex_);
    due_.emplace_back(std::chrono::steady_clock::now() + delay_, tag);
  }
  void run(std::chrono::milliseconds timeout, const Done& done) override {
    std::vector<std::uint64_t> finished;
    {
      std::unique_lock lock(mutex_);
      const auto until = std::chrono::steady_clock::now() + timeout;
      cv_.wait_until(lock, due_.empty() ? until : std::min(until, due_.front().first), [&] { return woken_; });
      woken_ = false;
      while (!due_.empty() && due_.front().first <= std::chrono::steady_clock::now()) {
        finished.push_back(due_.front().second);
        due_.pop_front();
      }
    }
    for (std::uint64_t tag : finished) done(tag, {Outcome::retry, "timed out"});
  }
  void wake() override {
    {
      std::lock_guard lock(mutex_);
      woken_ = true;
    }
    cv_.notify_all();
  }

 private:
  const std::chrono::milliseconds delay_;
  std::atomic<int>& started_;
  std::mutex mutex_;
  std::condition_variable cv_;
  bool woken_ = false;
  std::deque<std::pair<std::chrono::steady_clock::time_point, std::uint64_t>> due_;
};

// Registrations named "hung…" get a TimingOutTarget, the others a scripted one.
notify::TargetFactory with_hung_receivers(ScriptedTargets& targets, std::chrono::milliseconds delay,
                                          std::atomic<int>& started) {
  return [&targets, delay, &started, scripted = targets.factory()](const notify::Registration& r) -> std::unique_ptr<notify::Target> {
    if (r.id.starts_with("hung")) return std::make_unique<TimingOutTarget>(delay, started);
    return scripted(r);
  };
}

std::size_t dead_letters_with(ds::DeliveryStore& store, const std::string& registration, std::string_view error) {
  std::size_t n = 0;
  for (const ds::DeadLetter& d : store.dead_letters(registration, "", 100000)) n += d.last_error.starts_with(error) ? 1 : 0;
  return n;
}

// A receiver that never answers gets few attempts a second; without a limit by age its events
// would wait in its queues (and the feed) as long as writes come. maxAgeSeconds bounds that.
TEST_P(DispatcherTest, EventsPastMaxAgeAreDeadLetteredWhileTheReceiverHangs) {
  dispatcher.reset();
  std::atomic<int> started{0};
  notify::Dispatcher d(*engine, *store, fast_options(), with_hung_receivers(targets, std::chrono::milliseconds(200), started));
  d.put("hung", hook(R"(,"maxAttempts":1000,"maxAgeSeconds":1)"));
  d.put("fine", hook());
  for (int i = 0; i < 30; ++i) report(*engine, "t" + std::to_string(i % 10), "main", i);
  ASSERT_TRUE(eventually([&] { return dead_letters_with(*store, "hung", "expired:") == 30; }))
      << dead_letters_with(*store, "hung", "expired:");
  // Counted once the store has them.
  EXPECT_TRUE(eventually([&] { return d.status("hung")->dead_letters == 30 && d.status("hung")->pending == 0; }))
      << d.status("hung")->dead_letters << " dead letters, " << d.status("hung")->pending << " pending";
  EXPECT_EQ(targets.delivered("fine").size(), 30u);
  EXPECT_LE(started.load(), 30 * 4) << "expired events are not sent again";
  ASSERT_TRUE(eventually([&] { return store->checkpoint("hung") == store->feed_end(); })) << "the feed may be trimmed";
}

// What a registration holds in memory is bounded in bytes, not only in entries.
TEST_P(DispatcherTest, AWindowIsBoundedInBytes) {
  dispatcher.reset();
  std::atomic<int> started{0};
  notify::DispatcherOptions o = fast_options();
  o.concurrency = 1000;  // every event held is started
  o.window = 1000;
  o.window_bytes = 60 << 10;
  notify::Dispatcher d(*engine, *store, o, with_hung_receivers(targets, std::chrono::hours(1), started));
  d.put("hung", hook());
  const std::string big(10000, 'x');
  for (int i = 0; i < 40; ++i) {
    ds::UpdateRequest r;
    r.key = {"big" + std::to_string(i), "main"};
    r.section = ds::Section::reported;
    r.state = ds::json::object{{"blob", big + std::to_string(i)}};
    engine->update(r);
  }
  ASSERT_TRUE(eventually([&] { return started.load() > 0; }));
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // time for more to be taken, were they allowed
  EXPECT_LE(started.load(), 7) << "each entry holds more than 10 KB; 60 KiB are allowed, and one entry more";
  EXPECT_EQ(d.status("hung")->pending, 40u) << "the rest still counts as pending";
}

// A target whose run() waits on its network until abandoned (an SQS or SNS call).
class BlockingTarget final : public notify::Target {
 public:
  explicit BlockingTarget(std::atomic<int>& abandons) : abandons_(abandons) {}
  void start(std::uint64_t, const notify::Delivery&) override {}
  void run(std::chrono::milliseconds, const Done&) override {
    std::unique_lock lock(mutex_);
    cv_.wait_for(lock, std::chrono::seconds(20), [&] { return abandoned_; });  // wake() does not end it
  }
  void wake() override {}
  void abandon() override {
    {
      std::lock_guard lock(mutex_);
      abandoned_ = true;
    }
    ++abandons_;
    cv_.notify_all();
  }

 private:
  std::atomic<int>& abandons_;  // counted over every instance
  std::mutex mutex_;
  std::condition_variable cv_;
  bool abandoned_ = false;  // this instance's own: a replacement's must not keep it waiting
};

// Replacing or removing a registration whose target waits on its network neither waits for it
// nor holds up the other registrations.
TEST_P(DispatcherTest, StoppingATargetNeverWaitsOnItsNetwork) {
  dispatcher.reset();
  std::atomic<int> abandons{0};
  auto scripted = targets.factory();
  notify::Dispatcher d(*engine, *store, fast_options(), [&](const notify::Registration& r) -> std::unique_ptr<notify::Target> {
    if (r.id == "blocked") return std::make_unique<BlockingTarget>(abandons);
    return scripted(r);
  });
  d.put("blocked", hook());
  d.put("fine", hook());
  report(*engine, "t", "main", 1);
  ASSERT_TRUE(eventually([&] { return targets.delivered("fine").size() == 1; }));
  d.put("blocked", hook(R"(,"match":"t#.*")"));  // replaced: its worker stops
  EXPECT_EQ(abandons.load(), 1) << "the target was told to abandon its call";
  report(*engine, "t", "main", 2);
  ASSERT_TRUE(eventually([&] { return targets.delivered("fine").size() == 2; })) << "others go on";
  EXPECT_TRUE(d.remove("blocked"));
  EXPECT_EQ(abandons.load(), 2);
}

// A target whose call in progress is aborted when abandoned and reported as a retry (as the SQS
// and SNS targets' libcurl calls are).
class AbortingTarget final : public notify::Target {
 public:
  explicit AbortingTarget(std::atomic<int>& started) : started_(started) {}
  void start(std::uint64_t tag, const notify::Delivery&) override {
    ++started_;
    tags_.push_back(tag);
  }
  void run(std::chrono::milliseconds timeout, const Done& done) override {
    std::unique_lock lock(mutex_);
    if (tags_.empty()) {  // nothing in flight: wait as asked
      cv_.wait_for(lock, timeout, [&] { return std::exchange(woken_, false) || abandoned_; });
      return;
    }
    cv_.wait_for(lock, std::chrono::seconds(20), [&] { return abandoned_; });  // a call that only abandon() ends
    lock.unlock();
    for (std::uint64_t tag : std::exchange(tags_, {})) done(tag, {Outcome::retry, "aborted"});
  }
  void wake() override {
    {
      std::lock_guard lock(mutex_);
      woken_ = true;
    }
    cv_.notify_all();
  }
  void abandon() override {
    {
      std::lock_guard lock(mutex_);
      abandoned_ = true;
    }
    cv_.notify_all();
  }

 private:
  std::atomic<int>& started_;
  std::vector<std::uint64_t> tags_;
  std::mutex mutex_;
  std::condition_variable cv_;
  bool woken_ = false;
  bool abandoned_ = false;
};

// An attempt abandoned because its worker stops is no failed attempt: with maxAttempts 1 the
// event is not dead-lettered but sent again by the next worker.
TEST_P(DispatcherTest, AnAttemptAbandonedAsTheWorkerStopsIsNotAFailure) {
  dispatcher.reset();
  std::atomic<int> started{0};
  std::atomic<int> built{0};
  auto scripted = targets.factory();
  notify::Dispatcher d(*engine, *store, fast_options(), [&](const notify::Registration& r) -> std::unique_ptr<notify::Target> {
    if (built++ == 0) return std::make_unique<AbortingTarget>(started);
    return scripted(r);
  });
  d.put("r", hook(R"(,"maxAttempts":1)"));
  report(*engine, "t", "main", 1);
  ASSERT_TRUE(eventually([&] { return started.load() == 1; }));
  d.put("r", hook(R"(,"maxAttempts":1,"match":"t#.*")"));  // replaced: the call in progress is aborted
  ASSERT_TRUE(eventually([&] { return targets.delivered("r").size() == 1; })) << "sent again by the next worker";
  EXPECT_TRUE(store->dead_letters("r", "", 10).empty());
  EXPECT_EQ(d.status("r")->failed, 0u);
}

// On DynamoDB the feed is the table's stream, held in memory: each shard reader keeps at most
// so many records until their entries are trimmed (40 here, as a reader with max_pending 40).
// A registration that does not keep up gives up its events to dead letters ("spilled") instead
// of stopping the stream for the others.
TEST_P(DispatcherTest, ARegistrationHoldingBackAFullStreamFeedSpillsToDeadLetters) {
  using stream_records::report_record;
  dispatcher.reset();
  notify::stream::StreamFeedOptions feed_options;
  feed_options.shard_records = 40;
  notify::stream::StreamFeed feed(feed_options);
  std::atomic<int> started{0};
  notify::DispatcherOptions o = fast_options();
  o.spill_after = std::chrono::seconds(1);  // "fine" is never that far behind (even under TSan), "hung" soon is
  notify::Dispatcher d(*engine, *store, o, with_hung_receivers(targets, std::chrono::milliseconds(100), started), {}, &feed);
  d.put("hung", hook(R"(,"maxAttempts":1000)"));
  d.put("fine", hook());
  // Records are made as the reader reads them, so that each event's time is when it was "written".
  std::vector<notify::stream::StreamRecord> records;
  std::size_t done = 0;
  ASSERT_TRUE(eventually(
      [&] {
        while (records.size() < std::min<std::size_t>(done + 40, 120)) {
          const int i = static_cast<int>(records.size()) + 1;
          char seq[24];
          std::snprintf(seq, sizeof seq, "%020d", i);
          records.push_back(report_record(seq, "n" + std::to_string(i % 10), (i + 9) / 10));
        }
        done += feed.take("shard", std::span(records).subspan(done));
        return done == 120;
      },
      30))
      << "the stream stalled at record " << done;
  EXPECT_EQ(dead_letters_with(*store, "fine", ""), 0u) << "a registration that keeps up is never spilled";
  ASSERT_TRUE(eventually([&] { return targets.delivered("fine").size() == 120; })) << targets.delivered("fine").size();
  EXPECT_GT(dead_letters_with(*store, "hung", "spilled:"), 0u);
  EXPECT_TRUE(eventually([&] { return d.status("hung")->dead_lettered > 0; }));  // counted once stored
}

// Once the registration holding the feed back has spilled, the feed is trimmed to the next
// checkpoint before it is judged nearly full again: a registration that has the entries the
// spilled one held, and waits on one event of its own, is not spilled for them.
TEST_P(DispatcherTest, ARegistrationIsNotSpilledForEntriesAnotherOneHeldBack) {
  using stream_records::report_record;
  dispatcher.reset();
  notify::stream::StreamFeedOptions feed_options;
  feed_options.shard_records = 40;  // nearly full at 30 records not done
  notify::stream::StreamFeed feed(feed_options);
  std::atomic<int> started{0};
  std::atomic<bool> released{false};
  targets.set_script([&](const std::string& registration, const std::string& thing, int) {
    return registration == "slow" && thing == "held" && !released ? Outcome::retry : Outcome::delivered;
  });
  notify::DispatcherOptions o = fast_options();
  o.spill_after = std::chrono::seconds(2);  // "slow" has its 29 events long before, even on a loaded machine
  o.retry_base = o.retry_max = std::chrono::milliseconds(20);  // far fewer than 1,000 attempts in the test
  notify::Dispatcher d(*engine, *store, o, with_hung_receivers(targets, std::chrono::milliseconds(100), started), {}, &feed);
  d.put("hung", hook(R"(,"maxAttempts":1000)"));
  d.put("slow", hook(R"(,"maxAttempts":1000)"));
  // 30 records: "slow" has all but the second (its checkpoint stays at the first), "hung" none.
  std::vector<notify::stream::StreamRecord> records;
  for (int i = 1; i <= 30; ++i) {
    char seq[24];
    std::snprintf(seq, sizeof seq, "%020d", i);
    records.push_back(i == 2 ? report_record(seq, "main", 1, "held") : report_record(seq, "n" + std::to_string(i % 10), (i + 9) / 10));
  }
  EXPECT_EQ(feed.take("shard", records), 0u);
  ASSERT_TRUE(feed.pressed());
  ASSERT_TRUE(eventually([&] { return targets.delivered("slow").size() == 29; }));
  ASSERT_TRUE(eventually([&] { return dead_letters_with(*store, "hung", "spilled:") > 0; }));
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // rounds of the trimmer with "slow" holding back
  EXPECT_EQ(dead_letters_with(*store, "slow", ""), 0u);
  EXPECT_EQ(targets.delivered("slow").size(), 29u);
  released = true;
  EXPECT_TRUE(eventually([&] { return targets.delivered("slow").size() == 30; }));
}

// After the stream's reading stalled (the feed full), the feed hands over events written long
// before. A registration is spilled for an event it has held spill_after, not for one that old:
// one that keeps up is not spilled for the stall.
TEST_P(DispatcherTest, EventsWrittenLongBeforeTheFeedHadThemSpillNoRegistrationThatKeepsUp) {
  using stream_records::report_record;
  dispatcher.reset();
  notify::stream::StreamFeedOptions feed_options;
  feed_options.shard_records = 40;  // nearly full at 30 records not done
  notify::stream::StreamFeed feed(feed_options);
  std::atomic<bool> released{false};
  targets.set_script([&](const std::string&, const std::string& thing, int) {
    return thing == "held" && !released ? Outcome::retry : Outcome::delivered;
  });
  notify::DispatcherOptions o = fast_options();
  o.spill_after = std::chrono::seconds(2);
  o.retry_base = o.retry_max = std::chrono::milliseconds(20);
  notify::Dispatcher d(*engine, *store, o, targets.factory(), {}, &feed);
  d.put("slow", hook(R"(,"maxAttempts":1000)"));
  // 35 records written a minute ago: "slow" delivers all but the second at once, and holds the
  // feed back at the first while it retries that one.
  std::vector<notify::stream::StreamRecord> records;
  for (int i = 1; i <= 35; ++i) {
    char seq[24];
    std::snprintf(seq, sizeof seq, "%020d", i);
    const std::string thing = i == 2 ? "held" : "lamp";
    records.push_back(report_record(seq, "n" + std::to_string(i % 10), (i + 9) / 10, thing, std::chrono::minutes(1)));
  }
  EXPECT_EQ(feed.take("shard", records), 0u);
  ASSERT_TRUE(eventually([&] { return targets.delivered("slow").size() == 34; }));
  EXPECT_TRUE(feed.pressed());
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // rounds of the trimmer with "slow" holding back
  EXPECT_EQ(dead_letters_with(*store, "slow", ""), 0u);
  released = true;
  EXPECT_TRUE(eventually([&] { return targets.delivered("slow").size() == 35; }));
  EXPECT_EQ(dead_letters_with(*store, "slow", ""), 0u);
}

// On a table's stream a write taken later may be older than one taken before it (a shard read
// again after a takeover): an event past maxAgeSeconds is dead-lettered while a newer one held
// before it is not.
TEST_P(DispatcherTest, AnOldEventBehindANewerOneExpiresOnTime) {
  using stream_records::report_record;
  dispatcher.reset();
  notify::stream::StreamFeed feed;
  notify::DispatcherOptions o = fast_options();
  o.concurrency = 1;  // the newer event is in flight, to a receiver that never answers; the old one waits
  std::atomic<int> started{0};
  notify::Dispatcher d(*engine, *store, o, with_hung_receivers(targets, std::chrono::hours(1), started), {}, &feed);
  d.put("hung", hook(R"(,"maxAttempts":1000,"maxAgeSeconds":60)"));
  std::vector<notify::stream::StreamRecord> records{report_record("00000000000000000001", "fresh", 1, "lamp"),
                                                    report_record("00000000000000000002", "old", 1, "lamp", std::chrono::hours(2))};
  EXPECT_EQ(feed.take("shard", records), 0u);
  ASSERT_TRUE(eventually([&] { return dead_letters_with(*store, "hung", "expired:") == 1; }));
  std::this_thread::sleep_for(std::chrono::milliseconds(200));  // sweeps that must leave the fresh one
  EXPECT_EQ(dead_letters_with(*store, "hung", "expired:"), 1u);
}

INSTANTIATE_TEST_SUITE_P(Stores, DispatcherTest, testing::Values("memory", "sqlite"),
                         [](const auto& info) { return info.param; });

}  // namespace

namespace {

// A feed entry no write would produce (written straight into the outbox table) is logged and
// passed over; the entries after it are delivered.
TEST(DispatcherFeed, AnUnreadableEntryIsSkipped) {
  const auto dir = std::filesystem::temp_directory_path() / ("dispatcher-feed-" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  ds::SqliteOptions o;
  o.path = (dir / "shadows.db").string();
  auto store = ds::open_sqlite_store(o);
  ds::Engine engine(*store);
  ScriptedTargets targets;
  std::vector<std::string> logged;
  std::mutex log_mutex;
  {
    notify::Dispatcher dispatcher(engine, *store, fast_options(), targets.factory(),
                                  [&](bool, std::string_view message, auto) {
                                    std::lock_guard lock(log_mutex);
                                    logged.emplace_back(message);
                                  });
    dispatcher.put("r", hook());
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open(o.path.c_str(), &db), SQLITE_OK);
    sqlite3_busy_timeout(db, 5000);
    ASSERT_EQ(sqlite3_exec(db, "INSERT INTO feed(thing, name, entry) VALUES ('t', 'main', 'not json')", nullptr, nullptr,
                           nullptr),
              SQLITE_OK);
    sqlite3_close(db);
    report(engine, "t", "main", 1);
    ASSERT_TRUE(eventually([&] { return targets.delivered("r").size() == 1; }));
    ASSERT_TRUE(eventually([&] { return store->read_feed(0, 10).empty(); }));  // passed, so trimmed
  }
  std::lock_guard lock(log_mutex);
  EXPECT_NE(std::find(logged.begin(), logged.end(), "an unreadable change-feed entry was skipped"), logged.end());
  store.reset();
  std::filesystem::remove_all(dir);
}

}  // namespace
