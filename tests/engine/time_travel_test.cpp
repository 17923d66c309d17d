// Time travel on every store: as-of reads must give, byte for byte, what a GET returned right
// after each write of long random sequences; bounds, diffs and the errors of docs/api.md.
#include "deviceshadow/time_travel.hpp"
#include "support/engine_fixture.hpp"
#include "support/forwarding_store.hpp"

#include <map>
#include <random>

namespace {

using ds::Moment;

class TimeTravelTest : public EngineTest {
 protected:
  ds::ShadowKey key{"tt", "main"};

  std::string newest_event() {
    ds::HistoryRequest q;
    q.limit = 1;
    return engine().history(key, q).events.at(0).id;
  }
  std::string body_now(bool metadata) {
    try {
      return ds::render_shadow(engine().get(key), metadata ? &engine().options().document.timestamp_keys : nullptr);
    } catch (const ds::Error& e) {
      if (e.code() != ds::ErrorCode::not_found) throw;
      return "absent";
    }
  }
  std::string body_as_of(const Moment& m, bool metadata) {
    try {
      return ds::render_shadow(ds::shadow_as_of(engine(), key, m).view,
                               metadata ? &engine().options().document.timestamp_keys : nullptr);
    } catch (const ds::Error& e) {
      if (e.code() != ds::ErrorCode::not_found) throw;
      return "absent";
    }
  }
  static Moment event_moment(const std::string& id) {
    Moment m;
    m.kind = Moment::Kind::event;
    m.event_id = id;
    return m;
  }
  static Moment time_moment(std::int64_t ns) {
    Moment m;
    m.time_ns = ns;
    return m;
  }

  // Random writes, each followed by a GET; then every as-of read must give what its GET gave,
  // reading at most `max_events_read` events when not 0 (past the first few writes).
  void check_random_sequence(std::size_t max_events_read = 0);

  struct Seen {
    std::string id;
    std::int64_t time;
    std::string body, with_metadata;
    std::uint64_t reported_version, desired_version;
  };

  // Every page of a series, `limit` points a page.
  std::vector<ds::SeriesPoint> whole_series(const std::string& path, ds::Section section, std::size_t limit) {
    ds::SeriesRequest q;
    q.path = path;
    q.section = section;
    q.limit = limit;
    std::vector<ds::SeriesPoint> all;
    for (;;) {
      ds::Series page = ds::shadow_series(engine(), key, q);
      EXPECT_LE(page.points.size(), limit);
      for (ds::SeriesPoint& p : page.points) all.push_back(std::move(p));
      if (page.cursor.empty()) return all;
      q.cursor = page.cursor;
    }
  }

  // The value at `path` of a section in a GET body, as JSON text ("" when absent).
  static std::string value_in(const std::string& body, ds::Section section, const std::string& path) {
    if (body == "absent") return "";
    const ds::json::value v = ds::parse_json(body);
    const ds::json::value* node = &v.at(ds::to_string(section)).at("state");
    for (std::size_t i = 1, end; node && i <= path.size(); i = end + 1) {
      end = std::min(path.find('/', i), path.size());
      const std::string token = path.substr(i, end - i);
      if (const ds::json::object* o = node->if_object()) {
        node = o->if_contains(token);
      } else if (const ds::json::array* a = node->if_array()) {
        const std::size_t k = std::stoul(token);
        node = k < a->size() ? &(*a)[k] : nullptr;
      } else {
        node = nullptr;
      }
    }
    return node ? ds::to_json(*node) : "";
  }

  // Each point shows the value a GET showed right after its event, and every event that
  // changed the value has its point (an event may also change something at the path and leave
  // the value as it was, as when an array drops one of two equal elements).
  void check_series(const std::vector<Seen>& seen) {
    std::size_t points = 0;
    for (const ds::Section section : {ds::Section::reported, ds::Section::desired}) {
      for (const std::string path : {"/a", "/nest", "/nest/y/z", "/list", "/list/0/v", "/temp", "/plain/2", "/mode"}) {
        SCOPED_TRACE(std::string(ds::to_string(section)) + " " + path);
        const std::vector<ds::SeriesPoint> series = whole_series(path, section, 7);
        std::size_t next = 0;
        std::string before;
        for (const Seen& s : seen) {
          const std::string now = value_in(s.body, section, path);
          const bool has_point = next < series.size() && series[next].event_id == s.id;
          if (now != before) {
            EXPECT_TRUE(has_point) << "no point for event " << s.id << ": " << now;
          }
          if (has_point) {
            const ds::SeriesPoint& p = series[next++];
            const std::string value = p.value ? ds::to_json(*p.value) : "";
            EXPECT_TRUE(value == now || (!now.empty() && !value.empty() && ds::parse_json(value) == ds::parse_json(now)))
                << "event " << s.id << ": " << value << " for " << now;
            EXPECT_EQ(p.timestamp_ns, std::stoll(s.id.substr(0, 20)));
            EXPECT_EQ(p.ts.has_value(), path == "/temp" && p.value.has_value());
          }
          before = now;
        }
        EXPECT_EQ(next, series.size()) << "points for events that stored nothing";
        points += series.size();
      }
    }
    EXPECT_GT(points, seen.size());
  }
};

// A random state: a few top-level members, nested objects (with nulls and empty objects that
// empty a nested object and keep it), arrays of objects with and without ids (with elements
// emptied, kept or dropped), arrays of scalars, timestamped values (sometimes older than the
// stored one).
std::string random_state(std::mt19937& rng, std::int64_t now_s) {
  auto pick = [&](int n) { return static_cast<int>(rng() % static_cast<unsigned>(n)); };
  static const char* keys[] = {"a", "b", "c", "nest", "list", "plain", "temp", "mode"};
  std::string out = "{";
  const int members = 1 + pick(4);
  for (int i = 0; i < members; ++i) {
    const std::string key = keys[pick(8)];
    if (out.find("\"" + key + "\"") != std::string::npos) continue;
    if (out.size() > 1) out += ',';
    out += "\"" + key + "\":";
    if (pick(9) == 0) {
      out += "null";
    } else if (key == "nest") {
      const std::string z = pick(3) ? "{\"z\":" + (pick(3) ? std::to_string(pick(3)) : "null") + "}" : "{}";
      out += pick(6) == 0 ? "{}" : "{\"x\":" + (pick(4) ? std::to_string(pick(3)) : "null") + (pick(2) ? ",\"y\":" + z : "") + "}";
    } else if (key == "list") {
      out += "[";
      const bool ids = pick(3) != 0;
      for (int k = 0, n = pick(4); k < n; ++k) {
        if (k) out += ',';
        const int v = pick(6);  // 4: null, 5: no v
        const std::string member = v == 5 ? "" : "\"v\":" + (v == 4 ? "null" : std::to_string(v));
        out += ids ? "{\"id\":" + std::to_string(pick(5)) + (member.empty() ? "" : "," + member) + "}" : "{" + member + "}";
      }
      out += "]";
      if (ids) {  // ids must be unique: drop the list when they are not
        std::map<std::string, int> seen;
        for (std::size_t p = out.rfind('['); (p = out.find("\"id\":", p)) != std::string::npos; p += 5) {
          if (seen[out.substr(p + 5, 1)]++) {
            out.erase(out.rfind('['));
            out += "[{\"v\":1}]";
            break;
          }
        }
      }
    } else if (key == "plain") {
      out += "[1,2," + std::to_string(pick(3)) + "]";
    } else if (key == "temp") {
      out += "{\"value\":" + std::to_string(pick(4)) + ".5,\"ts\":" + std::to_string(now_s - pick(3)) + "}";
    } else {
      out += pick(2) ? std::to_string(pick(4)) : "\"s" + std::to_string(pick(3)) + "\"";
    }
  }
  return out + "}";
}

TEST_P(TimeTravelTest, AsOfReadsGiveWhatAGetGaveAfterEachWrite) { check_random_sequence(); }

// With an image every 3 events, as-of reads start from one, read a handful of events, and give
// the same answers.
TEST_P(TimeTravelTest, AsOfReadsFromImagesGiveWhatAGetGave) {
  ds::EngineOptions o;
  o.history_image_every = 3;
  make_engine(o);
  check_random_sequence(4);
}

// Writes whose events outweigh the state get images more often than every 64 events: each
// write here replaces a 12 KB value (its event holds the old and new one), so an image comes
// about every other write and an as-of read replays a few events, not up to 64.
TEST_P(TimeTravelTest, LargeChangesGetImagesSooner) {
  std::string last;
  for (int i = 0; i < 40; ++i) {
    clock_ += 1'000'000'000;
    engine().update(request(key.thing, ds::Section::reported,
                            "{\"blob\":\"" + std::string(12000, static_cast<char>('a' + i % 26)) + "\",\"n\":" +
                                std::to_string(i) + "}"));
    last = newest_event();
  }
  const ds::PastShadow past = ds::shadow_as_of(engine(), key, event_moment(last));
  EXPECT_LE(past.events_read, 4u);
  EXPECT_NE(ds::render_shadow(past.view, nullptr).find("\"n\":39"), std::string::npos);
}

// Replay reads events without a document of them: keys and strings that need escapes, strings
// and keys longer than the parser's buffers (which arrive in parts), client tokens with quotes
// and values of every kind come back as the GET after each write showed them.
TEST_P(TimeTravelTest, EscapedAndLongValuesReplayExactly) {
  auto long_text = [](int units) {  // JSON string text with an escape in every unit
    std::string out;
    for (int i = 0; i < units; ++i) out += i % 3 ? "q\\\"" : "\\u00e9\\n";
    return out;
  };
  std::vector<std::pair<std::string, std::string>> seen;  // event id, GET with metadata
  for (int i = 0; i < 12; ++i) {
    clock_ += 1'000'000'000;
    ds::UpdateRequest r = request(key.thing, i % 3 ? ds::Section::reported : ds::Section::desired,
                                  "{\"a\\\"b/c~d\":\"" + long_text(20 + 300 * i) + "\",\"\\u03c0\":[" +
                                      std::to_string(i) + ",-1.5e-7,true,null,{\"k\\n\":\"v\"}],\"n\":" +
                                      std::to_string(i) + ",\"old\":{\"new\":\"changes\"},\"deep\":{\"" +
                                      long_text(1200 + i % 2) + "\":" + std::to_string(i) + "}}");
    r.client_token = "t\"" + std::to_string(i);
    engine().update(r);
    seen.emplace_back(newest_event(), body_now(true));
  }
  for (const auto& [id, body] : seen) {
    SCOPED_TRACE("after event " + id);
    const std::string past = body_as_of(event_moment(id), true);
    if (GetParam().needs_dynamodb) {
      EXPECT_EQ(ds::parse_json(past), ds::parse_json(body));
    } else {
      EXPECT_EQ(past, body);
    }
  }
}

// So do small writes to a larger state, once their events outweigh it and 4 KiB: a sensor
// shadow of 40 members, each report changing three, replays at most about 4 KiB of events (about
// 16 here), not 64.
TEST_P(TimeTravelTest, SmallChangesOfALargerStateGetImagesSooner) {
  std::vector<std::string> events;
  for (int i = 0; i < 200; ++i) {
    clock_ += 1'000'000'000;
    engine().update(request(key.thing, ds::Section::reported,
                            "{\"temp\":" + std::to_string(20 + i % 7) + ",\"humidity\":" + std::to_string(i % 50) +
                                ",\"m" + std::to_string(i % 40) + "\":" + std::to_string(i) + "}"));
    events.push_back(newest_event());
  }
  std::size_t most = 0;
  for (std::size_t i = 100; i < events.size(); ++i) {
    const ds::PastShadow past = ds::shadow_as_of(engine(), key, event_moment(events[i]));
    most = std::max(most, past.events_read);
    EXPECT_NE(ds::render_shadow(past.view, nullptr).find("\"m" + std::to_string(i % 40) + "\":" + std::to_string(i)),
              std::string::npos);
  }
  EXPECT_LE(most, 24u);
  EXPECT_GE(most, 8u);  // and not every few events
}

void TimeTravelTest::check_random_sequence(std::size_t max_events_read) {
  std::mt19937 rng(20261127);
  std::vector<Seen> seen;
  for (int step = 0; step < 160; ++step) {
    clock_ += 1'000'000'000;
    const std::int64_t now_s = clock_.load() / 1'000'000'000;
    const int kind = static_cast<int>(rng() % 20);
    std::string before = seen.empty() ? "" : seen.back().id;
    try {
      if (kind == 0) {
        engine().remove(key);
      } else if (kind == 1) {
        engine().remove(key, rng() % 2 ? ds::Section::reported : ds::Section::desired);
      } else if (kind <= 4) {  // both sections at once
        ds::ShadowUpdate u;
        u.key = key;
        u.reported = ds::SectionUpdate{ds::parse_json(random_state(rng, now_s)).as_object()};
        u.desired = ds::SectionUpdate{ds::parse_json(random_state(rng, now_s)).as_object()};
        u.client_token = "u" + std::to_string(step);
        engine().update(u);
      } else {
        ds::UpdateRequest r = request(key.thing, kind % 3 ? ds::Section::reported : ds::Section::desired,
                                      random_state(rng, now_s));
        if (kind % 4 == 0) r.mode = ds::MergeMode::client_is_master;
        if (kind == 7) r.tz = "Europe/Stockholm";
        if (kind == 8) r.tz = "UTC";
        if (kind % 5 == 0) r.client_token = "c" + std::to_string(step);
        engine().update(r);
      }
    } catch (const ds::Error& e) {
      ASSERT_EQ(e.code(), ds::ErrorCode::not_found) << e.what();  // deleting what is not there
    }
    std::string id;
    try {
      id = newest_event();
    } catch (const std::out_of_range&) {
      continue;
    }
    if (id == before) continue;  // nothing stored
    const ds::ShadowRecord now = store().read(key);
    seen.push_back({id, clock_.load(), body_now(false), body_now(true), now.reported.version, now.desired.version});
  }
  ASSERT_GT(seen.size(), 100u);
  clock_ += 1'000'000'000;
  check_series(seen);
  const ds::HistoryBounds bounds = ds::history_bounds(engine(), key);
  EXPECT_EQ(bounds.oldest.id, seen.front().id);
  EXPECT_EQ(bounds.newest.id, seen.back().id);
  EXPECT_TRUE(bounds.complete);
  if (!GetParam().shared_version) {
    EXPECT_EQ(bounds.oldest.reported_version, seen.front().reported_version);
    EXPECT_EQ(bounds.oldest.desired_version, seen.front().desired_version);
    EXPECT_EQ(bounds.newest.reported_version, seen.back().reported_version);
    EXPECT_EQ(bounds.newest.desired_version, seen.back().desired_version);
  }
  // DynamoDB keeps states as maps, which do not keep member order: its GET lists members in
  // the order DynamoDB returns them, so there the bodies are compared as JSON values.
  auto same = [&](const std::string& a, const std::string& b) {
    return GetParam().needs_dynamodb && a != "absent" && b != "absent" ? ds::parse_json(a) == ds::parse_json(b) : a == b;
  };
  for (std::size_t i = 0; i < seen.size(); ++i) {
    SCOPED_TRACE("after event " + seen[i].id + ": " + seen[i].body);
    EXPECT_PRED2(same, body_as_of(event_moment(seen[i].id), false), seen[i].body);
    if (max_events_read && i > max_events_read && seen[i].body != "absent") {
      EXPECT_LE(ds::shadow_as_of(engine(), key, event_moment(seen[i].id)).events_read, max_events_read);
    }
    EXPECT_PRED2(same, body_as_of(event_moment(seen[i].id), true), seen[i].with_metadata);
    EXPECT_PRED2(same, body_as_of(time_moment(seen[i].time + 500'000'000), false), seen[i].body);
    if (seen[i].body != "absent" && !GetParam().shared_version) {
      Moment m;
      m.kind = Moment::Kind::reported_version;
      m.version = seen[i].reported_version;
      if (m.version > 0 && seen[i].body.find("\"reported\":{\"state\":{},\"version\":") == std::string::npos &&
          (i == 0 || seen[i - 1].reported_version != m.version)) {  // the event that gave it
        EXPECT_PRED2(same, body_as_of(m, false), seen[i].body);
      }
    }
  }
}

TEST_P(TimeTravelTest, BoundsDiffAndErrors) {
  const std::int64_t t0 = clock_.load();
  clock_ += 1000;
  report(key.thing, R"({"a":1,"b":{"c":2}})");
  const std::string first = newest_event();
  clock_ += 1000;
  report(key.thing, R"({"a":2,"b":null,"d":[1]})");
  clock_ += 1000;
  desire(key.thing, R"({"a":3})");
  clock_ += 1000;
  engine().remove(key);
  const std::string deleted = newest_event();

  ds::HistoryBounds b = ds::history_bounds(engine(), key);
  EXPECT_EQ(b.oldest.id, first);
  EXPECT_EQ(b.newest.id, deleted);
  EXPECT_TRUE(b.complete);
  if (!GetParam().shared_version) {
    EXPECT_EQ(b.oldest.reported_version, 1u);
    EXPECT_EQ(b.oldest.desired_version, 0u);
    EXPECT_EQ(b.newest.reported_version, 3u);
    EXPECT_EQ(b.newest.desired_version, 2u);
  }

  ds::ShadowDiff d = ds::shadow_diff(engine(), key, event_moment(first), time_moment(t0 + 3500));
  std::string changes;
  for (const ds::Change& c : d.changes) ds::append_json(changes, c);
  EXPECT_EQ(changes,
            R"({"section":"reported","op":"update","path":"/a","old":1,"new":2})"
            R"({"section":"reported","op":"remove","path":"/b/c","old":2})"
            R"({"section":"reported","op":"add","path":"/d","new":[1]})"
            R"({"section":"desired","op":"add","path":"/a","new":3})");

  // A deleted shadow reads as of before its delete; not after it, nor before it existed.
  EXPECT_NE(body_as_of(time_moment(t0 + 3500), false), "absent");
  EXPECT_EQ(body_as_of(event_moment(deleted), false), "absent");
  EXPECT_EQ(body_as_of(time_moment(t0), false), "absent");
  EXPECT_EQ(error_of([&] { ds::shadow_as_of(engine(), key, time_moment(clock_.load() + 1'000'000'000)); }), "invalid_request");
  EXPECT_EQ(error_of([&] { ds::shadow_as_of(engine(), key, event_moment("00000000000000000001#R1")); }), "not_found");
  EXPECT_EQ(error_of([&] { ds::shadow_as_of(engine(), key, event_moment("junk")); }), "invalid_request");
  // An id whose 20-digit time is past int64 is refused, not read as a time.
  EXPECT_EQ(error_of([&] { ds::shadow_as_of(engine(), key, event_moment("99999999999999999999#R1")); }), "invalid_request");
  EXPECT_EQ(error_of([] { ds::parse_moment("99999999999999999999#R1", "from"); }), "invalid_request");
  Moment huge;
  huge.kind = Moment::Kind::desired_version;
  huge.version = UINT64_MAX;
  EXPECT_EQ(error_of([&] { ds::shadow_as_of(engine(), key, huge); }), "not_found");
  EXPECT_EQ(error_of([&] { ds::history_bounds(engine(), {"nobody", "main"}); }), "not_found");
  EXPECT_EQ(error_of([] { ds::parse_moment("yesterday", "from"); }), "invalid_request");
}

// A moment later than now is refused first, whether or not the shadow has a history, naming the
// parameter that gave it; a diff compares values as the merge does (1 and 1.0 are one value).
TEST_P(TimeTravelTest, FutureMomentsAreRefusedAndDiffsCompareNumbersByValue) {
  const std::int64_t t0 = clock_.load();
  clock_ += 1000;
  report(key.thing, R"({"a":1})");
  const std::string first = newest_event();
  clock_ += 1000;
  report(key.thing, R"({"a":2})");
  clock_ += 1000;
  report(key.thing, R"({"a":1.0,"b":true})");
  std::string changes;
  for (const ds::Change& c : ds::shadow_diff(engine(), key, event_moment(first), std::nullopt).changes) {
    ds::append_json(changes, c);
  }
  EXPECT_EQ(changes, R"({"section":"reported","op":"add","path":"/b","new":true})");

  const Moment future = ds::parse_moment("2099-01-01T00:00:00Z", "to");
  auto field_of = [](const std::function<void()>& f) -> std::string {
    try {
      f();
    } catch (const ds::Error& e) {
      return std::string(ds::code_name(e.code())) + " " + e.details().field;
    }
    return "none";
  };
  EXPECT_EQ(field_of([&] { ds::shadow_diff(engine(), key, time_moment(t0 + 1500), future); }), "invalid_request to");
  EXPECT_EQ(field_of([&] { ds::shadow_as_of(engine(), {"nobody", "main"}, time_moment(clock_.load() + 1)); }),
            "invalid_request asOf");
  EXPECT_EQ(field_of([&] { ds::shadow_diff(engine(), {"nobody", "main"}, ds::parse_moment("2099-01-01T00:00:00Z", "from"),
                                           std::nullopt); }),
            "invalid_request from");
  EXPECT_EQ(field_of([&] { ds::shadow_diff(engine(), {"nobody", "main"}, time_moment(t0), future); }),
            "invalid_request to");
}

// Bounds of a long history read its ends only: a section the oldest events do not touch takes
// its version from the image after them. Whether the history is complete depends on whether the
// section existed before the oldest event kept.
TEST_P(TimeTravelTest, BoundsOfALongHistory) {
  ds::EngineOptions o;
  o.history_retention = std::chrono::seconds(1000);
  make_engine(o);
  desire(key.thing, R"({"mode":"eco"})");
  clock_ += 2'000'000'000'000;  // the desire expires; 200 reports later, one desire
  for (int i = 0; i < 200; ++i) {
    clock_ += 1'000'000'000;
    report(key.thing, "{\"n\":" + std::to_string(i) + "}");
    if (i == 0) engine().purge();
  }
  desire(key.thing, R"({"mode":"away"})");
  const ds::HistoryBounds b = ds::history_bounds(engine(), key);
  EXPECT_FALSE(b.complete);  // desired existed before the oldest event kept
  if (!GetParam().shared_version) {
    EXPECT_EQ(b.oldest.reported_version, 1u);
    EXPECT_EQ(b.oldest.desired_version, 1u);
    EXPECT_EQ(b.newest.reported_version, 200u);
    EXPECT_EQ(b.newest.desired_version, 2u);
  }
}

// The store calls an as-of read makes, whatever the history's length: three for a time or an
// event (the event, the image before it, the events between); a version bisects the history's
// span over images, one lookup a step.
TEST_P(TimeTravelTest, AsOfReadsMakeFewStoreCalls) {
  struct Counting final : ForwardingStore {
    using ForwardingStore::ForwardingStore;
    std::vector<ds::ShadowRecord> read(std::span<const ds::ShadowKey> keys) override {
      ++calls;
      return ForwardingStore::read(keys);
    }
    std::vector<ds::HistoryEvent> history(const ds::ShadowKey& key, const ds::HistoryQuery& q) override {
      ++calls;
      return ForwardingStore::history(key, q);
    }
    std::optional<ds::StateImage> image_before(const ds::ShadowKey& key, std::string_view id) override {
      ++calls;
      return ForwardingStore::image_before(key, id);
    }
    int calls = 0;
  } counting(store());
  ds::EngineOptions o;
  o.clock = [this] { return clock_.load(); };
  ds::Engine reader(counting, o);
  std::vector<std::pair<std::string, std::int64_t>> events;
  for (int i = 0; i < 600; ++i) {
    clock_ += 1'000'000;
    if (i % 7 == 3) {
      desire(key.thing, "{\"mode\":" + std::to_string(i) + "}");
    } else {
      report(key.thing, "{\"n\":" + std::to_string(i) + ",\"m" + std::to_string(i % 9) + "\":1}");
    }
    events.emplace_back(newest_event(), clock_.load());
  }
  for (std::size_t i = 10; i < events.size(); i += 37) {
    SCOPED_TRACE(events[i].first);
    counting.calls = 0;
    EXPECT_EQ(ds::shadow_as_of(reader, key, time_moment(events[i].second)).event.id, events[i].first);
    EXPECT_LE(counting.calls, 3);
    counting.calls = 0;
    const ds::PastShadow past = ds::shadow_as_of(reader, key, event_moment(events[i].first));
    EXPECT_LE(counting.calls, 3);
    // (In the combined layout a version names an event only for the section it stored.)
    for (ds::Section s : {ds::Section::reported, ds::Section::desired}) {
      if (GetParam().shared_version) break;
      Moment m;
      m.kind = s == ds::Section::reported ? Moment::Kind::reported_version : Moment::Kind::desired_version;
      m.version = s == ds::Section::reported ? past.event.reported_version : past.event.desired_version;
      counting.calls = 0;
      const ds::PastShadow by_version = ds::shadow_as_of(reader, key, m);
      EXPECT_LE(by_version.event.id, events[i].first);  // the event that gave the version
      EXPECT_EQ(s == ds::Section::reported ? by_version.event.reported_version : by_version.event.desired_version, m.version);
      EXPECT_LE(counting.calls, 40);
      EXPECT_LE(by_version.events_read, 70u);
    }
  }
}

TEST_P(TimeTravelTest, MomentsBeforeRetentionAreExpired) {
  ds::EngineOptions o;
  o.history_retention = std::chrono::seconds(10);
  make_engine(o);
  const std::int64_t t0 = clock_.load();
  report(key.thing, R"({"a":1})");
  clock_ += 20'000'000'000;
  report(key.thing, R"({"a":2})");
  engine().purge();
  try {
    ds::shadow_as_of(engine(), key, time_moment(t0 + 1));
    ADD_FAILURE() << "no error";
  } catch (const ds::Error& e) {
    EXPECT_EQ(e.code(), ds::ErrorCode::history_expired);
    EXPECT_EQ(e.details().oldest_id, newest_event());
    EXPECT_NE(ds::render_error(e).find(R"("oldest":{"id":)"), std::string::npos);
  }
  EXPECT_FALSE(ds::history_bounds(engine(), key).complete);
  // The moment right after the one event kept is the shadow as it is now.
  EXPECT_EQ(body_as_of(time_moment(clock_.load()), false), body_now(false));
}

TEST_P(TimeTravelTest, SeriesOfOnePath) {
  report(key.thing, R"({"temp":{"value":20,"ts":"2026-01-01T00:00:00Z"},"pos":{"lat":1,"lon":2}})");
  clock_ += 1000;
  report(key.thing, R"({"temp":{"value":21,"ts":"2026-01-01T00:01:00Z"},"other":1})");
  clock_ += 1000;
  report(key.thing, R"({"pos":{"lat":3}})");
  clock_ += 1000;
  desire(key.thing, R"({"pos":{"lat":5}})");
  clock_ += 1000;
  report(key.thing, R"({"pos":null})");
  clock_ += 1000;
  report(key.thing, R"({"pos":7})");

  ds::SeriesRequest q;
  q.path = "/pos";
  auto render = [](const ds::Series& s) {
    std::string out;
    for (const ds::SeriesPoint& p : s.points) out += (p.value ? ds::to_json(*p.value) : "-") + " ";
    return out;
  };
  EXPECT_EQ(render(ds::shadow_series(engine(), key, q)), R"({"lat":1,"lon":2} {"lat":3,"lon":2} - 7 )");
  q.path = "/pos/lat";  // a leaf the kind change of /pos removes, then one that holds none
  EXPECT_EQ(render(ds::shadow_series(engine(), key, q)), "1 3 - ");
  q.section = ds::Section::desired;
  EXPECT_EQ(render(ds::shadow_series(engine(), key, q)), "5 ");
  q.section = ds::Section::reported;
  q.path = "/temp";
  const ds::Series temp = ds::shadow_series(engine(), key, q);
  ASSERT_EQ(temp.points.size(), 2u);
  EXPECT_EQ(ds::format_rfc3339(*temp.points[1].ts), "2026-01-01T00:01:00.000000000Z");
  if (!GetParam().shared_version) {
    EXPECT_EQ(temp.points[1].version, 2u);
  }
  q.since_ns = temp.points[1].timestamp_ns;
  EXPECT_EQ(ds::shadow_series(engine(), key, q).points.size(), 1u);
  q.since_ns.reset();
  q.until_ns = temp.points[0].timestamp_ns;
  EXPECT_EQ(ds::shadow_series(engine(), key, q).points.size(), 1u);
  q.until_ns.reset();
  q.path = "/missing";
  EXPECT_TRUE(ds::shadow_series(engine(), key, q).points.empty());

  // Bad input: a malformed pointer, the root, a limit out of range, a malformed cursor.
  for (const char* bad : {"temp", "", "/a~2", "/a~"}) {
    q.path = bad;
    EXPECT_EQ(error_of([&] { ds::shadow_series(engine(), key, q); }), "invalid_request") << bad;
  }
  q.path = "/temp";
  q.limit = 0;
  EXPECT_EQ(error_of([&] { ds::shadow_series(engine(), key, q); }), "invalid_request");
  q.limit = 1;
  q.cursor = "!!";
  EXPECT_EQ(error_of([&] { ds::shadow_series(engine(), key, q); }), "invalid_request");
  q.cursor = ds::encode_cursor("not an event");
  EXPECT_EQ(error_of([&] { ds::shadow_series(engine(), key, q); }), "invalid_request");
  q.cursor.clear();
  EXPECT_FALSE(ds::shadow_series(engine(), key, q).cursor.empty());
  EXPECT_TRUE(ds::shadow_series(engine(), {"nobody", "main"}, q).points.empty());  // as its history page
}

TEST_P(TimeTravelTest, SeriesBeforeTheHistoryKept) {
  ds::EngineOptions o;
  o.history_retention = std::chrono::seconds(10);
  make_engine(o);
  report(key.thing, R"({"temp":1,"pos":{"lat":1,"lon":1}})");
  clock_ += 20'000'000'000;
  report(key.thing, R"({"temp":2,"pos":{"lat":2}})");
  engine().purge();
  ds::SeriesRequest q;
  q.path = "/temp";  // a leaf: its changes tell its values
  ASSERT_EQ(ds::shadow_series(engine(), key, q).points.size(), 1u);
  EXPECT_EQ(ds::to_json(*ds::shadow_series(engine(), key, q).points[0].value), "2");
  q.path = "/pos/lat";
  EXPECT_EQ(ds::to_json(*ds::shadow_series(engine(), key, q).points[0].value), "2");
  q.path = "/pos";  // needs the members no kept event names
  EXPECT_EQ(error_of([&] { ds::shadow_series(engine(), key, q); }), "history_expired");
}

// Two processes (two engines, no cache, an image every write) write the two sections of one
// shadow: one takes its time, the other then writes the other section, and the first commits
// after it. The first write must not land with its earlier time (its image would miss the
// other's change, and as-of reads from it be wrong): the section it did not store is no longer
// as read, so it is decided again, with a time after the other's.
// A store that runs `before_write` once, just before the next write: another process's write
// landing between a write's read and its commit.
class Interleaving final : public ForwardingStore {
 public:
  using ForwardingStore::ForwardingStore;
  void write(const ds::ShadowWrite& w) override {
    if (auto before = std::exchange(before_write, {})) before();
    ForwardingStore::write(w);
  }
  std::function<void()> before_write;
};

TEST_P(TimeTravelTest, WritesOfTwoProcessesToBothSectionsKeepAsOfReadsExact) {
  ds::EngineOptions o;
  o.clock = [this] { return clock_.load(); };
  o.cache_entries = 0;
  o.history_image_every = 1;
  Interleaving interleaving(store());
  ds::Engine a(interleaving, o);
  ds::Engine b(store(), o);
  auto render = [&](ds::Engine& e) { return ds::render_shadow(e.get(key), nullptr); };
  b.update(request("tt", ds::Section::reported, R"({"r":0})"));
  b.update(request("tt", ds::Section::desired, R"({"d":0})"));
  std::string b_body;  // what a GET gave right after the other process's write
  interleaving.before_write = [&] {
    clock_ += 1000;
    b.update(request("tt", ds::Section::desired, R"({"d":1})"));
    b_body = render(b);
  };
  a.update(request("tt", ds::Section::reported, R"({"r":1})"));
  const std::string a_body = render(b);
  ds::HistoryRequest q;
  q.limit = 10;
  const std::vector<ds::HistoryEvent> events = b.history(key, q).events;  // newest first
  ASSERT_EQ(events.size(), 4u);
  auto letter = [](const std::string& id) { return id.at(id.find('#') + 1); };
  EXPECT_EQ(letter(events[0].id), 'R') << "the report commits last, with the latest id";
  EXPECT_EQ(letter(events[1].id), 'D');
  EXPECT_EQ(ds::render_shadow(ds::shadow_as_of(b, key, event_moment(events[1].id)).view, nullptr), b_body);
  EXPECT_EQ(ds::render_shadow(ds::shadow_as_of(b, key, event_moment(events[0].id)).view, nullptr), a_body);
  EXPECT_NE(b_body, a_body);
}

// A write pinned to its section's version, whose other section another process changes between
// its read and its commit, is decided again, not refused: its pin still holds.
TEST_P(TimeTravelTest, APinnedWriteIsNotRefusedForAChangeOfTheOtherSection) {
  ds::EngineOptions o;
  o.clock = [this] { return clock_.load(); };
  o.cache_entries = 0;
  Interleaving interleaving(store());
  ds::Engine a(interleaving, o);
  ds::Engine b(store(), o);
  b.update(request("tt", ds::Section::reported, R"({"r":0})"));
  b.update(request("tt", ds::Section::desired, R"({"d":0})"));
  interleaving.before_write = [&] { b.update(request("tt", ds::Section::desired, R"({"d":1})")); };
  ds::UpdateRequest pinned = request("tt", ds::Section::reported, R"({"r":1})");
  pinned.version = a.get(key).record.reported.version;
  if (store().shares_versions()) {  // one version: the other section's write moved the pin
    EXPECT_EQ(error_of([&] { a.update(pinned); }), "version_conflict");
    return;
  }
  EXPECT_EQ(a.update(pinned).shadow.record.reported.version, 2u);
  interleaving.before_write = [&] { b.update(request("tt", ds::Section::desired, R"({"d":2})")); };
  EXPECT_EQ(a.remove(key, ds::Section::reported, 2).record.reported.version, 3u);
  // A pin that moved is refused with the section's version.
  try {
    a.update(pinned);
    ADD_FAILURE() << "a stale pin was accepted";
  } catch (const ds::Error& e) {
    EXPECT_EQ(e.code(), ds::ErrorCode::version_conflict);
    EXPECT_EQ(e.details().current_version, 3u);
  }
}

TEST_P(TimeTravelTest, HistoryOffRefusesAsOfReads) {
  ds::EngineOptions o;
  o.history = false;
  make_engine(o);
  report(key.thing, R"({"a":1})");
  EXPECT_EQ(error_of([&] { ds::shadow_as_of(engine(), key, time_moment(clock_.load())); }), "invalid_request");
  ds::SeriesRequest q;
  q.path = "/a";
  EXPECT_EQ(error_of([&] { ds::shadow_series(engine(), key, q); }), "invalid_request");
  try {  // says why before judging the moments
    ds::shadow_diff(engine(), key, ds::parse_moment("2099-01-01T00:00:00Z", "from"), std::nullopt);
    ADD_FAILURE() << "a diff without history";
  } catch (const ds::Error& e) {
    EXPECT_NE(std::string(e.what()).find("history is off"), std::string::npos) << e.what();
  }
}

INSTANTIATE_TEST_SUITE_P(Stores, TimeTravelTest, ::testing::ValuesIn(all_store_kinds()), store_kind_name);

}  // namespace
