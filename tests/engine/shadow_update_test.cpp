// Writes of both sections at once (ShadowUpdate, what the AWS IoT facade sends) and the shadow
// version, against every store and both DynamoDB layouts.
#include "support/engine_fixture.hpp"

#include <thread>

namespace {

namespace json = boost::json;

class ShadowUpdateTest : public EngineTest {
 protected:
  static ds::SectionUpdate part(std::string_view state_json, ds::MergeMode mode = ds::MergeMode::server_is_master) {
    return {ds::parse_json(state_json).as_object(), mode, false};
  }
  static ds::SectionUpdate removal() { return {{}, ds::MergeMode::server_is_master, true}; }
  static ds::ShadowUpdate both(std::string thing, std::string_view reported, std::string_view desired) {
    ds::ShadowUpdate u;
    u.key = {std::move(thing), "main"};
    u.reported = part(reported);
    u.desired = part(desired);
    return u;
  }
  bool shared() const { return GetParam().shared_version; }
  std::uint64_t version_of(const ds::ShadowRecord& r) const { return ds::shadow_version(r, shared()); }
  std::vector<json::value> events(const std::string& thing) {
    std::vector<json::value> out;
    for (const ds::HistoryEvent& e : engine().history({thing, "main"}).events) out.push_back(ds::parse_json(e.json));
    return out;
  }
};

TEST_P(ShadowUpdateTest, BothSectionsAreOneWriteAndOneEvent) {
  ds::ShadowUpdate u = both("t", R"({"a":1})", R"({"b":2})");
  u.client_token = "c-1";
  ds::UpdateResult r = engine().update(u);
  EXPECT_TRUE(r.changed);
  EXPECT_EQ(version_of(r.shadow.record), shared() ? 1u : 2u);
  EXPECT_EQ(ds::to_json(r.shadow.delta), R"({"b":2})");
  ds::ShadowRecord stored = store().read({"t", "main"});
  EXPECT_EQ(stored.reported.state_json, R"({"a":1})");
  EXPECT_EQ(stored.desired.state_json, R"({"b":2})");
  EXPECT_EQ(version_of(stored), version_of(r.shadow.record));
  std::vector<json::value> log = events("t");
  ASSERT_EQ(log.size(), 1u);
  EXPECT_EQ(log[0].at("op").as_string(), "update");
  EXPECT_NE(std::string(log[0].at("id").as_string()).find("#C"), std::string::npos);
  EXPECT_EQ(log[0].at("clientToken").as_string(), "c-1");
  EXPECT_EQ(log[0].at("reported").at("changes").as_array().size(), 1u);
  EXPECT_EQ(log[0].at("desired").at("changes").as_array().size(), 1u);
}

TEST_P(ShadowUpdateTest, TheShadowVersionGrowsWithEveryStoredWriteOfEitherApi) {
  EXPECT_EQ(version_of(report("t", R"({"a":1})").shadow.record), 1u);
  EXPECT_EQ(version_of(desire("t", R"({"a":2})").shadow.record), 2u);
  EXPECT_EQ(version_of(engine().update(both("t", R"({"a":3})", R"({"b":1})")).shadow.record), shared() ? 3u : 4u);
}

TEST_P(ShadowUpdateTest, APinnedShadowVersionMustMatch) {
  report("t", R"({"a":1})");
  desire("t", R"({"a":2})");
  ds::ShadowUpdate u;
  u.key = {"t", "main"};
  u.reported = part(R"({"a":3})");
  u.version = 1;
  try {
    engine().update(u);
    FAIL();
  } catch (const ds::Error& e) {
    EXPECT_EQ(e.code(), ds::ErrorCode::version_conflict);
    EXPECT_EQ(*e.details().current_version, 2u);
  }
  u.version = 2;
  EXPECT_EQ(version_of(engine().update(u).shadow.record), 3u);
}

// A write merged against the caller's read (base) is conditional on that read: a base another
// writer has overtaken loses, whatever the section it changed, and nothing is stored.
TEST_P(ShadowUpdateTest, AWriteOnTheCallersReadIsConditionalOnIt) {
  report("t", R"({"fw":"1.2"})");
  const ds::ShadowRecord read = store().read({"t", "main"});
  ds::ShadowUpdate u;
  u.key = {"t", "main"};
  u.desired = part(R"({"fw":"1.3"})");
  u.version = version_of(read);
  u.base = &read;
  ds::Engine other(store(), {});
  other.update(request("t", ds::Section::reported, R"({"fw":"1.4"})"));  // after the read
  EXPECT_EQ(error_of([&] { engine().update(u); }), "version_conflict");
  EXPECT_FALSE(store().read({"t", "main"}).desired.exists());
  const ds::ShadowRecord again = store().read({"t", "main"});
  u.version = version_of(again);
  u.base = &again;
  EXPECT_EQ(engine().update(u).shadow.record.desired.state_json, R"({"fw":"1.3"})");
  EXPECT_EQ(store().read({"t", "main"}).reported.state_json, R"({"fw":"1.4"})");
}

// The pin covers the section a write does not store: another process changing it in between
// makes the pinned write fail, even when this engine's cached copy still matches.
TEST_P(ShadowUpdateTest, APinCoversTheSectionNotWritten) {
  report("t", R"({"a":1})");
  ds::Engine other(store(), {});
  other.update(request("t", ds::Section::desired, R"({"a":9})"));  // not seen by engine()'s cache
  ds::ShadowUpdate u;
  u.key = {"t", "main"};
  u.reported = part(R"({"a":2})");
  u.version = 1;  // the version engine() last saw
  EXPECT_EQ(error_of([&] { engine().update(u); }), "version_conflict");
  EXPECT_EQ(store().read({"t", "main"}).reported.state_json, R"({"a":1})");
  u.version = 2;
  EXPECT_EQ(engine().update(u).shadow.record.reported.state_json, R"({"a":2})");
}

TEST_P(ShadowUpdateTest, ARemovedSectionBecomesATombstoneInTheSameWrite) {
  engine().update(both("t", R"({"a":1})", R"({"b":{"c":2}})"));
  ds::ShadowUpdate u;
  u.key = {"t", "main"};
  u.reported = part(R"({"a":5})");
  u.desired = removal();
  ds::UpdateResult r = engine().update(u);
  EXPECT_FALSE(r.shadow.record.desired.exists());
  EXPECT_TRUE(r.shadow.record.reported.exists());
  ds::ShadowRecord stored = store().read({"t", "main"});
  EXPECT_FALSE(stored.desired.exists());
  EXPECT_EQ(stored.reported.state_json, R"({"a":5})");
  json::value last = events("t").front();
  EXPECT_EQ(ds::to_json(last.at("desired").at("changes")), R"([{"op":"remove","path":"/b/c","old":2}])");
  // Removing a section that is not there stores nothing, unless every update must store.
  EXPECT_FALSE(engine().update(u).changed);
  u.always_store = true;
  ds::UpdateResult again = engine().update(u);
  EXPECT_TRUE(again.changed);
  EXPECT_FALSE(again.shadow.record.desired.exists());
  EXPECT_EQ(version_of(again.shadow.record), version_of(r.shadow.record) + (shared() ? 1 : 2));
}

TEST_P(ShadowUpdateTest, AlwaysStoreMovesTheVersionWhenNothingChanged) {
  ds::ShadowUpdate u = both("t", R"({"a":1})", R"({"b":1})");
  u.always_store = true;
  const std::uint64_t first = version_of(engine().update(u).shadow.record);
  ds::UpdateResult same = engine().update(u);
  EXPECT_TRUE(same.changed);
  EXPECT_TRUE(same.changes.empty());
  EXPECT_GT(version_of(same.shadow.record), first);
  EXPECT_EQ(version_of(store().read({"t", "main"})), version_of(same.shadow.record));
  EXPECT_EQ(events("t").size(), 2u);
}

// AWS IoT's {"state": null}: both sections emptied, the shadow still there.
TEST_P(ShadowUpdateTest, EmptyStatesWithClientIsMasterEmptyBothSections) {
  engine().update(both("t", R"({"a":1})", R"({"b":1})"));
  ds::ShadowUpdate u;
  u.key = {"t", "main"};
  u.reported = part("{}", ds::MergeMode::client_is_master);
  u.desired = part("{}", ds::MergeMode::client_is_master);
  u.always_store = true;
  engine().update(u);
  ds::ShadowView view = engine().get({"t", "main"});
  EXPECT_EQ(view.record.reported.state_json, "{}");
  EXPECT_EQ(view.record.desired.state_json, "{}");
  EXPECT_TRUE(view.record.exists());
  // The same on a shadow that never existed creates it, empty.
  u.key.thing = "fresh";
  engine().update(u);
  EXPECT_TRUE(engine().get({"fresh", "main"}).record.exists());
}

TEST_P(ShadowUpdateTest, ArraysReplacedWholeWhenAsked) {
  engine().update(both("t", R"({"l":[{"id":1,"v":1},{"id":2,"v":2}]})", "{}"));
  ds::ShadowUpdate u;
  u.key = {"t", "main"};
  u.reported = part(R"({"l":[{"id":2,"v":3}]})");
  u.replace_arrays = true;
  EXPECT_EQ(engine().update(u).shadow.record.reported.state_json, R"({"l":[{"id":2,"v":3}]})");
  u.replace_arrays = false;
  u.reported = part(R"({"l":[{"id":1,"v":1}]})");
  EXPECT_EQ(engine().update(u).shadow.record.reported.state_json, R"({"l":[{"id":2,"v":3},{"id":1,"v":1}]})");
}

TEST_P(ShadowUpdateTest, AcknowledgementCanBeTurnedOff) {
  ds::ShadowUpdate u = both("t", R"({"sp":22})", R"({"sp":22})");
  u.acknowledge = false;
  ds::UpdateResult r = engine().update(u);
  EXPECT_TRUE(r.acknowledged.empty());
  EXPECT_EQ(store().read({"t", "main"}).desired.state_json, R"({"sp":22})");
  EXPECT_EQ(ds::to_json(r.shadow.delta), "{}");
}

TEST_P(ShadowUpdateTest, BadInputInEitherSectionStoresNothing) {
  ds::ShadowUpdate none;
  none.key = {"t", "main"};
  EXPECT_EQ(error_of([&] { engine().update(none); }), "invalid_request");
  EXPECT_EQ(error_of([&] { engine().update(both("t", R"({"a":1})", R"({"b":{"ts":"garbage"}})")); }),
            "invalid_timestamp");
  std::string big = R"({"a":")" + std::string(70000, 'x') + R"("})";
  EXPECT_EQ(error_of([&] { engine().update(both("t", R"({"a":1})", big)); }), "document_too_large");
  ds::ShadowUpdate bad_name = both("t", "{}", "{}");
  bad_name.key.name = std::string(300, 'n');
  EXPECT_EQ(error_of([&] { engine().update(bad_name); }), "invalid_name");
  ds::ShadowRecord stored = store().read({"t", "main"});
  EXPECT_EQ(stored.reported.version + stored.desired.version, 0u);
  EXPECT_TRUE(engine().history({"t", "main"}).events.empty());
}

TEST_P(ShadowUpdateTest, StalePathsNameTheirSection) {
  ds::ShadowUpdate first = both("t", R"({"s":{"on":true,"ts":200}})", R"({"s":{"on":true,"ts":200}})");
  first.acknowledge = false;
  engine().update(first);
  ds::ShadowUpdate late = both("t", R"({"s":{"on":false,"ts":100}})", R"({"s":{"on":false,"ts":100}})");
  late.acknowledge = false;
  ds::UpdateResult r = engine().update(late);
  EXPECT_FALSE(r.changed);
  EXPECT_EQ(r.stale, (std::vector<std::string>{"/reported/s", "/desired/s"}));
}

// Two engines on one store stand for two processes: unpinned two-section writes retry their
// conflicts and lose nothing; every write moves the shadow version.
TEST_P(ShadowUpdateTest, TwoEnginesWritingBothSectionsLoseNoUpdate) {
  ds::EngineOptions o;
  o.backoff_base = std::chrono::microseconds(20);
  o.max_attempts = 1000;
  ds::Engine other(store(), o);
  make_engine(o);
  constexpr int kPerEngine = 60;
  auto writer = [&](ds::Engine& e, char tag) {
    for (int i = 0; i < kPerEngine; ++i) {
      const std::string member = "{\"" + std::string(1, tag) + std::to_string(i) + "\":1}";
      ds::ShadowUpdate u = both("shared", member, member);
      u.acknowledge = false;
      e.update(u);
    }
  };
  std::thread a([&] { writer(engine(), 'a'); });
  std::thread b([&] { writer(other, 'b'); });
  a.join();
  b.join();
  ds::ShadowRecord stored = store().read({"shared", "main"});
  EXPECT_EQ(ds::parse_json(stored.reported.state_json).as_object().size(), 2u * kPerEngine);
  EXPECT_EQ(ds::parse_json(stored.desired.state_json).as_object().size(), 2u * kPerEngine);
  EXPECT_EQ(version_of(stored), (shared() ? 1u : 2u) * 2 * kPerEngine);
}

TEST_P(ShadowUpdateTest, KeepPreviousReturnsTheShadowAsTheWriteFoundIt) {
  report("t", R"({"a":1})");
  desire("t", R"({"a":2})");
  ds::ShadowUpdate u = both("t", R"({"a":3})", R"({"b":1})");
  u.keep_previous = true;
  ds::UpdateResult r = engine().update(u);
  ASSERT_TRUE(r.previous);
  EXPECT_EQ(r.previous->reported.state_json, R"({"a":1})");
  EXPECT_EQ(r.previous->desired.state_json, R"({"a":2})");
  EXPECT_EQ(version_of(*r.previous) + (shared() ? 1 : 2), version_of(r.shadow.record));
  // nothing stored: previous is the shadow as it is
  ds::ShadowUpdate same = both("t", R"({"a":3})", R"({"b":1})");
  same.keep_previous = true;
  ds::UpdateResult unchanged = engine().update(same);
  ASSERT_FALSE(unchanged.changed);
  ASSERT_TRUE(unchanged.previous);
  EXPECT_EQ(version_of(*unchanged.previous), version_of(unchanged.shadow.record));
  EXPECT_FALSE(engine().update(both("t", R"({"a":4})", "{}")).previous);  // not asked for
}

TEST_P(ShadowUpdateTest, AWriteListenerIsToldOfEveryStoredWriteInOrder) {
  struct Seen {
    std::string thing;
    std::string before_reported, after_reported, after_desired;
    std::uint64_t before_version = 0, after_version = 0;
    std::string requested[2];  // "-" when null
    bool shadow_deleted = false;
    std::string client_token;
    ds::WriteSource source = ds::WriteSource::api;
  };
  struct Listener final : ds::WriteListener {
    explicit Listener(std::function<void(const ds::WriteNotice&)> told) : told(std::move(told)) {}
    std::function<void(const ds::WriteNotice&)> told;
    void on_write(const ds::WriteNotice& w) noexcept override { told(w); }
  };
  std::vector<Seen> seen;
  std::size_t second_told = 0;
  Listener listener([&](const ds::WriteNotice& w) {
    Seen s{w.key.thing, w.before.reported.state_json, w.after.reported.state_json, w.after.desired.state_json,
           version_of(w.before), version_of(w.after)};
    for (int i = 0; i < 2; ++i) s.requested[i] = w.requested[i] ? ds::to_json(*w.requested[i]) : "-";
    s.shadow_deleted = w.shadow_deleted;
    s.client_token = std::string(w.client_token);
    s.source = w.source;
    seen.push_back(std::move(s));
  });
  Listener second([&](const ds::WriteNotice&) { ++second_told; });
  engine().add_write_listener(listener);
  engine().add_write_listener(second);
  report("t", R"({"a":1})");                 // API v1
  report("t", R"({"a":1})");                 // nothing stored, nothing seen
  ds::ShadowUpdate u = both("t", R"({"a":2})", R"({"b":1})");
  u.client_token = "tok";
  u.source = ds::WriteSource::aws_mqtt;
  engine().update(u);
  ds::ShadowUpdate removal;
  removal.key = {"t", "main"};
  removal.desired = ShadowUpdateTest::removal();
  engine().update(removal);
  engine().remove({"t", "main"}, ds::Section::reported);
  report("t", R"({"c":1})");
  engine().remove({"t", "main"}, std::nullopt, std::nullopt, ds::WriteSource::aws_http);
  engine().remove_write_listener(listener);
  engine().remove_write_listener(second);
  report("t", R"({"d":1})");

  ASSERT_EQ(seen.size(), 6u);
  EXPECT_EQ(second_told, 6u) << "every listener is told";
  for (std::size_t i = 0; i < seen.size(); ++i) {
    EXPECT_EQ(seen[i].thing, "t");
    if (i > 0) {
      EXPECT_EQ(seen[i].before_version, seen[i - 1].after_version) << i;
    }
    EXPECT_GT(seen[i].after_version, seen[i].before_version) << i;
  }
  EXPECT_EQ(seen[0].before_reported, "{}");
  EXPECT_EQ(seen[0].after_reported, R"({"a":1})");
  EXPECT_EQ(seen[0].requested[0], R"({"a":1})");
  EXPECT_EQ(seen[0].requested[1], "-");
  EXPECT_EQ(seen[0].source, ds::WriteSource::api);
  EXPECT_EQ(seen[1].before_reported, R"({"a":1})");
  EXPECT_EQ(seen[1].after_reported, R"({"a":2})");
  EXPECT_EQ(seen[1].after_desired, R"({"b":1})");
  EXPECT_EQ(seen[1].requested[0], R"({"a":2})");
  EXPECT_EQ(seen[1].requested[1], R"({"b":1})");
  EXPECT_EQ(seen[1].client_token, "tok");
  EXPECT_EQ(seen[1].source, ds::WriteSource::aws_mqtt);
  EXPECT_EQ(seen[2].requested[1], "-");  // desired removed
  EXPECT_EQ(seen[2].after_desired, "{}");
  EXPECT_FALSE(seen[2].shadow_deleted);
  EXPECT_EQ(seen[3].after_reported, "{}");  // reported deleted: a one-section delete
  EXPECT_FALSE(seen[3].shadow_deleted);
  EXPECT_EQ(seen[4].after_reported, R"({"c":1})");
  EXPECT_TRUE(seen[5].shadow_deleted);
  EXPECT_EQ(seen[3].source, ds::WriteSource::api);
  EXPECT_EQ(seen[5].source, ds::WriteSource::aws_http);
}

INSTANTIATE_TEST_SUITE_P(Stores, ShadowUpdateTest, ::testing::ValuesIn(all_store_kinds()), store_kind_name);

}  // namespace
