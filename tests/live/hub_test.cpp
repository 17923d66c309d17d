// The live hub on its own, with a fake stream: which writes a stream gets (shadow, token scope,
// selection), what it sends (SSE messages of the CloudEvent), resume (replay, then live, no
// duplicate; a gap), overflow, the stream limit, history across shadows in time order.
#include "live/hub.hpp"

#include "deviceshadow/error.hpp"
#include "deviceshadow/memory_store.hpp"
#include "deviceshadow/sqlite_store.hpp"
#include "notify/registration.hpp"

#include <gtest/gtest.h>

#include <filesystem>
#include <mutex>
#include <thread>

namespace ds = deviceshadow;
namespace live = deviceshadow::live;
using Push = ds::http::ResponseStream::Push;

namespace {

// A stream that keeps what is pushed (none is written); as the transport's, refuses a push past
// `room` bytes unless it is the first.
class FakeStream final : public ds::http::ResponseStream {
 public:
  explicit FakeStream(std::size_t room = SIZE_MAX) : room_(room) {}
  using ResponseStream::push;
  Push push(ds::http::SharedBytes bytes) override {
    std::lock_guard lock(mutex_);
    if (ended_) return Push::ended;
    if (size_ > 0 && size_ + bytes->size() > room_) return Push::full;
    size_ += bytes->size();
    messages_.emplace_back(*bytes);
    pushed_.push_back(std::move(bytes));
    return Push::queued;
  }
  // What was pushed, as pushed (shared with other streams or not).
  std::vector<ds::http::SharedBytes> pushed() const {
    std::lock_guard lock(mutex_);
    return pushed_;
  }
  // As the transport's: the stream ends later, on another thread (end()).
  void finish(std::string_view last) override {
    std::lock_guard lock(mutex_);
    if (ended_) return;
    ended_ = true;
    if (!last.empty()) messages_.emplace_back(last);
  }
  // The transport's end of the stream: runs the on_end callbacks.
  void end() {
    std::vector<std::function<void()>> callbacks;
    {
      std::lock_guard lock(mutex_);
      ended_ = true;
      callbacks.swap(on_end_);
    }
    for (auto& c : callbacks) c();
  }
  bool ended() const override {
    std::lock_guard lock(mutex_);
    return ended_;
  }
  bool wait_below(std::size_t, std::chrono::milliseconds) override { return !ended(); }
  void on_end(std::function<void()> callback) override {
    {
      std::lock_guard lock(mutex_);
      if (!ended_) return on_end_.push_back(std::move(callback));
    }
    callback();
  }
  std::vector<std::string> messages() const {
    std::lock_guard lock(mutex_);
    return messages_;
  }
  // The ids of the messages, in order ("" for a message without one).
  std::vector<std::string> ids() const {
    std::vector<std::string> out;
    for (const std::string& m : messages()) {
      out.push_back(m.starts_with("id: ") ? m.substr(4, m.find('\n') - 4) : "");
    }
    return out;
  }

 private:
  mutable std::mutex mutex_;
  std::size_t room_;
  std::size_t size_ = 0;
  std::vector<ds::http::SharedBytes> pushed_;
  bool ended_ = false;
  std::vector<std::string> messages_;
  std::vector<std::function<void()>> on_end_;
};

class HubTest : public ::testing::Test {
 protected:
  std::unique_ptr<ds::Store> store = ds::make_memory_store();
  ds::Engine engine{*store};
  live::Hub hub{engine, {.heartbeat = std::chrono::hours(1), .stream_buffer = 1 << 20, .max_streams = 3, .max_replays = 2}};

  std::string report(const std::string& thing, const std::string& state, const std::string& name = "main") {
    ds::UpdateRequest r;
    r.key = {thing, name};
    r.section = ds::Section::reported;
    r.state = ds::parse_json(state).as_object();
    engine.update(r);
    return engine.history(r.key, {.limit = 1}).events.at(0).id;
  }

  std::shared_ptr<FakeStream> open(live::StreamRequest request, std::size_t room = SIZE_MAX) {
    auto stream = std::make_shared<FakeStream>(room);
    auto admission = hub.admit(request.after.has_value());
    EXPECT_TRUE(admission);
    hub.serve(stream, std::move(request), std::move(admission));
    return stream;
  }

  static live::StreamRequest one(const std::string& thing, std::string selection = "{}") {
    live::StreamRequest r;
    r.shadow = ds::ShadowKey{thing, "main"};
    r.selection = ds::notify::parse_selection(ds::parse_json(selection).as_object());
    return r;
  }
  static live::StreamRequest every(std::string selection = "{}") {
    live::StreamRequest r;
    r.selection = ds::notify::parse_selection(ds::parse_json(selection).as_object());
    return r;
  }
};

TEST(ResumePoint, IsAnEventIdOrATime) {
  live::ResumePoint id = live::parse_resume_point("01795446891661263619#D12", "after");
  EXPECT_EQ(id.ns, 1795446891661263619);
  EXPECT_EQ(id.id, "01795446891661263619#D12");
  live::ResumePoint time = live::parse_resume_point("2026-11-23T15:14:51.5Z", "after");
  EXPECT_EQ(time.ns, 1795446891500000000);
  EXPECT_TRUE(time.id.empty());
  for (const char* bad : {"", "yesterday", "1795446891661263619#D1", "01795446891661263619#Q1", "01795446891661263619#D",
                          "99999999999999999999#R1"}) {
    try {
      live::parse_resume_point(bad, "after");
      ADD_FAILURE() << bad;
    } catch (const ds::Error& e) {
      EXPECT_EQ(e.code(), ds::ErrorCode::invalid_request) << bad;
    }
  }
}

TEST_F(HubTest, AStreamGetsItsShadowsWritesAsSseMessages) {
  auto stream = open(one("t1"));
  const std::string first = report("t1", R"({"a":1})");
  report("t2", R"({"a":1})");
  report("t1", R"({"a":2})", "other");
  ASSERT_EQ(stream->messages().size(), 1u);
  const std::string m = stream->messages()[0];
  EXPECT_EQ(m.substr(0, m.find("data: ")), "id: " + first + "\nevent: change\n");
  EXPECT_TRUE(m.ends_with("}}\n\n")) << m;
  EXPECT_NE(m.find(R"("reported":{"version":1,"old":{},"new":{"a":1},"diff":[)"), std::string::npos) << m;
  EXPECT_EQ(m.find("registration"), std::string::npos) << m;
  engine.remove({"t1", "main"});
  ASSERT_EQ(stream->messages().size(), 2u);
  EXPECT_NE(stream->messages()[1].find("\nevent: deleted\n"), std::string::npos);
}

// A write is rendered once for every stream that wants it the same way: they queue one buffer.
TEST_F(HubTest, StreamsWantingAWriteAlikeShareOneMessage) {
  auto a = open(every());
  auto b = open(one("t1"));
  auto c = open(every(R"({"include":["new"]})"));
  report("t1", R"({"a":1})");
  ASSERT_EQ(a->pushed().size(), 1u);
  ASSERT_EQ(b->pushed().size(), 1u);
  ASSERT_EQ(c->pushed().size(), 1u);
  EXPECT_EQ(a->pushed()[0], b->pushed()[0]);  // the same bytes, not a copy
  EXPECT_NE(a->pushed()[0], c->pushed()[0]);  // another kind of stream: its own rendering
  EXPECT_NE(*a->pushed()[0], *c->pushed()[0]);
}

TEST_F(HubTest, SelectionAndScopeDecideWhatAStreamOfEveryShadowGets) {
  live::StreamRequest request = every(R"({"match":"^h.*#main$","sections":"reported","paths":["/temp"],"include":["new"]})");
  request.scope = {{"house-", true}, {"hall", false}};
  auto stream = open(std::move(request));
  report("garage", R"({"temp":1})");        // outside the scope
  report("hx", R"({"temp":1})");            // matched, but outside the scope
  report("house-1", R"({"hum":1})");       // not at /temp
  const std::string wanted = report("house-1", R"({"temp":2})");
  report("hall", R"({"temp":3})", "aux");  // not matched
  ASSERT_EQ(stream->ids(), std::vector<std::string>{wanted});
  const std::string m = stream->messages()[0];
  EXPECT_NE(m.find(R"("reported":{"version":2,"new":{"hum":1,"temp":2}})"), std::string::npos) << m;
}

TEST_F(HubTest, AFilteredStreamGetsOnlyWritesAfterWhichTheShadowPasses) {
  live::StreamRequest request = every();
  live::set_filter(request.selection, "gt(reported/v,10)");
  auto stream = open(std::move(request));
  live::StreamRequest per_write = one("t1");  // time:now, parsed per write: the write's time
  live::set_filter(per_write.selection, "and(gt(reported/v,10),gt(_modified,time:now-PT1H))");
  auto per_write_stream = open(std::move(per_write));
  report("t1", R"({"v":5})");
  const std::string over = report("t1", R"({"v":11})");
  const std::string other = report("t1", R"({"w":1})");  // v is still 11 after it
  report("t1", R"({"v":3})");
  const std::string t2 = report("t2", R"({"v":20})");
  report("t3", R"({"v":"text"})");
  engine.remove({"t2", "main"});  // no section left: nothing to compare
  EXPECT_EQ(stream->ids(), (std::vector<std::string>{over, other, t2}));
  EXPECT_EQ(per_write_stream->ids(), (std::vector<std::string>{over, other}));
}

TEST_F(HubTest, ABadFilterIsRefusedWithItsOffset) {
  ds::notify::Registration selection;
  try {
    live::set_filter(selection, "gt(reported/v,10");
    ADD_FAILURE() << "no error";
  } catch (const ds::Error& e) {
    EXPECT_EQ(e.code(), ds::ErrorCode::invalid_filter);
    EXPECT_EQ(e.details().offset, 16u);
  }
  EXPECT_TRUE(selection.filter.empty());
  live::set_filter(selection, "");
  EXPECT_TRUE(selection.filter.empty());
}

TEST_F(HubTest, AFilteredResumeJudgesReplayedEventsOnTheShadowAsItIsNow) {
  const std::string a1 = report("a", R"({"v":20})");
  const std::string a2 = report("a", R"({"v":1})");
  report("a", R"({"v":30})");
  report("b", R"({"v":20})");
  report("b", R"({"v":1})");
  live::StreamRequest request = every();
  live::set_filter(request.selection, "gt(reported/v,10)");
  request.after = live::parse_resume_point("2000-01-01T00:00:00Z", "after");
  auto stream = open(std::move(request));
  std::vector<std::string> ids = stream->ids();
  ASSERT_EQ(ids.size(), 4u);  // the gap, then a's three writes (a passes now, b does not)
  EXPECT_EQ(ids[0], "");
  EXPECT_EQ(ids[1], a1);
  EXPECT_EQ(ids[2], a2);
  const std::string live_b = report("b", R"({"v":40})");  // live: judged on the write's result
  report("a", R"({"v":2})");
  EXPECT_EQ(stream->ids().back(), live_b);
  EXPECT_EQ(stream->ids().size(), 5u);
}

TEST_F(HubTest, ResumeReplaysHistoryThenGoesLiveWithoutDuplicates) {
  std::vector<std::string> ids;
  for (int i = 0; i < 4; ++i) ids.push_back(report("t1", R"({"n":)" + std::to_string(i) + "}"));
  live::StreamRequest request = one("t1");
  request.after = live::parse_resume_point(ids[1], "after");
  auto stream = open(std::move(request));
  EXPECT_EQ(stream->ids(), (std::vector<std::string>{ids[2], ids[3]}));
  EXPECT_NE(stream->messages()[0].find(R"("truncated":true)"), std::string::npos);  // history holds no states
  EXPECT_NE(stream->messages()[0].find(R"("reported":{"version":3,"diff":[)"), std::string::npos);
  ids.push_back(report("t1", R"({"n":4})"));
  EXPECT_EQ(stream->ids(), (std::vector<std::string>{ids[2], ids[3], ids[4]}));
  EXPECT_EQ(hub.stats().replays, 1u);
}

TEST_F(HubTest, APointOlderThanHistoryGivesAGapFirst) {
  const std::string first = report("t1", R"({"n":1})");
  live::StreamRequest request = one("t1");
  request.after = live::parse_resume_point("2000-01-01T00:00:00Z", "after");
  auto stream = open(std::move(request));
  ASSERT_EQ(stream->messages().size(), 2u);
  EXPECT_EQ(stream->messages()[0], "event: gap\ndata: {\"oldest\":\"" + first + "\"}\n\n");
  EXPECT_EQ(stream->ids()[1], first);
}

TEST_F(HubTest, EveryShadowResumesByTimeReachingBack) {
  const std::string a = report("a", R"({"n":1})");
  const std::string b = report("b", R"({"n":1})");
  live::StreamRequest request = every();
  request.after = live::parse_resume_point(b, "Last-Event-ID");
  auto stream = open(std::move(request));
  // Both are within the reach back of b's time: sent again (at least once).
  EXPECT_EQ(stream->ids(), (std::vector<std::string>{a, b}));
}

TEST_F(HubTest, ASlowReaderIsSentOverflowAndDropped) {
  auto stream = open(one("t1"), 1500);
  for (int i = 0; i < 20 && !stream->ended(); ++i) report("t1", R"({"n":)" + std::to_string(i) + "}");
  ASSERT_TRUE(stream->ended());
  EXPECT_EQ(stream->messages().back(), "event: overflow\ndata: {}\n\n");
  EXPECT_EQ(hub.stats().overflows, 1u);
  const std::size_t count = stream->messages().size();
  report("t1", R"({"n":100})");
  EXPECT_EQ(stream->messages().size(), count);
  stream->end();  // the transport ends it: the hub lets it go, and its place
  EXPECT_EQ(hub.stats().open_streams, 0u);
}

// The buffer bounds what waits: an event larger than it is still sent, live and replayed, when
// nothing else waits.
TEST_F(HubTest, AnEventLargerThanTheStreamBufferIsSentWhenNothingWaits) {
  live::Hub small{engine, {.heartbeat = std::chrono::hours(1), .stream_buffer = 4096}};
  auto serve = [&](live::StreamRequest request) {
    auto stream = std::make_shared<FakeStream>(4096);
    auto admission = small.admit(request.after.has_value());
    small.serve(stream, std::move(request), std::move(admission));
    return stream;
  };
  const std::string before = report("big", R"({"n":0})");
  auto live_stream = serve(one("big"));
  const std::string id = report("big", R"({"s":")" + std::string(5000, 'x') + R"("})");
  ASSERT_EQ(live_stream->ids(), std::vector<std::string>{id});
  EXPECT_GT(live_stream->messages().at(0).size(), 5000u);
  EXPECT_FALSE(live_stream->ended());
  live::StreamRequest resume = one("big");
  resume.after = live::parse_resume_point(before, "after");
  auto replayed = serve(std::move(resume));
  EXPECT_EQ(replayed->ids(), std::vector<std::string>{id});
  EXPECT_FALSE(replayed->ended());
  EXPECT_EQ(small.stats().overflows, 0u);
}

TEST_F(HubTest, StreamsAreLimited) {
  auto a = hub.admit(false), b = hub.admit(false), c = hub.admit(false);
  EXPECT_TRUE(a && b && c);
  EXPECT_FALSE(hub.admit(false));
  EXPECT_EQ(hub.stats().refused_streams, 1u);
  b.reset();
  EXPECT_TRUE(hub.admit(false));
  EXPECT_EQ(hub.stats().open_streams, 2u);
}

// A replay holds a worker thread: only max_replays resuming streams replay at once; a place
// among them is given back when the replay ends, before the stream does.
TEST_F(HubTest, ReplaysAreLimitedApartFromOpenStreams) {
  auto a = hub.admit(true), b = hub.admit(true);
  EXPECT_TRUE(a && b);
  EXPECT_FALSE(hub.admit(true));
  EXPECT_EQ(hub.stats().refused_streams, 1u);
  EXPECT_TRUE(hub.admit(false));  // a live stream needs no replay place
  a->end_replay();
  EXPECT_EQ(hub.stats().replaying, 1u);
  auto c = hub.admit(true);
  EXPECT_TRUE(c);
  b.reset();
  c.reset();
  EXPECT_EQ(hub.stats().replaying, 0u);
}

TEST(HistorySince, EveryShadowInTimeOrderOnMemoryAndSqlite) {
  const auto path = std::filesystem::temp_directory_path() / ("hub_test_" + std::to_string(::getpid()) + ".db");
  std::filesystem::remove(path);
  std::unique_ptr<ds::Store> stores[] = {ds::make_memory_store(), ds::open_sqlite_store(ds::SqliteOptions{.path = path.string()})};
  for (auto& store : stores) {
    auto event = [](std::int64_t ts, const char* id) { return ds::HistoryEvent{id, ts, INT64_MAX, "{}"}; };
    const std::vector<ds::ShadowHistoryEvent> events = {
        {{"b", "main"}, event(10, "00000000000000000010#R1")},
        {{"a", "main"}, event(20, "00000000000000000020#R1")},
        {{"a", "main"}, event(10, "00000000000000000010#R1")},
        {{"b", "main"}, event(30, "00000000000000000030#R2")},
    };
    store->append_history(events);
    auto ids = [](const std::vector<ds::ShadowHistoryEvent>& page) {
      std::vector<std::string> out;
      for (const auto& e : page) out.push_back(e.key.thing + e.event.id.substr(18));
      return out;
    };
    EXPECT_EQ(ids(store->history_since(0, nullptr, 10)), (std::vector<std::string>{"a10#R1", "b10#R1", "a20#R1", "b30#R2"}));
    EXPECT_EQ(ids(store->history_since(15, nullptr, 10)), (std::vector<std::string>{"a20#R1", "b30#R2"}));
    const auto first = store->history_since(0, nullptr, 1);
    EXPECT_EQ(ids(store->history_since(0, &first[0], 2)), (std::vector<std::string>{"b10#R1", "a20#R1"}));
  }
  std::filesystem::remove(path);
}


// A hub that polls its store's history every 10 ms (DynamoDB's way), with these windows.
live::HubOptions polling(std::chrono::milliseconds recent, std::chrono::milliseconds settle,
                         std::chrono::milliseconds late = std::chrono::milliseconds(120000)) {
  live::HubOptions options{.heartbeat = std::chrono::hours(1), .max_streams = 3};
  options.poll = live::HubOptions::Poll{.interval = std::chrono::milliseconds(10), .recent = recent, .settle = settle, .late = late};
  return options;
}

// Commits `like`'s change again as `thing`'s, under the id "{ns}#{tag}": a write that took its
// time `ns` and commits now (as another process's may). Returns the id.
std::string commit_late(ds::Store& store, const ds::HistoryEvent& like, std::string_view thing, std::int64_t ns,
                        std::string_view tag) {
  char id[48];
  std::snprintf(id, sizeof id, "%020lld#%.*s", static_cast<long long>(ns), static_cast<int>(tag.size()), tag.data());
  std::string json = like.json;
  json.replace(json.find(like.id), like.id.size(), id);
  if (thing != "t1") json.replace(json.find("\"t1\""), 4, "\"" + std::string(thing) + "\"");
  store.append_history(std::vector<ds::ShadowHistoryEvent>{{{std::string(thing), "main"}, {id, ns, INT64_MAX, json}}});
  return id;
}

// A hub that polls its store's history (DynamoDB's way) sees the writes another process makes on
// the same store (here another engine), and a write that commits well after its time (a history
// event appended late) when it settles; each event once.
TEST(PollingHub, SeesWritesOfAnotherEngineOnTheSameStoreOnce) {
  std::unique_ptr<ds::Store> store = ds::make_memory_store();
  ds::Engine mine{*store};
  ds::Engine other{*store};
  live::Hub hub{mine, polling(std::chrono::milliseconds(300), std::chrono::milliseconds(1500))};
  auto stream = std::make_shared<FakeStream>();
  live::StreamRequest request;
  request.selection = ds::notify::parse_selection(ds::json::object{});
  hub.serve(stream, std::move(request), hub.admit(false));
  auto eventually = [&](const std::function<bool()>& done) {
    for (int i = 0; i < 1000 && !done(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    return done();
  };
  std::this_thread::sleep_for(std::chrono::milliseconds(50));  // the poll has started
  ds::UpdateRequest r;
  r.key = {"t1", "main"};
  r.section = ds::Section::reported;
  r.state = ds::parse_json(R"({"a":1})").as_object();
  other.update(r);
  r.state = ds::parse_json(R"({"a":2})").as_object();
  other.update(r);
  const auto history = other.history(r.key, {.limit = 10, .descending = false}).events;
  ASSERT_EQ(history.size(), 2u);
  ASSERT_TRUE(eventually([&] { return stream->ids().size() >= 2; }));
  // Committed late: its time is past `recent` when it shows up; the sweep sends it.
  const std::string id = commit_late(*store, history[1], "t2", ds::now().unix_nanos() - 700'000'000, "R7");
  ASSERT_TRUE(eventually([&] { return stream->ids().size() >= 3; }));
  std::this_thread::sleep_for(std::chrono::milliseconds(1800));  // every event has settled and been swept
  EXPECT_EQ(stream->ids(), (std::vector<std::string>{history[0].id, history[1].id, id}));
  EXPECT_GT(hub.stats().polls.load(), 0u);
}

// An event that shows up after it has settled (its write held longer than `settle` between
// taking its time and committing) comes with the late sweep; once.
TEST(PollingHub, AnEventPastTheSweepComesWithTheLateSweep) {
  std::unique_ptr<ds::Store> store = ds::make_memory_store();
  ds::Engine engine{*store};
  live::Hub hub{engine, polling(std::chrono::milliseconds(100), std::chrono::milliseconds(300), std::chrono::milliseconds(2000))};
  auto stream = std::make_shared<FakeStream>();
  live::StreamRequest request;
  request.selection = ds::notify::parse_selection(ds::json::object{});
  hub.serve(stream, std::move(request), hub.admit(false));
  std::this_thread::sleep_for(std::chrono::milliseconds(1000));  // the stream is open a while
  ds::UpdateRequest r;
  r.key = {"t1", "main"};
  r.section = ds::Section::reported;
  r.state = ds::parse_json(R"({"a":1})").as_object();
  engine.update(r);
  const auto history = engine.history(r.key, {.limit = 10, .descending = false}).events;
  ASSERT_EQ(history.size(), 1u);
  // Its time is 800 ms ago, after the stream opened but past `settle` (the sweep passed it
  // already); committed now.
  const std::string id = commit_late(*store, history[0], "t2", ds::now().unix_nanos() - 800'000'000, "R7");
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  EXPECT_EQ(stream->ids(), (std::vector<std::string>{history[0].id})) << "the sweep of settled events passed it";
  for (int i = 0; i < 500 && stream->ids().size() < 2; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  std::this_thread::sleep_for(std::chrono::milliseconds(2500));  // every sweep passed it
  EXPECT_EQ(stream->ids(), (std::vector<std::string>{history[0].id, id}));
}

// Two reports of t1/main, 20 ms apart, on a polling hub; `late` is a time between them.
struct LateCommit {
  std::unique_ptr<ds::Store> store = ds::make_memory_store();
  ds::Engine engine{*store};
  live::Hub hub{engine, polling(std::chrono::milliseconds(1000), std::chrono::milliseconds(1500), std::chrono::milliseconds(3000))};
  std::int64_t late = 0;
  std::vector<ds::HistoryEvent> history;

  LateCommit() {
    ds::UpdateRequest r;
    r.key = {"t1", "main"};
    r.section = ds::Section::reported;
    r.state = ds::parse_json(R"({"a":1})").as_object();
    engine.update(r);
    late = ds::now().unix_nanos();
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    r.state = ds::parse_json(R"({"a":2})").as_object();
    engine.update(r);
    history = engine.history(r.key, {.limit = 10, .descending = false}).events;
  }
  // A stream resumed after the first report: of t1/main alone, or of every shadow.
  std::shared_ptr<FakeStream> resume(bool one_shadow) {
    auto stream = std::make_shared<FakeStream>();
    live::StreamRequest request;
    if (one_shadow) request.shadow = ds::ShadowKey{"t1", "main"};
    request.selection = ds::notify::parse_selection(ds::json::object{});
    request.after = live::parse_resume_point(history[0].id, "after");
    hub.serve(stream, std::move(request), hub.admit(true));
    return stream;
  }
  // Waits for `n` events, then until every event has settled and been swept once more.
  static void settle(const FakeStream& stream, std::size_t n) {
    for (int i = 0; i < 300 && stream.ids().size() < n; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    std::this_thread::sleep_for(std::chrono::milliseconds(1800));
  }
};

// On a store several processes write, an event may commit after a later event of its shadow
// was replayed (its write took its time first and committed late, through another process):
// when the poll then finds it, the resumed stream still gets it; the events it replayed it
// does not get twice.
TEST(PollingHub, AnEventCommittedAfterTheReplaySentALaterOneOfItsShadowStillComes) {
  LateCommit c;
  ASSERT_EQ(c.history.size(), 2u);
  const auto stream = c.resume(false);
  ASSERT_EQ(stream->ids(), (std::vector<std::string>{c.history[0].id, c.history[1].id}));  // replayed, reaching back
  const std::string id = commit_late(*c.store, c.history[1], "t1", c.late, "R7");
  LateCommit::settle(*stream, 3);
  EXPECT_EQ(stream->ids(), (std::vector<std::string>{c.history[0].id, c.history[1].id, id}));
}

// A stream of one shadow resumed: an event of the other section that took an earlier time and
// committed after the replay (a write through another shadowd) still comes, and nothing twice.
// The replay reaches back, so the resume point comes again (a client deduplicates by id).
TEST(PollingHub, AShadowsStreamStillGetsAnEventCommittedAfterTheReplayWithAnEarlierId) {
  LateCommit c;
  ASSERT_EQ(c.history.size(), 2u);
  const auto stream = c.resume(true);
  ASSERT_EQ(stream->ids(), (std::vector<std::string>{c.history[0].id, c.history[1].id}));
  const std::string id = commit_late(*c.store, c.history[1], "t1", c.late, "D1");
  LateCommit::settle(*stream, 3);
  EXPECT_EQ(stream->ids(), (std::vector<std::string>{c.history[0].id, c.history[1].id, id}));
}

// The same with events whose times lie below the resume point: one committed while no stream
// was open comes in the replay, one committed after the replay comes live; each once.
TEST(PollingHub, AShadowsStreamGetsEventsCommittedLateBelowItsResumePoint) {
  LateCommit c;
  ASSERT_EQ(c.history.size(), 2u);
  const std::int64_t point = c.history[0].timestamp_ns;
  const std::string away = commit_late(*c.store, c.history[1], "t1", point - 5'000'000, "D1");
  const auto stream = c.resume(true);
  ASSERT_EQ(stream->ids(), (std::vector<std::string>{away, c.history[0].id, c.history[1].id}));
  const std::string live = commit_late(*c.store, c.history[1], "t1", point - 2'000'000, "D2");
  LateCommit::settle(*stream, 4);
  EXPECT_EQ(stream->ids(), (std::vector<std::string>{away, c.history[0].id, c.history[1].id, live}));
}

}  // namespace
