// Bulk jobs on every store that keeps them (memory, SQLite, DynamoDB): the job store's contract, the
// request's validation, and the runner: targets fixed at start, skipped at their turn, failures,
// cancel, limits, and a resume that writes no target twice.
#include "deviceshadow/engine.hpp"
#include "deviceshadow/error.hpp"
#include "deviceshadow/json.hpp"
#include "jobs/runner.hpp"
#include "query/index.hpp"
#include "support/forwarding_store.hpp"
#include "support/stores.hpp"

#include <atomic>
#include <chrono>
#include <thread>

namespace {

namespace jobs = ds::jobs;
using namespace std::chrono_literals;

struct Fixture : testing::TestWithParam<StoreKind> {
  TempDir dir;
  // Without the DynamoDB Local of scripts/with-services.sh a DynamoDB case is skipped (SetUp), on
  // a memory store so that the members can still be built.
  const bool skipped = GetParam().needs_dynamodb && dynamodb_endpoint().empty();
  std::unique_ptr<ds::StoreBackend> backend = skipped ? ds::make_memory_store() : GetParam().open(dir.path());
  ds::JobStore& job_store = *backend->job_store();
  ds::EngineOptions engine_options() {
    ds::EngineOptions o;
    o.document.limits.max_state_bytes = 200;  // lets a test make a target's write fail
    return o;
  }
  ds::Engine engine{*backend, engine_options()};

  void SetUp() override {
    if (skipped) GTEST_SKIP() << "no DynamoDB endpoint (run through scripts/with-services.sh)";
  }
  ~Fixture() override {
    if (!skipped && GetParam().destroy) GetParam().destroy(dir.path());
  }

  void report(const std::string& thing, const char* state_json) {
    ds::UpdateRequest r;
    r.key = {thing, "main"};
    r.state = ds::parse_json(state_json).as_object();
    engine.update(r);
  }
  void desire(const std::string& thing, const char* state_json) {
    ds::UpdateRequest r;
    r.key = {thing, "main"};
    r.section = ds::Section::desired;
    r.state = ds::parse_json(state_json).as_object();
    engine.update(r);
  }
  jobs::JobSpec spec(const char* body) {
    return jobs::parse_job_request(body, engine.options().document, {}, engine.options().clock());
  }
  // The history events of a shadow written with `token`.
  std::size_t events_with(const std::string& thing, const std::string& token) {
    std::size_t n = 0;
    for (const ds::HistoryEvent& e : engine.history({thing, "main"}, {.limit = 1000}).events) {
      const ds::json::value v = ds::parse_json(e.json);
      if (const ds::json::value* t = v.as_object().if_contains("clientToken"); t && t->as_string() == token) ++n;
    }
    return n;
  }
  // Writes the job's desired state {"go":true} to `key` with its client token, as its runner did.
  void write_as_job(const ds::ShadowKey& key, const std::string& token) {
    ds::ShadowUpdate u;
    u.key = key;
    u.desired = ds::SectionUpdate{ds::parse_json(R"j({"go":true})j").as_object()};
    u.client_token = token;
    engine.update(u);
  }
  // Stores job `id` as a crashed runner left it, the outcome of its first `next` targets recorded,
  // and runs it to its end in a new runner (pages of 5 targets).
  jobs::JobProgress resume_crashed(const std::string& id, const jobs::JobSpec& s, std::uint64_t targets,
                                   std::uint64_t next) {
    jobs::JobProgress p;
    p.targets = targets;
    p.succeeded = next;
    p.next = next;
    p.runs = 1;
    p.created_ns = 1;
    job_store.create_job({id, jobs::render_spec(s), jobs::render_progress(p), true, 1, "dead-runner", INT64_MAX}, 10);
    jobs::JobRunner runner(engine, job_store, {.page_size = 5});
    runner.start();
    return finished(runner, id);
  }
  jobs::JobProgress finished(jobs::JobRunner& runner, const std::string& id) {
    jobs::JobProgress p;
    for (int i = 0; i < 3000; ++i) {  // a bound on liveness, not a timing test
      p = jobs::progress_of(runner.get(id)->progress);
      if (p.finished()) break;
      std::this_thread::sleep_for(10ms);
    }
    return p;
  }
};

TEST_P(Fixture, JobStoreKeepsJobsByRevisionAndTargetsByPage) {
  ds::JobRecord job{"0000000000000001-aaaaaaaa", "{}", "{}", true, 1, "me", 5};
  job_store.create_job(job, 10);
  job_store.create_job(job, 10);  // the same again: a resent request, taken for the first
  ds::JobRecord other = job;
  other.spec = R"j({"other":1})j";
  EXPECT_THROW(job_store.create_job(other, 10), ds::Error);
  ds::JobRecord next = job;
  next.progress = R"j({"x":1})j";
  next.revision = 2;
  EXPECT_FALSE(job_store.update_job(next, 2));
  EXPECT_TRUE(job_store.update_job(next, 1));
  EXPECT_EQ(*job_store.job(job.id), next);
  EXPECT_FALSE(job_store.update_job(next, 1));  // a stale writer loses
  job_store.create_job({"0000000000000002-bbbbbbbb", "{}", "{}", false, 1, "", 0}, 10);
  job_store.create_job({"0000000000000003-cccccccc", "{}", "{}", true, 1, "", 0}, 10);
  auto ids = [](const std::vector<ds::JobRecord>& v) {
    std::vector<std::string> out;
    for (const auto& j : v) out.push_back(j.id.substr(15));
    return out;
  };
  EXPECT_EQ(ids(job_store.jobs("", 2)), (std::vector<std::string>{"3-cccccccc", "2-bbbbbbbb"}));
  EXPECT_EQ(ids(job_store.jobs("0000000000000002-bbbbbbbb", 10)), (std::vector<std::string>{"1-aaaaaaaa"}));
  EXPECT_EQ(ids(job_store.active_jobs()), (std::vector<std::string>{"1-aaaaaaaa", "3-cccccccc"}));
  const std::vector<ds::ShadowKey> page{{"a \"quoted\" thing#1", "main"}, {"b", "other"}};
  job_store.put_targets(job.id, 0, page);
  EXPECT_EQ(job_store.targets(job.id, 0), page);
  EXPECT_TRUE(job_store.targets(job.id, 1).empty());
  // A page of things as long as they may be, each byte escaped: more than one DynamoDB item holds.
  std::vector<ds::ShadowKey> long_page;
  for (int i = 0; i < 1000; ++i) long_page.push_back({std::string(508, '"') + std::to_string(1000 + i), "main"});
  job_store.put_targets(job.id, 2, long_page);
  EXPECT_EQ(job_store.targets(job.id, 2), long_page);
  job_store.remove_job(job.id);
  EXPECT_FALSE(job_store.job(job.id).has_value());
  EXPECT_TRUE(job_store.targets(job.id, 0).empty());
  EXPECT_FALSE(job_store.job("nope").has_value());
}

// At most `max_active` jobs are active: the store counts them as it creates one, atomically (on
// DynamoDB among every shadowd on the table); finished jobs take no place, a job that finishes
// gives its place back, and a resent creation is not refused for the place its job holds.
TEST_P(Fixture, AJobStoreCreatesNoActiveJobPastItsLimit) {
  auto job = [](int n, bool active) {
    return ds::JobRecord{"000000000000000" + std::to_string(n) + "-aaaaaaaa", "{}", "{}", active, 1, "", 0};
  };
  auto refused = [&](const ds::JobRecord& j, std::size_t max) {
    try {
      job_store.create_job(j, max);
    } catch (const ds::Error& e) {
      return e.code() == ds::ErrorCode::throttled && !job_store.job(j.id);
    }
    return false;
  };
  job_store.create_job(job(1, true), 2);
  job_store.create_job(job(2, true), 2);
  job_store.create_job(job(3, false), 2);  // finished: takes no place
  EXPECT_TRUE(refused(job(4, true), 2));
  ds::JobRecord done = job(1, false);
  done.revision = 2;
  EXPECT_FALSE(job_store.update_job(done, 2));  // a stale write changes nothing
  EXPECT_TRUE(refused(job(4, true), 2));
  EXPECT_TRUE(job_store.update_job(done, 1));
  job_store.create_job(job(4, true), 2);
  EXPECT_TRUE(refused(job(5, true), 2));
  job_store.create_job(job(4, true), 2);  // resent at the limit: it is the job that holds the place
  // Creations at once: exactly as many as there are places.
  for (int n : {2, 4}) {
    ds::JobRecord finished = job(n, false);
    finished.revision = 2;
    ASSERT_TRUE(job_store.update_job(finished, 1));
  }
  std::atomic<int> created{0}, throttled{0};
  std::vector<std::thread> threads;
  for (int n = 5; n < 9; ++n) {
    threads.emplace_back([&, n] {
      try {
        job_store.create_job(job(n, true), 3);
        ++created;
      } catch (const ds::Error& e) {
        if (e.code() == ds::ErrorCode::throttled) ++throttled;
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(created.load(), 3);
  EXPECT_EQ(throttled.load(), 1);
}

// A crash during a job's selection leaves target pages with no job; a starting runner drops
// those of selections begun over an hour ago, and keeps the pages of stored jobs and of ids too
// recent to be over (on DynamoDB every page stays: finding them would scan the table).
TEST_P(Fixture, AStartingRunnerDropsTheTargetListsACrashLeftBehind) {
  const std::vector<ds::ShadowKey> page{{"t1", "main"}};
  const std::string left = "0000000000000005-dddddddd", stored = "0000000000000006-eeeeeeee",
                    recent = "ffffffffffffffff-ffffffff";
  job_store.create_job({stored, "{}", "{}", false, 1, "", 0}, 10);
  for (const std::string& id : {left, stored, recent}) job_store.put_targets(id, 0, page);
  jobs::JobRunner runner(engine, job_store, {});
  runner.start();
  EXPECT_EQ(job_store.targets(left, 0).empty(), !GetParam().needs_dynamodb);
  EXPECT_EQ(job_store.targets(stored, 0), page);
  EXPECT_EQ(job_store.targets(recent, 0), page);
}

TEST_P(Fixture, RequestsAreValidatedBeforeAnythingIsWritten) {
  auto code_of = [&](const char* body) {
    try {
      spec(body);
    } catch (const ds::Error& e) {
      return std::string(ds::code_name(e.code())) + ":" + e.details().field;
    }
    return std::string("accepted");
  };
  EXPECT_EQ(code_of(R"j({"desired":{"a":1}})j"), "invalid_request:filter");
  EXPECT_EQ(code_of(R"j({"filter":"","desired":{"a":1}})j"), "invalid_request:filter");
  EXPECT_EQ(code_of(R"j({"filter":"eq(thing,","desired":{"a":1}})j"), "invalid_filter:");
  EXPECT_EQ(code_of(R"j({"filter":"exists(reported/a)"})j"), "invalid_request:desired");
  EXPECT_EQ(code_of(R"j({"filter":"exists(reported/a)","desired":{"a":1},"delete":"desired"})j"), "invalid_request:delete");
  EXPECT_EQ(code_of(R"j({"filter":"exists(reported/a)","delete":"reported"})j"), "invalid_request:delete");
  EXPECT_EQ(code_of(R"j({"filter":"exists(reported/a)","desired":{}})j"), "invalid_request:desired");
  EXPECT_EQ(code_of(R"j({"filter":"exists(reported/a)","desired":{"a":{"value":1,"ts":"yesterday"}}})j"), "invalid_timestamp:");
  EXPECT_EQ(code_of(R"j({"filter":"exists(reported/a)","desired":{"a":1},"ratePerSecond":0})j"), "invalid_request:ratePerSecond");
  EXPECT_EQ(code_of(R"j({"filter":"exists(reported/a)","desired":{"a":1},"ratePerSecond":"fast"})j"), "invalid_request:ratePerSecond");
  EXPECT_EQ(code_of(R"j({"filter":"exists(reported/a)","desired":{"a":1},"abortAfterFailures":0})j"), "invalid_request:abortAfterFailures");
  EXPECT_EQ(code_of(R"j({"filter":"exists(reported/a)","desired":{"a":1},"abortAfterFailures":1.5})j"), "invalid_request:abortAfterFailures");
  EXPECT_EQ(code_of(R"j({"filter":"exists(reported/a)","desired":{"a":1},"mode":"x"})j"), "invalid_request:mode");
  EXPECT_EQ(code_of(R"j({"filter":"exists(reported/a)","desired":{"a":1},"clientToken":""})j"), "invalid_request:clientToken");
  EXPECT_EQ(code_of(R"j({"filter":"exists(reported/a)","desired":{"a":1},"other":1})j"), "invalid_request:other");
  EXPECT_EQ(code_of(R"j([1])j"), "invalid_request:");
  // Past the section limit (200 bytes here) as compact JSON: every target would refuse it.
  EXPECT_EQ(code_of(R"j({"filter":"exists(reported/a)","desired":{"a":"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx","b":"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"}})j"),
            "document_too_large:");
  // Null members delete: they are not held, and not counted.
  const std::string nulls = R"j({"filter":"exists(reported/a)","desired":{"a":1)j" + [] {
    std::string members;
    for (int i = 0; i < 40; ++i) members += ",\"n" + std::to_string(i) + "\":null";
    return members;
  }() + "}}";
  EXPECT_EQ(code_of(nulls.c_str()), "accepted");
  EXPECT_EQ(code_of(R"j({"filter":"exists(reported/a)","delete":"desired","dryRun":true,"ratePerSecond":0.5})j"), "accepted");
}

TEST_P(Fixture, AJobWritesEveryTargetOnceAndSkipsThoseThatNoLongerMatch) {
  for (int i = 0; i < 30; ++i) report("t" + std::to_string(100 + i), i < 20 ? R"j({"fw":"1.2"})j" : R"j({"fw":"1.3"})j");
  jobs::JobRunner runner(engine, job_store, {.page_size = 7});
  const jobs::DryRun dry = runner.dry_run(spec(R"j({"filter":"eq(reported/fw,\"1.2\")","desired":{"fw":"1.3"}})j"), {});
  EXPECT_EQ(dry.targets, 20u);
  ASSERT_EQ(dry.sample.size(), 20u);
  EXPECT_EQ(dry.sample.front().thing, "t100");
  EXPECT_TRUE(job_store.active_jobs().empty());  // a dry run stores nothing

  // Paced so that the targets fixed at start change before their turn.
  const ds::JobRecord job = runner.create(spec(R"j({"filter":"eq(reported/fw,\"1.2\")","desired":{"fw":"1.3"},"ratePerSecond":40})j"), {});
  report("t119", R"j({"fw":"1.3"})j");  // no longer matches at its turn
  report("t125", R"j({"fw":"1.2"})j");  // matches now, but was not a target at start
  const jobs::JobProgress p = finished(runner, job.id);
  EXPECT_EQ(p.status, jobs::JobStatus::succeeded);
  EXPECT_EQ(p.targets, 20u);
  EXPECT_EQ(p.succeeded, 19u);
  EXPECT_EQ(p.skipped, 1u);
  EXPECT_EQ(p.failed, 0u);
  const std::string token = "job:" + job.id;
  for (int i = 0; i < 19; ++i) {
    const std::string thing = "t" + std::to_string(100 + i);
    EXPECT_EQ(events_with(thing, token), 1u) << thing;
    EXPECT_EQ(engine.get({thing, "main"}).record.desired.client_token, token);
  }
  EXPECT_EQ(events_with("t119", token), 0u);
  EXPECT_EQ(events_with("t125", token), 0u);
  // Dropped once finished: just after the finished progress is stored.
  bool dropped = false;
  for (int i = 0; i < 3000 && !dropped; ++i) {  // a bound on liveness, not a timing test
    dropped = job_store.targets(job.id, 0).empty();
    if (!dropped) std::this_thread::sleep_for(10ms);
  }
  EXPECT_TRUE(dropped);
}

TEST_P(Fixture, FailedTargetsAreCountedWithTheirErrorsAndCanAbortTheJob) {
  for (int i = 0; i < 10; ++i) {
    const std::string thing = "f" + std::to_string(i);
    report(thing, R"j({"on":true})j");
    if (i % 2) desire(thing, R"j({"pad":"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"})j");
  }
  jobs::JobRunner runner(engine, job_store, {.parallelism = 1, .page_size = 4});
  const char* body = R"j({"filter":"eq(reported/on,true)","desired":{"big":"yyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyy"}})j";
  jobs::JobProgress p = finished(runner, runner.create(spec(body), {}).id);
  EXPECT_EQ(p.status, jobs::JobStatus::failed);
  EXPECT_EQ(p.succeeded, 5u);
  EXPECT_EQ(p.failed, 5u);
  ASSERT_EQ(p.errors.size(), 5u);
  EXPECT_NE(p.errors[0].find("\"thing\":\"f1\""), std::string::npos) << p.errors[0];
  EXPECT_NE(p.errors[0].find("document_too_large"), std::string::npos) << p.errors[0];

  const std::string aborting = R"j({"filter":"eq(reported/on,true)","desired":{"big":"zzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzz"},"abortAfterFailures":2})j";
  p = finished(runner, runner.create(spec(aborting.c_str()), {}).id);
  EXPECT_EQ(p.status, jobs::JobStatus::failed);
  EXPECT_EQ(p.failed, 2u);
  EXPECT_LT(p.succeeded + p.failed + p.skipped, 10u);
  EXPECT_NE(p.reason.find("abortAfterFailures"), std::string::npos);
}

// A paced job's workers wait for their slots with targets taken: once the failures reach
// abortAfterFailures, none of those is written. The first two targets fail; four workers take
// the first four targets at once and wait for their slots, which they may call for out of order:
// at most one target (one slot come before the second failure's) is written, where writing those
// taken would have written at least two.
TEST_P(Fixture, APacedJobStopsAtItsFailureLimit) {
  std::vector<std::string> things;
  for (int i = 0; i < 10; ++i) {
    things.push_back("p" + std::to_string(i));
    report(things.back(), R"j({"on":true})j");
    if (i < 2) desire(things.back(), R"j({"pad":"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"})j");
  }
  jobs::JobRunner runner(engine, job_store, {.parallelism = 4});
  const char* body = R"j({"filter":"eq(reported/on,true)","desired":{"big":"yyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyy"},)j"
                     R"j("ratePerSecond":5,"abortAfterFailures":2})j";
  const std::string id = runner.create(spec(body), {}).id;
  const jobs::JobProgress p = finished(runner, id);
  EXPECT_EQ(p.status, jobs::JobStatus::failed);
  EXPECT_EQ(p.failed, 2u);
  EXPECT_LE(p.succeeded, 1u);
  std::uint64_t written = 0;
  for (const std::string& thing : things) written += events_with(thing, "job:" + id);
  EXPECT_EQ(written, p.succeeded);
}

// A cancel answers once the local runner has stopped: its counts hold every target written.
TEST_P(Fixture, ACancelAnswersWithEveryTargetWrittenCounted) {
  std::vector<std::string> things;
  for (int i = 0; i < 40; ++i) {
    things.push_back("k" + std::to_string(100 + i));
    report(things.back(), R"j({"v":1})j");
  }
  jobs::JobRunner runner(engine, job_store, {.parallelism = 4});
  const std::string id = runner.create(spec(R"j({"filter":"eq(reported/v,1)","desired":{"go":true},"ratePerSecond":20})j"), {}).id;
  std::this_thread::sleep_for(400ms);
  const jobs::JobProgress p = jobs::progress_of(runner.cancel(id).progress);
  std::uint64_t written = 0;
  for (const std::string& thing : things) written += events_with(thing, "job:" + id);
  EXPECT_EQ(p.status, jobs::JobStatus::cancelled);
  EXPECT_GT(written, 0u);
  EXPECT_EQ(p.succeeded, written);
  EXPECT_LT(written, 40u);
}

// A store whose read of the block holding `slow` takes a while, so that the workers of other
// blocks run ahead of it.
class SlowBlockStore final : public ForwardingStore {
 public:
  SlowBlockStore(ds::Store& inner, std::string slow) : ForwardingStore(inner), slow_(std::move(slow)) {}
  std::vector<ds::ShadowRecord> read(std::span<const ds::ShadowKey> keys) override {
    if (!keys.empty() && keys.front().thing == slow_) std::this_thread::sleep_for(300ms);
    return ForwardingStore::read(keys);
  }
  using ForwardingStore::read;

 private:
  std::string slow_;
};

// A failure past a block still being written aborts the job: the targets done after that block
// are counted, not judged and written again (each once, and every one written counted).
TEST_P(Fixture, AnAbortWhileAnEarlierBlockIsWrittenCountsEveryTargetAndWritesNoneTwice) {
  // Each write is seen: it desires what the shadow reports, acknowledged at once (a new desired
  // version and history event each time); a05's grows its desired state past the limit.
  std::vector<std::string> things;
  for (int i = 0; i < 40; ++i) {
    things.push_back("a" + std::string(i < 10 ? "0" : "") + std::to_string(i));
    report(things.back(), i == 5 ? R"j({"on":true})j" : R"j({"on":true,"big":"yyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyy"})j");
  }
  desire("a05", R"j({"pad":"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"})j");
  SlowBlockStore slow(*backend, "a00");
  ds::Engine slow_engine{slow, engine_options()};
  jobs::JobRunner runner(slow_engine, job_store, {.parallelism = 4});
  const char* body = R"j({"filter":"eq(reported/on,true)","desired":{"big":"yyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyy"},"abortAfterFailures":1})j";
  const ds::JobRecord job = runner.create(spec(body), {});
  const jobs::JobProgress p = finished(runner, job.id);
  EXPECT_EQ(p.status, jobs::JobStatus::failed);
  EXPECT_EQ(p.failed, 1u);
  std::uint64_t written = 0;
  for (const std::string& thing : things) {
    const std::size_t n = events_with(thing, "job:" + job.id);
    EXPECT_LE(n, 1u) << thing;
    written += n;
  }
  EXPECT_EQ(p.succeeded, written);
  EXPECT_LT(written, 39u);
}

// A job selects through a declared index as a search does: 3 targets among 20 shadows under an
// examination budget of 5, which without the index is too expensive.
TEST_P(Fixture, ASelectionReadsThroughADeclaredIndex) {
  for (int i = 0; i < 20; ++i) report("ix" + std::to_string(i), i % 7 == 0 ? R"j({"fw":"2.0"})j" : R"j({"fw":"1.0"})j");
  ds::query::IndexKeeper keeper(*backend, engine.options().document.timestamp_keys);
  engine.set_indexer(&keeper);
  keeper.declare({"reported/fw"});
  keeper.wait_until_built();
  const jobs::JobSpec fw = spec(R"j({"filter":"eq(reported/fw,\"2.0\")","desired":{"fw":"2.1"}})j");
  jobs::JobRunner indexed(engine, job_store, {.examine_budget = 5, .indexes = &keeper});
  EXPECT_EQ(indexed.dry_run(fw, {}).targets, 3u);
  jobs::JobRunner unindexed(engine, job_store, {.examine_budget = 5});
  try {
    unindexed.dry_run(fw, {});
    ADD_FAILURE() << "a selection over the budget";
  } catch (const ds::Error& e) {
    EXPECT_EQ(e.code(), ds::ErrorCode::query_too_expensive);
  }
  engine.set_indexer(nullptr);
}

TEST_P(Fixture, LimitsRefuseTooManyTargetsAndTooManyRunningJobs) {
  for (int i = 0; i < 5; ++i) report("l" + std::to_string(i), R"j({"x":1})j");
  jobs::JobRunner runner(engine, job_store, {.limits = {.max_targets = 4}, .max_active = 1});
  try {
    runner.dry_run(spec(R"j({"filter":"eq(reported/x,1)","desired":{"y":1}})j"), {});
    ADD_FAILURE() << "a dry run over the limit";
  } catch (const ds::Error& e) {
    EXPECT_EQ(e.code(), ds::ErrorCode::invalid_request);
    EXPECT_EQ(e.details().limit, 4u);
  }
  EXPECT_THROW(runner.create(spec(R"j({"filter":"eq(reported/x,1)","desired":{"y":1}})j"), {}), ds::Error);
  EXPECT_TRUE(job_store.jobs("", 10).empty());  // nothing stored, no page left behind
  const std::vector<ds::ThingPattern> two{{"l1", false}, {"l2", false}};
  const ds::JobRecord slow = runner.create(spec(R"j({"filter":"like(thing,\"l*\")","desired":{"y":2},"ratePerSecond":0.1})j"), two);
  EXPECT_EQ(jobs::progress_of(slow.progress).targets, 2u);  // the scope limits the targets
  try {
    runner.create(spec(R"j({"filter":"eq(reported/x,1)","delete":"desired"})j"), two);
    ADD_FAILURE() << "a second running job";
  } catch (const ds::Error& e) {
    EXPECT_EQ(e.code(), ds::ErrorCode::throttled);
  }
  const ds::JobRecord cancelled = runner.cancel(slow.id);
  EXPECT_EQ(jobs::progress_of(cancelled.progress).status, jobs::JobStatus::cancelled);
  const jobs::JobProgress p = finished(runner, slow.id);
  EXPECT_EQ(p.status, jobs::JobStatus::cancelled);
  EXPECT_LE(p.succeeded, 1u);
  EXPECT_EQ(jobs::progress_of(runner.cancel(slow.id).progress).status, jobs::JobStatus::cancelled);
  EXPECT_THROW(runner.cancel("0000000000000000-00000000"), ds::Error);
  // A job matching nothing succeeds at once with 0 targets.
  const ds::JobRecord none = runner.create(spec(R"j({"filter":"eq(reported/x,2)","desired":{"y":1}})j"), {});
  EXPECT_FALSE(none.active);
  EXPECT_EQ(jobs::progress_of(none.progress).status, jobs::JobStatus::succeeded);
}

// A crash left a job with its outcome recorded up to `next`, and some targets after it written
// without their outcome recorded: the resumed job writes each remaining target once.
TEST_P(Fixture, AResumedJobWritesNoTargetTwiceAndForgetsNone) {
  std::vector<ds::ShadowKey> targets;
  for (int i = 0; i < 12; ++i) {
    targets.push_back({"r" + std::to_string(10 + i), "main"});
    report(targets.back().thing, R"j({"v":1})j");
  }
  const std::string id = "0000000000000001-00000001", token = "job:" + id;
  jobs::JobSpec s = spec(R"j({"filter":"eq(reported/v,1)","desired":{"go":true}})j");
  s.client_token = token;
  job_store.put_targets(id, 0, std::span(targets).subspan(0, 5));
  job_store.put_targets(id, 1, std::span(targets).subspan(5, 5));
  job_store.put_targets(id, 2, std::span(targets).subspan(10));
  // Targets 0-5 written and 0-4 recorded; 6 and 8 written but not recorded (the page of `next`).
  for (int i : {0, 1, 2, 3, 4, 5, 6, 8}) write_as_job(targets[i], token);
  desire("r16", R"j({"go":false})j");  // someone changed it since: writing it again would show
  const jobs::JobProgress p = resume_crashed(id, s, 12, 5);
  EXPECT_EQ(p.status, jobs::JobStatus::succeeded);
  EXPECT_EQ(p.succeeded, 12u);
  EXPECT_EQ(p.runs, 2u);
  for (const ds::ShadowKey& k : targets) EXPECT_EQ(events_with(k.thing, token), 1u) << k.thing;
  EXPECT_EQ(engine.get({"r16", "main"}).record.desired.state_json, R"j({"go":false})j");
}

// A job stopped with `next` inside a page: the chunk it stopped in runs from `next`, and the
// targets written after `next` up to that chunk's end are found written, not written again.
TEST_P(Fixture, AJobResumedInsideAPageChecksTheWholeChunkItStoppedIn) {
  std::vector<ds::ShadowKey> targets;
  for (int i = 0; i < 60; ++i) {  // reporting what the job desires: each write is a new event
    targets.push_back({"p" + std::to_string(10 + i), "main"});
    report(targets.back().thing, R"j({"v":1,"go":true})j");
  }
  const std::string id = "0000000000000002-00000002", token = "job:" + id;
  jobs::JobSpec s = spec(R"j({"filter":"eq(reported/v,1)","desired":{"go":true}})j");
  s.client_token = token;
  for (std::size_t page = 0; page * 5 < targets.size(); ++page) {
    job_store.put_targets(id, page, std::span(targets).subspan(page * 5, 5));
  }
  // Targets 0-6 written and recorded; 55 and 56 written in the chunk [7, 57) but not recorded.
  for (int i : {0, 1, 2, 3, 4, 5, 6, 55, 56}) write_as_job(targets[i], token);
  const jobs::JobProgress p = resume_crashed(id, s, 60, 7);
  EXPECT_EQ(p.status, jobs::JobStatus::succeeded);
  EXPECT_EQ(p.succeeded, 60u);
  for (const ds::ShadowKey& k : targets) EXPECT_EQ(events_with(k.thing, token), 1u) << k.thing;
}

// A store whose every read of several shadows at once (a job's block of targets) takes a
// while: a job's chunk lasts seconds.
class SlowBlocksStore final : public ForwardingStore {
 public:
  using ForwardingStore::ForwardingStore;
  std::vector<ds::ShadowRecord> read(std::span<const ds::ShadowKey> keys) override {
    if (keys.size() > 1) std::this_thread::sleep_for(50ms);
    return ForwardingStore::read(keys);
  }
  using ForwardingStore::read;
};

// A job cancelled by another shadowd stops within about a second, not at the end of the chunk
// its runner was writing (here 200 targets, about 2.5 s).
TEST_P(Fixture, AJobCancelledElsewhereStopsWithinASecond) {
  std::vector<std::string> things;
  for (int i = 0; i < 200; ++i) {
    things.push_back("c" + std::to_string(1000 + i));
    report(things.back(), R"j({"v":1,"go":true})j");
  }
  SlowBlocksStore slow(*backend);
  ds::Engine slow_engine{slow, engine_options()};
  jobs::JobRunner running(slow_engine, job_store, {.parallelism = 1, .page_size = 100, .exclusive_store = false, .owner = "running"});
  jobs::JobRunner elsewhere(engine, job_store, {.exclusive_store = false, .owner = "elsewhere"});
  const std::string id = running.create(spec(R"j({"filter":"eq(reported/v,1)","desired":{"go":true}})j"), {}).id;
  std::this_thread::sleep_for(200ms);
  EXPECT_EQ(jobs::progress_of(elsewhere.cancel(id).progress).status, jobs::JobStatus::cancelled);
  // The cancel is recorded at once; the runner records what it wrote once it has stopped.
  auto written = [&] {
    std::uint64_t n = 0;
    for (const std::string& thing : things) n += events_with(thing, "job:" + id);
    return n;
  };
  jobs::JobProgress p;
  for (int i = 0; i < 300; ++i) {  // a bound on liveness, not a timing test
    p = jobs::progress_of(running.get(id)->progress);
    if (p.succeeded > 0 && p.succeeded == written()) break;
    std::this_thread::sleep_for(100ms);
  }
  EXPECT_EQ(p.status, jobs::JobStatus::cancelled);
  EXPECT_EQ(p.succeeded, written());
  EXPECT_LT(p.succeeded, 150u) << "stopped only at the end of its chunk";
}

// On a store shared by several processes a runner takes up an active job only when its lease
// has expired (or is its own), and holds it with a lease of its own.
TEST_P(Fixture, ARunnerOnASharedStoreTakesOverOnlyJobsWhoseLeaseExpired) {
  auto stored_job = [&](const std::string& id, std::int64_t lease_expires_ns) {
    const std::vector<ds::ShadowKey> targets{{"l" + id.substr(17), "main"}};
    report(targets[0].thing, R"j({"v":1})j");
    jobs::JobSpec s = spec(R"j({"filter":"eq(reported/v,1)","desired":{"go":true}})j");
    s.client_token = "job:" + id;
    job_store.put_targets(id, 0, targets);
    jobs::JobProgress p;
    p.targets = 1;
    p.runs = 1;
    p.created_ns = 1;
    job_store.create_job({id, jobs::render_spec(s), jobs::render_progress(p), true, 1, "other-runner", lease_expires_ns}, 10);
  };
  const std::string expired = "0000000000000001-00000001", held = "0000000000000002-00000002";
  stored_job(expired, 1);
  stored_job(held, INT64_MAX);
  jobs::JobRunner runner(engine, job_store, {.exclusive_store = false, .owner = "this-runner"});
  runner.start();  // takes up the jobs it may before it returns
  const jobs::JobProgress p = finished(runner, expired);
  EXPECT_EQ(p.status, jobs::JobStatus::succeeded);
  EXPECT_EQ(p.runs, 2u);
  EXPECT_EQ(events_with("l00000001", "job:" + expired), 1u);
  const ds::JobRecord other = *job_store.job(held);
  EXPECT_EQ(other.owner, "other-runner");
  EXPECT_EQ(other.revision, 1u);
  EXPECT_EQ(events_with("l00000002", "job:" + held), 0u);
}

// A job keeps the patterns of the token that started it as they were: an exact pattern ending in
// `*` stays exact. A token limited to `*` covers every job, also one started without limits.
TEST(JobScope, RoundTripsAndCovers) {
  const ds::ThingPattern star_exact{"a*", false}, prefix{"b", true}, every{"", true}, house{"house-", true};
  jobs::JobSpec s;
  s.filter = "true";
  s.client_token = "t";
  s.scope = {star_exact, prefix};
  EXPECT_EQ(jobs::spec_of(jobs::render_spec(s)).scope, s.scope);
  s.scope.clear();  // as an earlier build stored it: "text*" strings
  std::string earlier = jobs::render_spec(s);
  earlier.insert(earlier.size() - 1, R"j(,"scope":["b*","c"])j");
  EXPECT_EQ(jobs::spec_of(earlier).scope, (std::vector<ds::ThingPattern>{prefix, {"c", false}}));
  s.scope = {star_exact, prefix};

  const std::vector<ds::ThingPattern> unscoped;
  EXPECT_TRUE(jobs::covers({&every, 1}, unscoped));
  EXPECT_FALSE(jobs::covers({&house, 1}, unscoped));
  EXPECT_TRUE(jobs::covers(unscoped, s.scope));
  EXPECT_TRUE(jobs::covers({&every, 1}, s.scope));
  EXPECT_TRUE(jobs::covers(s.scope, s.scope));
  EXPECT_FALSE(jobs::covers({&prefix, 1}, s.scope));  // "b*" does not cover the exact "a*"
  const ds::ThingPattern a_prefix{"a", true};
  EXPECT_FALSE(jobs::covers({&star_exact, 1}, {&a_prefix, 1}));  // nor an exact "a*" every "a…"
}

INSTANTIATE_TEST_SUITE_P(Stores, Fixture, testing::ValuesIn(all_store_kinds()), store_kind_name);

}  // namespace
