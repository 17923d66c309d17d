// Engine behaviour (merge, acknowledgement, versions, history) against every store.
#include "support/engine_fixture.hpp"
#include "support/forwarding_store.hpp"

#include <set>

namespace {

namespace json = boost::json;

json::value parse(const std::string& text) { return ds::parse_json(text); }

TEST_P(EngineTest, ReportCreatesTheShadow) {
  ds::UpdateRequest r = request("t1", ds::Section::reported, R"({"temp":21.5})");
  r.client_token = "c-1";
  r.tz = "Europe/Stockholm";
  ds::UpdateResult result = engine().update(r);
  EXPECT_TRUE(result.changed);
  EXPECT_EQ(result.shadow.record.reported.version, 1u);
  ds::ShadowView view = engine().get({"t1", "main"});
  json::value body = parse(ds::render_shadow(view));
  EXPECT_EQ(ds::to_json(body.at("reported").at("state")), R"({"temp":21.5})");
  EXPECT_EQ(body.at("reported").at("version").as_int64(), 1);
  EXPECT_EQ(body.at("reported").at("clientToken").as_string(), "c-1");
  EXPECT_EQ(body.at("reported").at("tz").as_string(), "Europe/Stockholm");
  EXPECT_EQ(body.at("reported").at("timestamp").as_string(), "2023-11-14T22:13:20.000000000Z");
  EXPECT_EQ(ds::to_json(body.at("desired")), R"({"state":{},"version":0})");
}

// Each leaf's change time survives later writes, acknowledgement and the store's round trip,
// and reads back as API v1's "metadata".
TEST_P(EngineTest, KeepsWhenEachLeafLastChanged) {
  const ds::TimestampKeys& keys = engine().options().document.timestamp_keys;
  auto metadata = [&] {  // members compared in any order: DynamoDB does not keep it
    json::value body = parse(ds::render_shadow(engine().get({"t", "main"}), &keys));
    return json::array{body.at("reported").at("metadata"), body.at("desired").at("metadata")};
  };
  report("t", R"({"a":1,"b":{"c":2,"d":[1,2]},"s":{"value":1,"ts":5}})");  // 22:13:20
  clock_ += 1'000'000'000;
  desire("t", R"({"a":1,"x":5,"b":{"c":7}})");  // a is acknowledged at once
  clock_ += 1'000'000'000;
  report("t", R"({"b":{"c":7}})");  // acknowledges /b/c
  clock_ += 1'000'000'000;
  ds::UpdateRequest tz = request("t", ds::Section::reported, "{}");
  tz.tz = "UTC";  // stores reported again without changing a leaf
  engine().update(tz);
  EXPECT_EQ(metadata(), parse(R"([{"a":"2023-11-14T22:13:20.000000000Z","b":{"c":"2023-11-14T22:13:22.000000000Z",)"
                               R"("d":"2023-11-14T22:13:20.000000000Z"},"s":"2023-11-14T22:13:20.000000000Z"},)"
                               R"({"x":"2023-11-14T22:13:21.000000000Z"}])"));
  EXPECT_EQ(engine().get({"t", "main"}).record.reported.timestamp_ns, clock_.load());
  engine().remove({"t", "main"}, ds::Section::desired);
  EXPECT_EQ(engine().get({"t", "main"}).record.desired.times_json, "");
  EXPECT_EQ(ds::to_json(parse(ds::render_shadow(engine().get({"t", "main"}), &keys)).at("desired").at("metadata")), "{}");
}

TEST_P(EngineTest, MissingShadowIsNotFound) {
  EXPECT_EQ(error_of([&] { engine().get({"nobody", "main"}); }), "not_found");
}

TEST_P(EngineTest, EveryStoredWriteBumpsTheVersionAndLogsOneEvent) {
  report("t", R"({"a":1})");
  report("t", R"({"a":2})");
  ds::UpdateResult same = report("t", R"({"a":2})");
  EXPECT_FALSE(same.changed);
  EXPECT_EQ(same.shadow.record.reported.version, 2u);
  EXPECT_EQ(engine().history({"t", "main"}).events.size(), 2u);
}

TEST_P(EngineTest, StaleWritesAreNotStoredNorLogged) {
  report("t", R"({"s":{"on":true,"ts":200}})");
  ds::UpdateResult r = report("t", R"({"s":{"on":false,"ts":100}})");
  EXPECT_FALSE(r.changed);
  EXPECT_EQ(r.stale, std::vector<std::string>{"/s"});
  EXPECT_EQ(engine().history({"t", "main"}).events.size(), 1u);
}

// Seed 004: a toggle whose switch events arrive out of order.
TEST_P(EngineTest, ToggleKeepsTheLatestSwitchAndLogsOnlyAcceptedOnes) {
  report("toggle-123", R"({"state":{"on":true,"ts":"2026-01-01T10:00:00Z"}})");
  report("toggle-123", R"({"state":{"on":false,"ts":"2026-01-01T10:00:10Z"}})");
  ds::UpdateResult late = report("toggle-123", R"({"state":{"on":true,"ts":"2026-01-01T09:59:59Z"}})");
  EXPECT_FALSE(late.changed);
  json::value latest = parse(ds::render_shadow(engine().get({"toggle-123", "main"})));
  EXPECT_EQ(latest.at("reported").at("state").at("state").at("on").as_bool(), false);
  ds::HistoryRequest asc;
  asc.descending = false;
  auto events = engine().history({"toggle-123", "main"}, asc).events;
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(parse(events[0].json).at("reported").at("changes").at(0).at("new").at("on").as_bool(), true);
  EXPECT_EQ(parse(events[1].json).at("reported").at("changes").at(0).at("new").at("on").as_bool(), false);
}

TEST_P(EngineTest, PinnedVersionMustMatch) {
  report("t", R"({"a":1})");
  ds::UpdateRequest r = request("t", ds::Section::reported, R"({"a":2})");
  r.version = 0;
  try {
    engine().update(r);
    FAIL();
  } catch (const ds::Error& e) {
    EXPECT_EQ(e.code(), ds::ErrorCode::version_conflict);
    EXPECT_EQ(*e.details().current_version, 1u);
  }
  r.version = 1;
  EXPECT_EQ(engine().update(r).shadow.record.reported.version, 2u);
}

TEST_P(EngineTest, AcknowledgementWritesBothSectionsAndOneEvent) {
  desire("t", R"({"sp":22,"mode":"eco"})");
  ds::UpdateRequest r = request("t", ds::Section::reported, R"({"sp":22})");
  r.client_token = "dev-1";
  ds::UpdateResult result = engine().update(r);
  EXPECT_EQ(result.shadow.record.reported.version, 1u);
  EXPECT_EQ(result.shadow.record.desired.version, 2u);
  EXPECT_EQ(result.acknowledged.size(), 1u);
  EXPECT_EQ(ds::to_json(result.shadow.delta), R"({"mode":"eco"})");
  json::value body = parse(ds::render_update_result(result));
  EXPECT_EQ(ds::to_json(body.at("desired").at("state")), R"({"mode":"eco"})");
  auto events = engine().history({"t", "main"}).events;
  ASSERT_EQ(events.size(), 2u);
  json::value event = parse(events[0].json);
  EXPECT_EQ(event.at("op").as_string(), "report");
  EXPECT_EQ(event.at("clientToken").as_string(), "dev-1");
  EXPECT_EQ(event.at("reported").at("version").as_int64(), 1);
  EXPECT_EQ(event.at("desired").at("version").as_int64(), 2);
  EXPECT_EQ(ds::to_json(event.at("acknowledged")), R"([{"path":"/sp","value":22}])");
  EXPECT_EQ(ds::to_json(event.at("desired").at("changes")), R"([{"op":"remove","path":"/sp","old":22}])");
  // Stored atomically: a reread shows both.
  ds::ShadowRecord stored = store().read({"t", "main"});
  EXPECT_EQ(stored.desired.state_json, R"({"mode":"eco"})");
  EXPECT_EQ(stored.reported.state_json, R"({"sp":22})");
}

TEST_P(EngineTest, AReportThatChangesNothingStillAcknowledges) {
  report("t", R"({"sp":22})");
  ds::UpdateRequest d = request("t", ds::Section::desired, R"({"sp":22})");
  d.acknowledge = false;
  engine().update(d);  // desired now equals reported, unacknowledged
  ds::UpdateResult again = report("t", R"({"sp":22})");
  EXPECT_TRUE(again.changed);
  EXPECT_EQ(again.shadow.record.reported.version, 1u);
  EXPECT_EQ(again.shadow.record.desired.version, 2u);
  EXPECT_EQ(again.acknowledged.size(), 1u);
  EXPECT_EQ(store().read({"t", "main"}).desired.state_json, "{}");
}

TEST_P(EngineTest, TimeZoneAloneIsAStoredChange) {
  report("t", R"({"a":1})");
  ds::UpdateRequest r = request("t", ds::Section::reported, R"({"a":1})");
  r.tz = "America/New_York";
  ds::UpdateResult result = engine().update(r);
  EXPECT_TRUE(result.changed);
  EXPECT_EQ(result.shadow.record.reported.version, 2u);
  EXPECT_EQ(result.shadow.record.reported.tz, "America/New_York");
  EXPECT_FALSE(engine().update(r).changed);  // same tz again: nothing to store
}

TEST_P(EngineTest, DeleteLeavesTombstonesAndNumberingContinues) {
  report("t", R"({"a":1})");
  desire("t", R"({"b":1})");
  ds::DeleteResult d = engine().remove({"t", "main"});
  EXPECT_EQ(d.deleted.size(), 2u);
  EXPECT_EQ(d.record.reported.version, 2u);
  EXPECT_EQ(d.record.desired.version, 2u);
  EXPECT_EQ(ds::render_delete_result(d),
            R"({"thing":"t","name":"main","deleted":["reported","desired"],"reported":{"version":2},"desired":{"version":2}})");
  EXPECT_EQ(error_of([&] { engine().get({"t", "main"}); }), "not_found");
  EXPECT_EQ(error_of([&] { engine().remove({"t", "main"}); }), "not_found");
  // A stale writer pinned to the old version cannot succeed (ABA).
  ds::UpdateRequest stale = request("t", ds::Section::reported, R"({"a":9})");
  stale.version = 1;
  EXPECT_EQ(error_of([&] { engine().update(stale); }), "version_conflict");
  EXPECT_EQ(report("t", R"({"a":2})").shadow.record.reported.version, 3u);
  json::value event = parse(engine().history({"t", "main"}).events.at(1).json);
  EXPECT_EQ(event.at("op").as_string(), "delete");
  EXPECT_EQ(ds::to_json(event.at("reported").at("changes")), R"([{"op":"remove","path":"/a","old":1}])");
}

TEST_P(EngineTest, DeleteOneSectionWithAPinnedVersion) {
  report("t", R"({"a":1})");
  desire("t", R"({"b":1})");
  EXPECT_EQ(error_of([&] { engine().remove({"t", "main"}, ds::Section::desired, 5); }), "version_conflict");
  EXPECT_EQ(error_of([&] { engine().remove({"t", "main"}, std::nullopt, 1); }), "invalid_request");
  ds::DeleteResult d = engine().remove({"t", "main"}, ds::Section::desired, 1);
  EXPECT_EQ(d.deleted, std::vector<ds::Section>{ds::Section::desired});
  ds::ShadowView view = engine().get({"t", "main"});
  EXPECT_EQ(ds::to_json(parse(ds::render_shadow(view)).at("desired").at("version")), "2");
  EXPECT_EQ(ds::to_json(parse(ds::render_shadow(view)).at("desired").at("state")), "{}");
}

TEST_P(EngineTest, ExpiredTombstonesArePurged) {
  report("t", R"({"a":1})");
  engine().remove({"t", "main"});
  clock_ += std::chrono::nanoseconds(std::chrono::hours(47)).count();
  engine().purge();
  EXPECT_EQ(store().read({"t", "main"}).reported.version, 2u);
  clock_ += std::chrono::nanoseconds(std::chrono::hours(2)).count();
  engine().purge();
  EXPECT_EQ(store().read({"t", "main"}).reported.version, 0u);
}

TEST_P(EngineTest, RetentionsOfCenturiesNeverExpire) {
  ds::EngineOptions o;
  o.history_retention = o.tombstone_retention = std::chrono::seconds::max();
  make_engine(o);
  report("t", R"({"a":1})");
  engine().remove({"t", "main"});
  const std::vector<ds::HistoryEvent> events = store().history({"t", "main"}, {});
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events.front().expires_ns, INT64_MAX);
  clock_ += std::chrono::nanoseconds(std::chrono::hours(24 * 365 * 100)).count();
  engine().purge();
  EXPECT_EQ(store().history({"t", "main"}, {}).size(), 2u);
  EXPECT_EQ(store().read({"t", "main"}).reported.version, 2u);  // the tombstone stays too
}

TEST_P(EngineTest, HistoryIsRetainedForTheConfiguredTime) {
  ds::EngineOptions o;
  o.history_retention = std::chrono::hours(1);
  make_engine(o);
  report("t", R"({"a":1})");
  clock_ += std::chrono::nanoseconds(std::chrono::minutes(90)).count();
  report("t", R"({"a":2})");
  engine().purge();
  EXPECT_EQ(engine().history({"t", "main"}).events.size(), 1u);
}

TEST_P(EngineTest, HistoryCanBeSwitchedOff) {
  ds::EngineOptions o;
  o.history = false;
  make_engine(o);
  report("t", R"({"a":1})");
  EXPECT_TRUE(engine().history({"t", "main"}).events.empty());
}

// --history stream: a change event made into its history event apart from its write is the
// event the write itself would have stored.
TEST_P(EngineTest, AChangeEventGivesTheHistoryEventItsWriteStores) {
  ds::EngineOptions o;
  o.history_retention = std::chrono::hours(1);
  make_engine(o);
  report("t", R"({"a":1})");
  const ds::HistoryEvent stored = engine().history({"t", "main"}).events.at(0);
  const ds::HistoryEvent made = ds::history_event_of(stored.json, o.history_retention);
  EXPECT_EQ(made.id, stored.id);
  EXPECT_EQ(made.timestamp_ns, stored.timestamp_ns);
  EXPECT_EQ(made.expires_ns, stored.expires_ns);
  EXPECT_EQ(made.json, stored.json);
  for (const char* bad : {"{}", "[]", R"({"id":7})", R"({"id":"123#R1"})", R"({"id":"0000000000000000000x#R1"})", "{"}) {
    EXPECT_THROW(ds::history_event_of(bad, o.history_retention), ds::Error) << bad;
  }
}

TEST_P(EngineTest, HistoryPagesWithCursorsBothWays) {
  for (int i = 0; i < 7; ++i) {
    clock_ += 1000;
    report("t", "{\"n\":" + std::to_string(i) + "}");
  }
  for (bool descending : {true, false}) {
    ds::HistoryRequest q;
    q.limit = 3;
    q.descending = descending;
    std::vector<std::string> ids;
    for (;;) {
      ds::HistoryPage page = engine().history({"t", "main"}, q);
      for (const auto& e : page.events) ids.push_back(e.id);
      if (page.cursor.empty()) break;
      q.cursor = page.cursor;
    }
    ASSERT_EQ(ids.size(), 7u);
    EXPECT_TRUE(descending ? std::is_sorted(ids.rbegin(), ids.rend()) : std::is_sorted(ids.begin(), ids.end()));
  }
  ds::HistoryRequest window;
  window.since_ns = clock_ - 2500;
  window.until_ns = clock_ - 1000;
  EXPECT_EQ(engine().history({"t", "main"}, window).events.size(), 2u);
}

TEST_P(EngineTest, ListsShadowsAndThingsWithCursors) {
  for (int i = 0; i < 5; ++i) {
    ds::UpdateRequest r = request("house#" + std::to_string(i), ds::Section::reported, R"({"a":1})");
    engine().update(r);
    r.key.name = "aux" + std::to_string(i);
    engine().update(r);
  }
  report("other", R"({"a":1})");
  std::vector<std::string> things;
  std::string cursor;
  do {
    ds::ThingList page = engine().list_things("house#", 2, cursor);
    things.insert(things.end(), page.things.begin(), page.things.end());
    cursor = page.cursor;
  } while (!cursor.empty());
  EXPECT_EQ(things, (std::vector<std::string>{"house#0", "house#1", "house#2", "house#3", "house#4"}));
  ds::ShadowList shadows = engine().list_shadows("house#3", 1);
  ASSERT_EQ(shadows.shadows.size(), 1u);
  EXPECT_EQ(shadows.shadows[0].name, "aux3");
  shadows = engine().list_shadows("house#3", 1, shadows.cursor);
  EXPECT_EQ(shadows.shadows.at(0).name, "main");
  EXPECT_TRUE(shadows.cursor.empty());
  EXPECT_EQ(error_of([&] { engine().list_things("", 0); }), "invalid_request");
  EXPECT_EQ(error_of([&] { engine().list_things("", 1001); }), "invalid_request");
  EXPECT_EQ(error_of([&] { engine().list_things("", 10, "not base64!"); }), "invalid_request");
}

// A history page stops at the byte budget (always holding one event) and its cursor goes on
// from there, so large events are never read a thousand at a time.
TEST_P(EngineTest, HistoryPagesStopAtTheByteBudget) {
  ds::EngineOptions options;
  options.max_page_bytes = 10000;
  make_engine(options);
  const std::string big(3000, 'x');
  for (int i = 0; i < 9; ++i) {
    clock_ += 1000;
    report("t", "{\"v\":\"" + big + std::to_string(i) + "\"}");
  }
  ds::HistoryRequest q;
  q.limit = 1000;
  std::vector<std::string> ids;
  std::size_t pages = 0;
  for (;; ++pages) {
    ds::HistoryPage page = engine().history({"t", "main"}, q);
    std::size_t bytes = 0;
    for (const auto& e : page.events) bytes += e.json.size();
    EXPECT_LE(bytes, options.max_page_bytes);
    EXPECT_FALSE(page.events.empty());
    for (const auto& e : page.events) ids.push_back(e.id);
    if (page.cursor.empty()) break;
    q.cursor = page.cursor;
  }
  EXPECT_EQ(ids.size(), 9u);
  EXPECT_EQ(std::set<std::string>(ids.begin(), ids.end()).size(), 9u);
  EXPECT_GE(pages, 2u);
  // An event larger than the whole budget still comes, alone, and the next page follows it.
  options.max_page_bytes = 100;
  make_engine(options);
  q = {};
  q.limit = 5;
  ds::HistoryPage one = engine().history({"t", "main"}, q);
  ASSERT_EQ(one.events.size(), 1u);
  EXPECT_EQ(one.events[0].id, ids[0]);
  ASSERT_FALSE(one.cursor.empty());
  q.cursor = one.cursor;
  EXPECT_EQ(engine().history({"t", "main"}, q).events.at(0).id, ids[1]);
}

// Records the prefixes the engine lists things under.
class ListingRecorder : public ForwardingStore {
 public:
  using ForwardingStore::ForwardingStore;
  std::vector<std::string> list_things(std::string_view prefix, std::string_view after, std::size_t limit) override {
    prefixes.emplace_back(prefix);
    return ForwardingStore::list_things(prefix, after, limit);
  }
  std::vector<std::string> prefixes;
};

// A listing limited to some things reads only within them, and its cursors name only things
// it may show: walking them, or forging one, reveals nothing of the others.
TEST_P(EngineTest, ScopedListingsReadAndRevealOnlyTheirPatterns) {
  for (const char* thing : {"#kitchen", "app-dev-1", "app-dev-2", "app-devx", "shared", "shared-not", "zzz"}) {
    report(thing, R"({"a":1})");
  }
  ListingRecorder recorder(store());
  ds::EngineOptions options;
  ds::Engine scoped(recorder, options);
  const std::vector<ds::ThingPattern> scope = {{"app-dev-", true}, {"shared", false}, {"nobody", false}};
  std::vector<std::string> seen;
  std::string cursor;
  do {
    ds::ThingList page = scoped.list_things("", 1, cursor, scope);
    ASSERT_EQ(page.things.size(), 1u);
    seen.push_back(page.things[0]);
    if (!page.cursor.empty()) {
      EXPECT_EQ(ds::decode_cursor(page.cursor), page.things[0]);
    }
    cursor = page.cursor;
  } while (!cursor.empty());
  EXPECT_EQ(seen, (std::vector<std::string>{"app-dev-1", "app-dev-2", "shared"}));
  for (const std::string& prefix : recorder.prefixes) {
    EXPECT_TRUE(prefix.rfind("app-dev-", 0) == 0 || prefix == "shared" || prefix == "nobody") << prefix;
  }
  // A forged cursor only moves the start; the request's prefix narrows the patterns.
  EXPECT_EQ(scoped.list_things("", 10, ds::encode_cursor("#kitchen"), scope).things,
            (std::vector<std::string>{"app-dev-1", "app-dev-2", "shared"}));
  EXPECT_EQ(scoped.list_things("", 10, ds::encode_cursor("app-dev-1"), scope).things,
            (std::vector<std::string>{"app-dev-2", "shared"}));
  EXPECT_EQ(scoped.list_things("app", 10, "", scope).things, (std::vector<std::string>{"app-dev-1", "app-dev-2"}));
  EXPECT_EQ(scoped.list_things("app-dev-2", 10, "", scope).things, std::vector<std::string>{"app-dev-2"});
  EXPECT_EQ(scoped.list_things("sh", 10, "", scope).things, std::vector<std::string>{"shared"});
  ds::ThingList none = scoped.list_things("z", 10, "", scope);
  EXPECT_TRUE(none.things.empty());
  EXPECT_TRUE(none.cursor.empty());
  EXPECT_EQ(scoped.list_things("", 10, "", std::vector<ds::ThingPattern>{{"", true}}).things.size(), 7u);
}

// While the change feed is on, every stored write carries its entry: the change event (the
// same as history's) and the old and new state of each section it stored.
TEST_P(EngineTest, TheChangeFeedCarriesEveryStoredWriteWhileOn) {
  if (GetParam().needs_dynamodb) {  // the feed is the table's stream: writes go on as ever
    engine().set_change_feed(true);
    report("t", R"({"a":1})");
    EXPECT_EQ(engine().get({"t", "main"}).record.reported.state_json.find("\"a\""), 1u);
    EXPECT_THROW(store().read_feed(0, 10), ds::Error);
    return;
  }
  report("t", R"({"a":1})");  // feed off: no entry
  EXPECT_TRUE(store().read_feed(0, 10).empty());
  engine().set_change_feed(true);
  desire("t", R"({"a":2})");
  report("t", R"({"a":2})");  // acknowledges: writes both sections
  report("t", R"({"a":2})");  // no change: no entry
  engine().remove({"t", "main"});
  engine().set_change_feed(false);
  report("t", R"({"a":3})");

  std::vector<ds::FeedEntry> feed = store().read_feed(0, 10);
  ASSERT_EQ(feed.size(), 3u);
  auto history = engine().history({"t", "main"}, {.limit = 10, .descending = false}).events;
  ASSERT_EQ(history.size(), 5u);
  const json::value desire_entry = parse(feed[0].json);
  EXPECT_EQ(ds::to_json(desire_entry.at("event")), history[1].json);
  EXPECT_EQ(ds::to_json(desire_entry.at("desired")), R"({"old":{},"new":{"a":2}})");
  EXPECT_FALSE(desire_entry.as_object().contains("reported"));
  const json::value ack_entry = parse(feed[1].json);
  EXPECT_EQ(ds::to_json(ack_entry.at("event")), history[2].json);
  EXPECT_EQ(ds::to_json(ack_entry.at("reported")), R"({"old":{"a":1},"new":{"a":2}})");
  EXPECT_EQ(ds::to_json(ack_entry.at("desired")), R"({"old":{"a":2},"new":{}})");
  const json::value delete_entry = parse(feed[2].json);
  EXPECT_EQ(delete_entry.at("event").at("op").as_string(), "delete");
  EXPECT_EQ(ds::to_json(delete_entry.at("reported")), R"({"old":{"a":2},"new":{}})");
  for (const ds::FeedEntry& e : feed) EXPECT_EQ(e.key, (ds::ShadowKey{"t", "main"}));
}

// With history off the feed still carries each write's change event.
TEST_P(EngineTest, TheChangeFeedNeedsNoHistory) {
  ds::EngineOptions options;
  options.history = false;
  make_engine(options);
  engine().set_change_feed(true);
  report("t", R"({"a":1})");
  EXPECT_TRUE(engine().history({"t", "main"}).events.empty());
  if (GetParam().needs_dynamodb) return;  // its feed is the table's stream
  std::vector<ds::FeedEntry> feed = store().read_feed(0, 10);
  ASSERT_EQ(feed.size(), 1u);
  EXPECT_EQ(parse(feed[0].json).at("event").at("reported").at("changes").at(0).at("path").as_string(), "/a");
}

TEST_P(EngineTest, BatchesKeepRequestOrderAndIsolateFailures) {
  report("a", R"({"v":1})");
  auto views = engine().batch_get({{"a", "main"}, {"missing", "main"}, {"bad\n", "main"}});
  ASSERT_EQ(views.size(), 3u);
  EXPECT_TRUE(std::holds_alternative<ds::ShadowView>(views[0]));
  EXPECT_EQ(std::get<ds::Error>(views[1]).code(), ds::ErrorCode::not_found);
  EXPECT_EQ(std::get<ds::Error>(views[2]).code(), ds::ErrorCode::invalid_name);

  std::vector<ds::UpdateRequest> ops;
  for (int i = 0; i < 20; ++i) ops.push_back(request("b" + std::to_string(i), ds::Section::reported, R"({"v":1})"));
  ops[7].state = parse(R"({"t":{"ts":"never"}})").as_object();
  auto results = engine().batch_update(ops);
  ASSERT_EQ(results.size(), 20u);
  for (int i = 0; i < 20; ++i) {
    if (i == 7) {
      EXPECT_EQ(std::get<ds::Error>(results[i]).code(), ds::ErrorCode::invalid_timestamp);
    } else {
      EXPECT_EQ(std::get<ds::UpdateResult>(results[i]).shadow.key.thing, "b" + std::to_string(i));
    }
  }
  EXPECT_EQ(error_of([&] { engine().get({"b7", "main"}); }), "not_found");
  EXPECT_EQ(error_of([&] { engine().batch_update(std::vector<ds::UpdateRequest>(101, ops[0])); }), "invalid_request");
}

TEST_P(EngineTest, BadInputIsRejectedAndStoresNothing) {
  EXPECT_EQ(error_of([&] { report("", R"({"a":1})"); }), "invalid_name");
  ds::UpdateRequest r = request("t", ds::Section::reported, R"({"a":1})");
  r.key.name = "bad name";
  EXPECT_EQ(error_of([&] { engine().update(r); }), "invalid_name");
  r = request("t", ds::Section::reported, R"({"a":1})");
  r.client_token = std::string(65, 'x');
  EXPECT_EQ(error_of([&] { engine().update(r); }), "invalid_request");
  r.client_token = "";
  r.tz = "Mars/Olympus Mons";
  EXPECT_EQ(error_of([&] { engine().update(r); }), "invalid_request");
  EXPECT_EQ(error_of([&] { report("t", R"({"a":1,"b":{"ts":"garbage"}})"); }), "invalid_timestamp");
  std::string big = R"({"a":")" + std::string(70000, 'x') + R"("})";
  EXPECT_EQ(error_of([&] { report("t", big); }), "document_too_large");
  EXPECT_EQ(store().read({"t", "main"}).reported.version, 0u);
  EXPECT_TRUE(engine().history({"t", "main"}).events.empty());
}

// A store shared by two engines stands for two processes: each engine's in-process lock
// does not cover the other, so unpinned writes must retry conflicts and lose nothing.
TEST_P(EngineTest, TwoEnginesOnOneStoreLoseNoUpdate) {
  ds::EngineOptions o;
  o.clock = [this] { return clock_.load(); };
  o.backoff_base = std::chrono::microseconds(20);
  o.max_attempts = 1000;
  ds::Engine other(store(), o);
  make_engine(o);
  constexpr int kPerEngine = 100;
  std::thread a([&] {
    for (int i = 0; i < kPerEngine; ++i) engine().update(request("shared", ds::Section::reported, "{\"a" + std::to_string(i) + "\":1}"));
  });
  std::thread b([&] {
    for (int i = 0; i < kPerEngine; ++i) other.update(request("shared", ds::Section::reported, "{\"b" + std::to_string(i) + "\":1}"));
  });
  a.join();
  b.join();
  ds::ShadowView view = engine().get({"shared", "main"});
  EXPECT_EQ(view.record.reported.version, 2u * kPerEngine);
  EXPECT_EQ(ds::parse_json(view.record.reported.state_json).as_object().size(), 2u * kPerEngine);
}

INSTANTIATE_TEST_SUITE_P(Stores, EngineTest, ::testing::ValuesIn(store_kinds_with_section_versions()), store_kind_name);

// The combined DynamoDB layout: the same behaviour, one version shared by both sections.
class CombinedLayout : public EngineTest {};

TEST_P(CombinedLayout, BothSectionsShowTheOneSharedVersion) {
  EXPECT_EQ(report("t", R"({"a":1})").shadow.record.reported.version, 1u);
  ds::UpdateResult d = desire("t", R"({"sp":22})");
  EXPECT_EQ(d.shadow.record.reported.version, 2u);
  EXPECT_EQ(d.shadow.record.desired.version, 2u);
  ds::ShadowView view = engine().get({"t", "main"});
  EXPECT_EQ(view.record.reported.version, 2u);
  EXPECT_EQ(view.record.desired.version, 2u);
  EXPECT_EQ(view.record.reported.state_json, R"({"a":1})");
  EXPECT_EQ(view.record.desired.state_json, R"({"sp":22})");
}

TEST_P(CombinedLayout, ASectionNeverWrittenStaysAbsentAcrossWrites) {
  ds::UpdateResult first = report("t", R"({"a":1})");
  EXPECT_FALSE(first.shadow.record.desired.exists());
  ds::UpdateResult second = report("t", R"({"a":2})");  // merged against the cached copy
  EXPECT_FALSE(second.shadow.record.desired.exists());
  EXPECT_EQ(second.shadow.record.desired.version, 2u);
  EXPECT_FALSE(store().read({"t", "main"}).desired.exists());
  EXPECT_FALSE(engine().get({"t", "main"}).record.desired.exists());
  // Shown with the shared version and no time (not the epoch's).
  EXPECT_EQ(ds::to_json(parse(ds::render_shadow(engine().get({"t", "main"}))).at("desired")), R"({"state":{},"version":2})");
}

TEST_P(CombinedLayout, AcknowledgementIsOneWriteOfOneItem) {
  desire("t", R"({"sp":22,"mode":"eco"})");
  ds::UpdateResult r = report("t", R"({"sp":22})");
  EXPECT_EQ(r.shadow.record.reported.version, 2u);
  EXPECT_EQ(r.shadow.record.desired.version, 2u);
  ds::ShadowRecord stored = store().read({"t", "main"});
  EXPECT_EQ(stored.desired.state_json, R"({"mode":"eco"})");
  EXPECT_EQ(stored.reported.state_json, R"({"sp":22})");
  EXPECT_EQ(engine().history({"t", "main"}).events.size(), 2u);
}

TEST_P(CombinedLayout, PinnedVersionsUseTheSharedVersion) {
  report("t", R"({"a":1})");
  desire("t", R"({"b":1})");
  ds::UpdateRequest r = request("t", ds::Section::reported, R"({"a":2})");
  r.version = 1;
  EXPECT_EQ(error_of([&] { engine().update(r); }), "version_conflict");
  r.version = 2;
  EXPECT_EQ(engine().update(r).shadow.record.desired.version, 3u);
}

TEST_P(CombinedLayout, DeletesLeaveTombstonesThatExpire) {
  report("t", R"({"a":1})");
  desire("t", R"({"b":1})");
  ds::DeleteResult d = engine().remove({"t", "main"}, ds::Section::desired);
  EXPECT_EQ(d.record.desired.version, 3u);
  EXPECT_EQ(engine().get({"t", "main"}).record.reported.state_json, R"({"a":1})");
  engine().remove({"t", "main"});
  EXPECT_EQ(error_of([&] { engine().get({"t", "main"}); }), "not_found");
  EXPECT_EQ(report("t", R"({"a":2})").shadow.record.reported.version, 5u);  // numbering goes on
  clock_ += std::chrono::nanoseconds(std::chrono::hours(49)).count();
  engine().purge();  // revived: the dead item's expiry is gone
  EXPECT_EQ(engine().get({"t", "main"}).record.reported.state_json, R"({"a":2})");
  engine().remove({"t", "main"});
  clock_ += std::chrono::nanoseconds(std::chrono::hours(49)).count();
  engine().purge();
  EXPECT_EQ(store().read({"t", "main"}).reported.version, 0u);
}

std::vector<StoreKind> combined_kinds() {
  std::vector<StoreKind> kinds = all_store_kinds();
  std::erase_if(kinds, [](const StoreKind& k) { return !k.shared_version; });
  return kinds;
}

INSTANTIATE_TEST_SUITE_P(Stores, CombinedLayout, ::testing::ValuesIn(combined_kinds()), store_kind_name);

}  // namespace
