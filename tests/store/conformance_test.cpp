// The store conformance suite: what every Store implementation must do (store.hpp).
#include "deviceshadow/error.hpp"
#include "support/stores.hpp"

#include <atomic>
#include <thread>

namespace {

// Write ids are unique, as the engine's are.
std::string unique_write_id() {
  static std::atomic<int> next{0};
  static const std::string run = std::to_string(std::random_device{}());
  return "w" + run + "-" + std::to_string(next++);
}

ds::SectionRecord record(std::uint64_t version, std::string state, std::int64_t ts = 1000) {
  ds::SectionRecord r;
  r.version = version;
  r.timestamp_ns = ts;
  r.client_token = "tok";
  r.tz = "UTC";
  r.state_json = std::move(state);
  r.write_id = unique_write_id();
  return r;
}

ds::SectionRecord tombstone(std::uint64_t version, std::int64_t expires) {
  ds::SectionRecord r;
  r.version = version;
  r.deleted = true;
  r.timestamp_ns = 2000;
  r.expires_ns = expires;
  r.write_id = unique_write_id();
  return r;
}

// was_live defaults to "the section existed before", right unless it was a tombstone.
ds::ShadowWrite put(ds::ShadowKey key, ds::Section section, std::uint64_t expected, ds::SectionRecord r,
                    std::optional<bool> was_live = std::nullopt) {
  return {std::move(key), {{section, expected, std::move(r), was_live.value_or(expected > 0)}}, std::nullopt};
}

// An event with an id in the documented format: "{timestamp ns, 20 digits}#{letter}{version}".
ds::HistoryEvent event(std::int64_t ts, std::uint64_t version, std::int64_t expires = INT64_MAX) {
  char id[48];
  std::snprintf(id, sizeof id, "%020lld#R%llu", static_cast<long long>(ts), static_cast<unsigned long long>(version));
  return {id, ts, expires, "{\"id\":\"x\"}"};
}

std::uint64_t conflict_version(const std::function<void()>& f) {
  try {
    f();
  } catch (const ds::Error& e) {
    EXPECT_EQ(e.code(), ds::ErrorCode::version_conflict);
    return *e.details().current_version;
  }
  ADD_FAILURE() << "no conflict";
  return 0;
}

// The suite runs in both DynamoDB layouts: where the combined layout's one shared version
// makes a number differ, expectations name both.
class Conformance : public StoreTest {
 protected:
  bool shared() const { return GetParam().shared_version; }
  std::uint64_t v(std::uint64_t separate, std::uint64_t shared_version) const { return shared() ? shared_version : separate; }

  // A write of one section at the version it has now, as the engine does it.
  ds::ShadowWrite next_put(const ds::ShadowKey& key, ds::Section section, ds::SectionRecord r) {
    const ds::SectionRecord current = store().read(key).section(section);
    r.version = current.version + 1;
    return put(key, section, current.version, std::move(r), current.exists());
  }
};

TEST_P(Conformance, AbsentShadowReadsAsVersionZero) {
  ds::ShadowRecord r = store().read({"t", "main"});
  EXPECT_EQ(r.reported.version, 0u);
  EXPECT_EQ(r.desired.version, 0u);
  EXPECT_FALSE(r.exists());
}

TEST_P(Conformance, WrittenSectionReadsBackExactly) {
  store().write(put({"t", "main"}, ds::Section::reported, 0, record(1, R"({"a":1.5})")));
  ds::ShadowRecord r = store().read({"t", "main"});
  EXPECT_EQ(r.reported.version, 1u);
  EXPECT_EQ(r.reported.state_json, R"({"a":1.5})");
  EXPECT_EQ(r.reported.client_token, "tok");
  EXPECT_EQ(r.reported.tz, "UTC");
  EXPECT_EQ(r.reported.timestamp_ns, 1000);
  EXPECT_EQ(r.reported.write_id.substr(0, 1), "w");
  EXPECT_EQ(r.desired.version, v(0, 1));
  EXPECT_FALSE(r.desired.exists());
}

// try_read answers as read does, or not at all: only DynamoDB, whose reads go over the network,
// never answers.
TEST_P(Conformance, TryReadAnswersAsReadOrNotAtAll) {
  const ds::ShadowKey key{"t", "main"};
  store().write(put(key, ds::Section::reported, 0, record(1, R"({"a":1.5})")));
  const std::optional<ds::ShadowRecord> now = store().try_read(key);
  const std::optional<ds::ShadowRecord> absent = store().try_read({"t", "other"});
  if (GetParam().needs_dynamodb) {
    EXPECT_FALSE(now);
    EXPECT_FALSE(absent);
    return;
  }
  ASSERT_TRUE(now && absent);
  const ds::ShadowRecord read = store().read(key);
  for (ds::Section section : {ds::Section::reported, ds::Section::desired}) {
    const ds::SectionRecord& a = now->section(section);
    const ds::SectionRecord& b = read.section(section);
    EXPECT_EQ(std::tie(a.version, a.deleted, a.timestamp_ns, a.client_token, a.tz, a.state_json, a.write_id, a.times_json),
              std::tie(b.version, b.deleted, b.timestamp_ns, b.client_token, b.tz, b.state_json, b.write_id, b.times_json));
  }
  EXPECT_FALSE(absent->exists());
}

// Per-leaf times round-trip with their section, survive writes of the other section (one item
// in the combined layout), and tombstones keep none.
TEST_P(Conformance, LeafTimesRoundTripWithTheirSection) {
  const ds::ShadowKey key{"t", "main"};
  ds::SectionRecord reported = record(1, R"({"a":1,"b":{"c":2}})");
  reported.times_json = R"({"a":1000,"b":{"c":999}})";
  store().write(put(key, ds::Section::reported, 0, reported));
  EXPECT_EQ(store().read(key).reported.times_json, R"({"a":1000,"b":{"c":999}})");
  ds::SectionRecord desired = record(0, R"({"x":[1,2]})", 1500);
  desired.times_json = "1500";
  ds::ShadowWrite w = next_put(key, ds::Section::desired, desired);
  const ds::ShadowRecord before = store().read(key);
  w.unchanged = &before.reported;
  store().write(w);
  ds::ShadowRecord r = store().read(key);
  EXPECT_EQ(r.reported.times_json, R"({"a":1000,"b":{"c":999}})");
  EXPECT_EQ(r.desired.times_json, "1500");
  store().write(next_put(key, ds::Section::reported, record(0, R"({"a":2})")));  // written without times
  r = store().read(key);
  EXPECT_EQ(r.reported.times_json, "");
  EXPECT_EQ(r.desired.times_json, "1500");
  store().write(next_put(key, ds::Section::desired, tombstone(0, INT64_MAX)));
  EXPECT_EQ(store().read(key).desired.times_json, "");
}

TEST_P(Conformance, WrongExpectedVersionConflictsAndStoresNothing) {
  store().write(put({"t", "main"}, ds::Section::reported, 0, record(1, "{}")));
  ds::ShadowWrite w = put({"t", "main"}, ds::Section::reported, 0, record(1, R"({"x":1})"));
  w.event = event(5, 1);
  EXPECT_EQ(conflict_version([&] { store().write(w); }), 1u);
  EXPECT_EQ(store().read({"t", "main"}).reported.state_json, "{}");
  EXPECT_TRUE(store().history({"t", "main"}, {}).empty());
}

TEST_P(Conformance, TwoSectionsAreWrittenAtomically) {
  store().write(put({"t", "main"}, ds::Section::desired, 0, record(1, R"({"d":1})")));
  const ds::ShadowRecord before = store().read({"t", "main"});
  ds::ShadowWrite both{{"t", "main"},
                       {{ds::Section::reported, before.reported.version, record(before.reported.version + 1, R"({"r":1})")},
                        {ds::Section::desired, 7, record(8, "{}"), true}},
                       event(5, 1)};
  EXPECT_EQ(conflict_version([&] { store().write(both); }), 1u);
  ds::ShadowRecord r = store().read({"t", "main"});
  EXPECT_FALSE(r.reported.exists());  // the reported half did not land either
  EXPECT_EQ(r.desired.state_json, R"({"d":1})");
  both.sections[1].expected_version = 1;
  both.sections[1].record.version = 2;
  store().write(both);
  r = store().read({"t", "main"});
  EXPECT_EQ(r.reported.version, v(1, 2));
  EXPECT_EQ(r.desired.version, 2u);
  EXPECT_EQ(r.reported.state_json, R"({"r":1})");
  EXPECT_EQ(store().history({"t", "main"}, {}).size(), 1u);
}

TEST_P(Conformance, TombstonesKeepTheirVersionAndAreNotListed) {
  store().write(put({"t", "main"}, ds::Section::reported, 0, record(1, R"({"a":1})")));
  store().write(put({"t", "main"}, ds::Section::reported, 1, tombstone(2, 5000)));
  ds::ShadowRecord r = store().read({"t", "main"});
  EXPECT_EQ(r.reported.version, 2u);
  EXPECT_TRUE(r.reported.deleted);
  EXPECT_FALSE(r.exists());
  EXPECT_TRUE(store().list_shadows("t", "", 10).empty());
  EXPECT_TRUE(store().list_things("", "", 10).empty());
  EXPECT_EQ(conflict_version([&] { store().write(put({"t", "main"}, ds::Section::reported, 0, record(1, "{}"))); }), 2u);
  store().write(put({"t", "main"}, ds::Section::reported, 2, record(3, "{}"), false));  // re-created: numbering goes on
  EXPECT_EQ(store().read({"t", "main"}).reported.version, 3u);
}

TEST_P(Conformance, PurgeDropsExpiredTombstonesAndHistoryOnly) {
  store().write(put({"t", "a"}, ds::Section::reported, 0, tombstone(1, 100)));
  store().write(put({"t", "b"}, ds::Section::reported, 0, tombstone(1, 300)));
  ds::ShadowWrite w = put({"t", "c"}, ds::Section::reported, 0, record(1, "{}"));
  w.event = event(1, 1, 100);
  store().write(w);
  w = put({"t", "c"}, ds::Section::reported, 1, record(2, "{}"));
  w.event = event(2, 2, 300);
  store().write(w);
  EXPECT_EQ(store().purge_dead_letters(200), 0u) << "the delivery store's purge leaves shadows and history";
  EXPECT_EQ(store().purge(200), 2u);
  EXPECT_EQ(store().read({"t", "a"}).reported.version, 0u);
  EXPECT_EQ(store().read({"t", "b"}).reported.version, 1u);
  EXPECT_EQ(store().read({"t", "c"}).reported.version, 2u);  // live sections never expire
  auto h = store().history({"t", "c"}, {});
  ASSERT_EQ(h.size(), 1u);
  EXPECT_EQ(h[0].id, "00000000000000000002#R2");
}

TEST_P(Conformance, BatchReadKeepsRequestOrder) {
  store().write(put({"a", "x"}, ds::Section::reported, 0, record(1, R"({"k":"a"})")));
  store().write(put({"b", "x"}, ds::Section::reported, 0, record(1, R"({"k":"b"})")));
  std::vector<ds::ShadowKey> keys = {{"b", "x"}, {"missing", "x"}, {"a", "x"}};
  auto records = store().read(keys);
  ASSERT_EQ(records.size(), 3u);
  EXPECT_EQ(records[0].reported.state_json, R"({"k":"b"})");
  EXPECT_EQ(records[1].reported.version, 0u);
  EXPECT_EQ(records[2].reported.state_json, R"({"k":"a"})");
}

TEST_P(Conformance, ListsShadowsByNameWithPaging) {
  for (const char* name : {"c", "a", "b", "d"}) store().write(put({"t", name}, ds::Section::reported, 0, record(1, "{}")));
  store().write(next_put({"t", "b"}, ds::Section::desired, record(0, "{}", 9000)));
  store().write(put({"t", "d"}, ds::Section::reported, 1, tombstone(2, INT64_MAX)));
  store().write(put({"other", "a"}, ds::Section::reported, 0, record(1, "{}")));
  auto page = store().list_shadows("t", "", 2);
  ASSERT_EQ(page.size(), 2u);
  EXPECT_EQ(page[0].name, "a");
  EXPECT_EQ(page[1].name, "b");
  EXPECT_EQ(page[1].desired_version, v(1, 2));
  EXPECT_EQ(page[1].timestamp_ns, 9000);
  page = store().list_shadows("t", "b", 10);
  ASSERT_EQ(page.size(), 1u);  // d is deleted
  EXPECT_EQ(page[0].name, "c");
}

TEST_P(Conformance, ListsThingsBytewiseByPrefix) {
  std::vector<std::string> things = {"b", "a#1", "a#2", "a 3", "a", "é", "z", "a#1/x"};
  for (const auto& t : things) store().write(put({t, "main"}, ds::Section::reported, 0, record(1, "{}")));
  store().write(put({"a#1", "other"}, ds::Section::reported, 0, record(1, "{}")));
  EXPECT_EQ(store().list_things("", "", 100), (std::vector<std::string>{"a", "a 3", "a#1", "a#1/x", "a#2", "b", "z", "é"}));
  EXPECT_EQ(store().list_things("a#", "", 100), (std::vector<std::string>{"a#1", "a#1/x", "a#2"}));
  EXPECT_EQ(store().list_things("a#", "a#1", 1), (std::vector<std::string>{"a#1/x"}));
  EXPECT_EQ(store().list_things("", "b", 100), (std::vector<std::string>{"z", "é"}));
  EXPECT_TRUE(store().list_things("q", "", 100).empty());
}

// DynamoDB keeps numbers of magnitude 1e-130 to below 1e126 (and 0): a state holding another is
// refused clearly and stores nothing; the other stores keep any double.
TEST_P(Conformance, ANumberOutsideTheStoresRangeIsRefusedClearlyOrKept) {
  for (const char* state : {R"({"n":1e300})", R"({"n":-1e-300})"}) {
    const ds::ShadowKey key{"range", "main"};
    const std::uint64_t before = store().read(key).reported.version;
    try {
      store().write(put(key, ds::Section::reported, before, record(before + 1, state), before > 0));
      EXPECT_FALSE(GetParam().needs_dynamodb) << state;
      EXPECT_EQ(store().read(key).reported.state_json, state);
    } catch (const ds::Error& e) {
      EXPECT_TRUE(GetParam().needs_dynamodb) << e.what();
      EXPECT_EQ(e.code(), ds::ErrorCode::invalid_request) << e.what();
      EXPECT_EQ(store().read(key).reported.version, before);
    }
  }
}

// Every live shadow once, in (thing, name) order, page after page of any size.
TEST_P(Conformance, ListsShadowKeysAcrossThingsInOrder) {
  for (const char* thing : {"b", "a#1", "a", "\u00e9", "a 3"}) {
    for (const char* name : {"main", "x", "aux"}) store().write(put({thing, name}, ds::Section::reported, 0, record(1, "{}")));
  }
  store().write(put({"a", "x"}, ds::Section::reported, 1, tombstone(2, INT64_MAX)));  // deleted
  store().write(put({"c", "only-desired"}, ds::Section::desired, 0, record(1, "{}")));
  std::vector<ds::ShadowKey> expected;
  for (const std::string& thing : store().list_things("", "", 100)) {
    for (const ds::ShadowSummary& s : store().list_shadows(thing, "", 100)) expected.push_back({thing, s.name});
  }
  ASSERT_EQ(expected.size(), 15u);
  for (std::size_t page : {1u, 2u, 3u, 4u, 100u}) {
    std::vector<ds::ShadowKey> listed;
    for (;;) {
      const std::vector<ds::ShadowKey> next = store().list_shadow_keys(listed.empty() ? nullptr : &listed.back(), page);
      ASSERT_LE(next.size(), page);
      listed.insert(listed.end(), next.begin(), next.end());
      if (next.size() < page) break;
    }
    EXPECT_EQ(listed, expected) << page;
  }
}

TEST_P(Conformance, HistoryQueriesByTimeOrderAndCursor) {
  for (int i = 1; i <= 5; ++i) {
    ds::ShadowWrite w = put({"t", "main"}, ds::Section::reported, static_cast<std::uint64_t>(i - 1),
                            record(static_cast<std::uint64_t>(i), "{}"));
    w.event = event(i * 10, static_cast<std::uint64_t>(i));
    store().write(w);
  }
  auto ids = [](const std::vector<ds::HistoryEvent>& events) {
    std::vector<std::int64_t> out;
    for (const auto& e : events) out.push_back(e.timestamp_ns);
    return out;
  };
  ds::HistoryQuery q;
  EXPECT_EQ(ids(store().history({"t", "main"}, q)), (std::vector<std::int64_t>{50, 40, 30, 20, 10}));
  q.descending = false;
  q.limit = 2;
  auto page = store().history({"t", "main"}, q);
  EXPECT_EQ(ids(page), (std::vector<std::int64_t>{10, 20}));
  q.after_id = page.back().id;
  EXPECT_EQ(ids(store().history({"t", "main"}, q)), (std::vector<std::int64_t>{30, 40}));
  q = {};
  q.since_ns = 20;
  q.until_ns = 40;
  EXPECT_EQ(ids(store().history({"t", "main"}, q)), (std::vector<std::int64_t>{40, 30, 20}));
  q.after_id = store().history({"t", "main"}, q)[0].id;
  EXPECT_EQ(ids(store().history({"t", "main"}, q)), (std::vector<std::int64_t>{30, 20}));
  EXPECT_TRUE(store().history({"t", "other"}, {}).empty());
}

TEST_P(Conformance, AppendedHistoryJoinsWrittenHistoryOnceAndExpiresAlike) {
  ds::ShadowWrite w = put({"t", "main"}, ds::Section::reported, 0, record(1, "{}"));
  w.event = event(20, 1, 300);
  store().write(w);
  ds::HistoryEvent appended = event(10, 7, 100);
  appended.json = R"({"id":"appended","changes":[]})";
  const std::vector<ds::ShadowHistoryEvent> batch{
      {{"t", "main"}, appended}, {{"t", "main"}, appended}, {{"t", "main"}, event(30, 8)}, {{"t", "other"}, event(30, 8)}};
  store().append_history(batch);
  store().append_history(std::span(batch).first(1));  // a stream record read twice
  auto h = store().history({"t", "main"}, {});
  ASSERT_EQ(h.size(), 3u);
  EXPECT_EQ(h[0].timestamp_ns, 30);
  EXPECT_EQ(h[1].timestamp_ns, 20);
  EXPECT_EQ(h[2].id, appended.id);
  EXPECT_EQ(h[2].json, appended.json);
  EXPECT_EQ(h[2].expires_ns, 100);
  ds::HistoryQuery ascending;
  ascending.descending = false;
  EXPECT_EQ(store().history({"t", "main"}, ascending).front().id, appended.id);
  EXPECT_EQ(store().history({"t", "other"}, {}).size(), 1u);
  EXPECT_EQ(store().purge(200), 1u);
  h = store().history({"t", "main"}, {});
  ASSERT_EQ(h.size(), 2u);
  EXPECT_EQ(h[1].timestamp_ns, 20);

  std::vector<ds::ShadowHistoryEvent> many;  // more than one DynamoDB batch (25)
  for (int i = 1; i <= 60; ++i) many.push_back({{"many", "main"}, event(i, static_cast<std::uint64_t>(i))});
  store().append_history(many);
  ds::HistoryQuery all;
  all.limit = 100;
  EXPECT_EQ(store().history({"many", "main"}, all).size(), 60u);
}

// history_since: every shadow's history in (time, thing, name, id) order, from a time and after
// a cursor, in pages; events written with their writes and appended ones alike.
TEST_P(Conformance, HistoryOfEveryShadowReadsInTimeOrderWithCursor) {
  const std::vector<ds::ShadowHistoryEvent> events = {
      {{"b", "main"}, event(10, 1)}, {{"a", "main"}, event(20, 1)}, {{"a", "main"}, event(10, 1)},
      {{"b", "main"}, event(30, 2)}, {{"a#x", "n"}, event(25, 3)},
  };
  store().append_history(events);
  ds::ShadowWrite w = put({"c", "main"}, ds::Section::reported, 0, record(1, "{}"));
  w.event = event(15, 1);
  store().write(w);
  auto ids = [](const std::vector<ds::ShadowHistoryEvent>& page) {
    std::vector<std::string> out;
    for (const auto& e : page) out.push_back(e.key.thing + "/" + e.key.name + "@" + std::to_string(e.event.timestamp_ns));
    return out;
  };
  EXPECT_EQ(ids(store().history_since(0, nullptr, 10)),
            (std::vector<std::string>{"a/main@10", "b/main@10", "c/main@15", "a/main@20", "a#x/n@25", "b/main@30"}));
  EXPECT_EQ(ids(store().history_since(16, nullptr, 10)), (std::vector<std::string>{"a/main@20", "a#x/n@25", "b/main@30"}));
  // Paged one event at a time, then two: the same order, nothing twice, nothing left out.
  std::vector<std::string> paged;
  for (std::optional<ds::ShadowHistoryEvent> last;;) {
    auto page = store().history_since(0, last ? &*last : nullptr, paged.size() < 3 ? 1 : 2);
    if (page.empty()) break;
    auto part = ids(page);
    paged.insert(paged.end(), part.begin(), part.end());
    last = page.back();
  }
  EXPECT_EQ(paged, ids(store().history_since(0, nullptr, 100)));
  const auto all = store().history_since(0, nullptr, 100);
  ASSERT_EQ(all.size(), 6u);
  EXPECT_EQ(all[2].event.json, w.event->json);
  EXPECT_EQ(all[2].event.id, w.event->id);
  EXPECT_TRUE(store().history_since(31, nullptr, 10).empty());
  EXPECT_TRUE(store().history_since(0, &all.back(), 10).empty());
}

// Images are stored with their write's event, found at or before an event id, and expire like
// events.
TEST_P(Conformance, ImagesAreFoundAtOrBeforeAnEventAndExpireLikeEvents) {
  std::vector<std::string> ids;
  for (int i = 1; i <= 3; ++i) {
    ds::ShadowWrite w = put({"t", "main"}, ds::Section::reported, static_cast<std::uint64_t>(i - 1),
                            record(static_cast<std::uint64_t>(i), "{}"));
    w.event = event(i * 10, static_cast<std::uint64_t>(i), 100 * i);
    if (i != 2) w.image = ds::StateImage{w.event->id, 100 * i, R"({"n":)" + std::to_string(i) + "}"};
    ids.push_back(w.event->id);
    store().write(w);
  }
  auto image_json = [&](const std::string& id) {
    std::optional<ds::StateImage> image = store().image_before({"t", "main"}, id);
    return image ? image->event_id + " " + image->json : "none";
  };
  EXPECT_EQ(image_json("00000000000000000001#R1"), "none");
  EXPECT_EQ(image_json(ids[0]), ids[0] + R"( {"n":1})");
  EXPECT_EQ(image_json(ids[1]), ids[0] + R"( {"n":1})");
  EXPECT_EQ(image_json(ids[2]), ids[2] + R"( {"n":3})");
  EXPECT_FALSE(store().image_before({"t", "other"}, ids[2]).has_value());
  EXPECT_EQ(store().purge(150), 2u);  // the first event and its image
  EXPECT_EQ(image_json(ids[1]), "none");
  EXPECT_EQ(store().image_before({"t", "main"}, ids[2])->expires_ns, 300);
}

TEST_P(Conformance, ConcurrentConditionalWritesAdmitExactlyOneWinnerPerVersion) {
  constexpr int kThreads = 8, kRounds = 50;
  std::atomic<int> wins{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < kRounds; ++i) {
        std::uint64_t v = store().read({"t", "hot"}).reported.version;
        try {
          store().write(put({"t", "hot"}, ds::Section::reported, v, record(v + 1, "{}")));
          ++wins;
        } catch (const ds::Error& e) {
          ASSERT_EQ(e.code(), ds::ErrorCode::version_conflict);
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(store().read({"t", "hot"}).reported.version, static_cast<std::uint64_t>(wins.load()));
}

TEST_P(Conformance, ReadyWhenOpen) { EXPECT_EQ(store().unready(), std::nullopt); }

// The outbox: entries appended with their writes, in commit order, never with a failed write,
// trimmed by sequence number, numbers never reused.
TEST_P(Conformance, FeedEntriesAreWrittenWithTheirWritesOnly) {
  if (GetParam().needs_dynamodb) {  // its feed is the table's stream
    EXPECT_THROW(store().read_feed(0, 10), ds::Error);
    EXPECT_THROW(store().feed_end(), ds::Error);
    return;
  }
  EXPECT_EQ(store().feed_end(), 0u);
  std::atomic<int> told{0};  // the listener hears of each commit that appended
  store().set_feed_listener([&] { ++told; });
  ds::ShadowWrite w1 = put({"t", "main"}, ds::Section::reported, 0, record(1, R"({"a":1})"));
  w1.feed = R"({"event":{"n":1}})";
  store().write(w1);
  EXPECT_EQ(told, 1);
  ds::ShadowWrite lost = put({"t", "main"}, ds::Section::reported, 0, record(1, R"({"a":9})"));
  lost.feed = R"({"event":{"n":"lost"}})";
  conflict_version([&] { store().write(lost); });
  store().write(put({"t", "main"}, ds::Section::reported, 1, record(2, R"({"a":2})")));  // feed off
  EXPECT_EQ(told, 1);
  ds::ShadowWrite w3 = put({"u", "aux"}, ds::Section::desired, 0, record(1, R"({"b":1})"));
  w3.feed = R"({"event":{"n":3}})";
  store().write(w3);
  EXPECT_EQ(told, 2);
  store().set_feed_listener({});

  std::vector<ds::FeedEntry> all = store().read_feed(0, 100);
  ASSERT_EQ(all.size(), 2u);
  EXPECT_EQ(all[0].key, (ds::ShadowKey{"t", "main"}));
  EXPECT_EQ(all[0].json, *w1.feed);
  EXPECT_EQ(all[1].key, (ds::ShadowKey{"u", "aux"}));
  EXPECT_EQ(all[1].json, *w3.feed);
  EXPECT_LT(all[0].seq, all[1].seq);
  EXPECT_EQ(store().feed_end(), all[1].seq);
  EXPECT_EQ(store().read_feed(all[0].seq, 100), std::vector<ds::FeedEntry>{all[1]});
  EXPECT_EQ(store().read_feed(0, 1), std::vector<ds::FeedEntry>{all[0]});

  store().trim_feed(all[0].seq);
  EXPECT_EQ(store().read_feed(0, 100), std::vector<ds::FeedEntry>{all[1]});
  store().trim_feed(all[1].seq);
  EXPECT_TRUE(store().read_feed(0, 100).empty());
  EXPECT_EQ(store().feed_end(), all[1].seq);  // trimmed, not forgotten
  reopen();
  ds::ShadowWrite w4 = put({"v", "main"}, ds::Section::reported, 0, record(1, R"({"a":3})"));
  w4.feed = R"({"event":{"n":4}})";
  store().write(w4);
  std::vector<ds::FeedEntry> after = store().read_feed(0, 100);
  ASSERT_EQ(after.size(), 1u);
  if (GetParam().name != "memory") {
    EXPECT_GT(after[0].seq, all[1].seq);  // a durable store never reuses one
  }
  EXPECT_EQ(store().feed_end(), after[0].seq);
  store().trim_feed(after[0].seq + 5);  // beyond the end: the next entry still follows the last
  EXPECT_EQ(store().feed_end(), after[0].seq);
  ds::ShadowWrite w5 = put({"v", "main"}, ds::Section::reported, 1, record(2, R"({"a":4})"));
  w5.feed = R"({"event":{"n":5}})";
  store().write(w5);
  EXPECT_EQ(store().read_feed(0, 100).at(0).seq, after[0].seq + 1);
}

TEST_P(Conformance, KeepsDeliveryStateWithItsRegistration) {
  const ds::DeadLetter d1{"reg", "00000000000000000001#R1", R"({"id":"e1"})", 10, "webhook: HTTP 503", 100};
  const ds::DeadLetter d2{"reg", "00000000000000000002#R2", R"({"id":"e2"})", 1, "webhook: HTTP 400: no", 200};
  const ds::DeadLetter other{"other", "00000000000000000001#R1", "{}", 3, "x", 300};
  store().put_registration({"reg", "{}", 1});
  store().put_registration({"other", "{}", 1});
  for (const auto& d : {d2, d1, other}) store().put_dead_letter(d);
  EXPECT_EQ(store().dead_letters("reg", "", 10), (std::vector<ds::DeadLetter>{d1, d2}));
  EXPECT_EQ(store().dead_letters("reg", "", 1), std::vector<ds::DeadLetter>{d1});
  EXPECT_EQ(store().dead_letters("reg", d1.event_id, 10), std::vector<ds::DeadLetter>{d2});
  ds::DeadLetter again = d1;
  again.attempts = 20;
  store().put_dead_letter(again);  // replaces
  EXPECT_EQ(store().dead_letters("reg", "", 10).front().attempts, 20);
  EXPECT_TRUE(store().remove_dead_letter("reg", d2.event_id));
  EXPECT_FALSE(store().remove_dead_letter("reg", d2.event_id));
  EXPECT_EQ(store().dead_letters("reg", "", 10).size(), 1u);

  if (GetParam().needs_dynamodb) {  // checkpoints are kept per stream shard there
    EXPECT_THROW(store().checkpoint("reg"), ds::Error);
  } else {
    EXPECT_EQ(store().checkpoint("reg"), std::nullopt);
    store().put_checkpoint("reg", 41);
    store().put_checkpoint("reg", 42);
    store().put_checkpoint("never-registered", 7);  // no registration, no checkpoint
    EXPECT_EQ(store().checkpoint("reg"), 42u);
    EXPECT_EQ(store().checkpoint("never-registered"), std::nullopt);
    store().put_registration({"reg", R"({"enabled":false})", 2});  // a new version keeps its place
    EXPECT_EQ(store().checkpoint("reg"), 42u);
  }
  // Removing a registration removes its delivery state, and only its own.
  EXPECT_TRUE(store().remove_registration("reg"));
  EXPECT_TRUE(store().dead_letters("reg", "", 10).empty());
  EXPECT_EQ(store().dead_letters("other", "", 10), std::vector<ds::DeadLetter>{other});
  if (!GetParam().needs_dynamodb) {
    EXPECT_EQ(store().checkpoint("reg"), std::nullopt);
  }
}

// Many at once: more than one DynamoDB batch (25), a letter named twice, ids that do not exist.
TEST_P(Conformance, PutsCountsAndRemovesDeadLettersInBatches) {
  auto letter = [](const std::string& registration, int i, int attempts = 1) {
    char id[32];
    std::snprintf(id, sizeof id, "%020d#R%d", i, i);
    return ds::DeadLetter{registration, id, R"({"id":")" + std::string(id) + R"("})", attempts, "failed", 100 + i,
                          1'000'000 + i};
  };
  std::vector<ds::DeadLetter> letters;
  for (int i = 1; i <= 60; ++i) letters.push_back(letter("reg", i));
  letters.push_back(letter("reg", 7, 99));  // named twice: the last one is stored
  letters.push_back(letter("other", 1));
  store().put_dead_letters(letters);
  store().put_dead_letters({});
  EXPECT_EQ(store().count_dead_letters("reg"), 60u);
  EXPECT_EQ(store().count_dead_letters("other"), 1u);
  EXPECT_EQ(store().count_dead_letters("nobody"), 0u);
  std::vector<ds::DeadLetter> stored = store().dead_letters("reg", "", 100);
  ASSERT_EQ(stored.size(), 60u);
  EXPECT_EQ(stored[0], letters[0]);  // every field, its expiry too
  EXPECT_EQ(stored[6], letters[60]);
  EXPECT_EQ(stored[59], letters[59]);

  const std::vector<std::string> some{stored[0].event_id, stored[1].event_id, stored[0].event_id, "no such id"};
  EXPECT_EQ(store().remove_dead_letters("reg", std::span<const std::string>(some)), 2u);
  EXPECT_EQ(store().remove_dead_letters("reg", std::span<const std::string>(some)), 0u);
  EXPECT_EQ(store().remove_dead_letters("reg", std::span<const std::string>()), 0u);
  EXPECT_EQ(store().count_dead_letters("reg"), 58u);
  EXPECT_EQ(store().dead_letters("reg", "", 1).at(0), stored[2]);
  EXPECT_TRUE(store().remove_dead_letter("reg", stored[2].event_id));
  EXPECT_FALSE(store().remove_dead_letter("reg", stored[2].event_id));

  EXPECT_EQ(store().remove_dead_letters("reg", std::nullopt), 57u);
  EXPECT_EQ(store().count_dead_letters("reg"), 0u);
  EXPECT_TRUE(store().dead_letters("reg", "", 100).empty());
  EXPECT_EQ(store().remove_dead_letters("reg", std::nullopt), 0u);
  EXPECT_EQ(store().dead_letters("other", "", 10), std::vector<ds::DeadLetter>{letters.back()}) << "only its own";
}

TEST_P(Conformance, PurgeDropsExpiredDeadLetters) {
  const ds::DeadLetter soon{"reg", "00000000000000000001#R1", "{}", 1, "x", 10, 100};
  const ds::DeadLetter later{"reg", "00000000000000000002#R2", "{}", 1, "x", 20, 300};
  const ds::DeadLetter never{"reg", "00000000000000000003#R3", "{}", 1, "x", 30};
  store().put_dead_letters(std::vector<ds::DeadLetter>{soon, later, never});
  EXPECT_EQ(store().purge(200), 0u) << "the shadows' purge leaves dead letters";
  EXPECT_EQ(store().purge_dead_letters(200), 1u);
  EXPECT_EQ(store().dead_letters("reg", "", 10), (std::vector<ds::DeadLetter>{later, never}));
  EXPECT_EQ(store().purge_dead_letters(INT64_MAX - 1), 1u);
  EXPECT_EQ(store().dead_letters("reg", "", 10), std::vector<ds::DeadLetter>{never});
}

TEST_P(Conformance, KeepsRegistrationsByIdAcrossReopen) {
  EXPECT_TRUE(store().list_registrations().empty());
  const ds::RegistrationRecord b{"ops.alerts-2", R"({"id":"ops.alerts-2","match":"^My House#.*$"})", 7};
  const ds::RegistrationRecord a{"audit", R"({"id":"audit"})", 5};
  store().put_registration(b);
  store().put_registration(a);
  EXPECT_EQ(store().list_registrations(), (std::vector<ds::RegistrationRecord>{a, b}));
  const ds::RegistrationRecord b2{"ops.alerts-2", R"({"id":"ops.alerts-2","enabled":false})", 9};
  store().put_registration(b2);  // replaces
  EXPECT_EQ(store().list_registrations(), (std::vector<ds::RegistrationRecord>{a, b2}));
  EXPECT_TRUE(store().remove_registration("audit"));
  EXPECT_FALSE(store().remove_registration("audit"));
  EXPECT_FALSE(store().remove_registration("never"));
  reopen();
  const bool durable = store().list_registrations().size() == 1;
  EXPECT_TRUE(durable || GetParam().name == "memory");
  if (durable) {
    EXPECT_EQ(store().list_registrations().front(), b2);
  }
}

TEST_P(Conformance, AClaimIsGrantedToOneOwnerUntilItExpires) {
  if (!GetParam().needs_dynamodb) {  // one process uses it: every claim is granted
    EXPECT_TRUE(store().claim("req-1", "a", 100, 200));
    EXPECT_TRUE(store().claim("req-1", "b", 100, 200));
    return;
  }
  EXPECT_TRUE(store().claim("req-1", "a", 100, 200));
  EXPECT_TRUE(store().claim("req-1", "a", 150, 250));   // its own again (a retried claim)
  EXPECT_FALSE(store().claim("req-1", "b", 150, 250));  // held by a
  EXPECT_TRUE(store().claim("req-2", "b", 150, 250));   // another id
  EXPECT_TRUE(store().claim("req-1", "b", 251, 400));   // a's claim expired
  EXPECT_FALSE(store().claim("req-1", "a", 300, 500));
}

TEST_P(Conformance, ConcurrentClaimsHaveOneWinner) {
  std::atomic<int> granted{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < 8; ++i) {
    threads.emplace_back([&, i] {
      if (store().claim("contended", "owner-" + std::to_string(i), 1000, 2000)) ++granted;
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(granted.load(), GetParam().needs_dynamodb ? 1 : 8);  // one process uses the others: all granted
}

INSTANTIATE_TEST_SUITE_P(Stores, Conformance, ::testing::ValuesIn(all_store_kinds()), store_kind_name);

}  // namespace
