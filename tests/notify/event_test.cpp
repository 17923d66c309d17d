// Events: which registrations a stored write reaches, the CloudEvent they get, the signature.
// The feed entries come from the engine itself, on a memory store with the change feed on.
#include "deviceshadow/engine.hpp"
#include "deviceshadow/json.hpp"
#include "deviceshadow/memory_store.hpp"
#include "notify/event.hpp"

#include <gtest/gtest.h>

namespace ds = deviceshadow;
namespace notify = deviceshadow::notify;
namespace json = boost::json;

namespace {

class Events : public ::testing::Test {
 protected:
  void SetUp() override {
    ds::EngineOptions options;
    options.clock = [] { return std::int64_t{1'700'000'000'000'000'000}; };
    engine_ = std::make_unique<ds::Engine>(*store_, options);
    engine_->set_change_feed(true);
  }
  void write(const std::string& thing, ds::Section section, const std::string& state, std::string token = "") {
    ds::UpdateRequest r;
    r.key = {thing, "main"};
    r.section = section;
    r.state = ds::parse_json(state).as_object();
    r.client_token = std::move(token);
    engine_->update(r);
  }
  // The entries written since the last call.
  std::vector<std::string> entries() {
    std::vector<std::string> out;
    for (const ds::FeedEntry& e : store_->read_feed(seen_, 100)) {
      out.push_back(e.json);
      seen_ = e.seq;
    }
    return out;
  }
  static notify::Registration registration(const std::string& fields) {
    return notify::parse_registration("reg", "{" + fields + (fields.empty() ? "" : ",") +
                                                 R"("target":{"type":"webhook","url":"http://127.0.0.1:1/"}})");
  }

  std::unique_ptr<ds::StoreBackend> store_ = ds::make_memory_store();
  std::unique_ptr<ds::Engine> engine_;
  std::uint64_t seen_ = 0;
};

TEST_F(Events, AReportBecomesACloudEventWithOldNewAndDiff) {
  write("My House#Basement", ds::Section::reported, R"({"temp":21})");
  entries();
  write("My House#Basement", ds::Section::reported, R"({"temp":22,"hum":40})", "c-17");
  const std::string text = entries().at(0);
  const json::value entry = ds::parse_json(text);
  const json::value e = ds::parse_json(notify::build_event(registration(""), notify::FeedEntryText(text)));
  EXPECT_EQ(e.at("specversion"), "1.0");
  EXPECT_EQ(e.at("source"), "deviceshadow");
  EXPECT_EQ(e.at("type"), "deviceshadow.shadow.updated");
  EXPECT_EQ(e.at("subject"), "My House#Basement#main");
  EXPECT_EQ(e.at("datacontenttype"), "application/json");
  EXPECT_EQ(e.at("id"), entry.at("event").at("id"));
  EXPECT_EQ(e.at("time"), entry.at("event").at("timestamp"));
  const json::value& data = e.at("data");
  EXPECT_EQ(data.at("thing"), "My House#Basement");
  EXPECT_EQ(data.at("op"), "report");
  EXPECT_EQ(data.at("clientToken"), "c-17");
  EXPECT_EQ(data.at("registration"), "reg");
  EXPECT_EQ(ds::to_json(data.at("reported")),
            R"({"version":2,"old":{"temp":21},"new":{"temp":22,"hum":40},)"
            R"("diff":[{"op":"update","path":"/temp","old":21,"new":22},{"op":"add","path":"/hum","new":40}]})");
  EXPECT_FALSE(data.as_object().contains("desired"));
  EXPECT_FALSE(data.as_object().contains("truncated"));
}

TEST_F(Events, IncludeAndSectionsShapeTheData) {
  write("t", ds::Section::desired, R"({"sp":22})");
  entries();
  write("t", ds::Section::reported, R"({"sp":22})");  // acknowledges: both sections change
  const notify::FeedEntryText entry(entries().at(0));
  const json::value diff_only = ds::parse_json(notify::build_event(registration(R"("include":["diff"])"), entry));
  EXPECT_EQ(ds::to_json(diff_only.at("data").at("desired")),
            R"({"version":2,"diff":[{"op":"remove","path":"/sp","old":22}]})");
  EXPECT_EQ(ds::to_json(diff_only.at("data").at("acknowledged")), R"([{"path":"/sp","value":22}])");
  const json::value reported_only =
      ds::parse_json(notify::build_event(registration(R"("sections":"reported","include":["new"])"), entry));
  EXPECT_EQ(ds::to_json(reported_only.at("data").at("reported")), R"({"version":1,"new":{"sp":22}})");
  EXPECT_FALSE(reported_only.at("data").as_object().contains("desired"));
  EXPECT_FALSE(reported_only.at("data").as_object().contains("acknowledged"));
}

TEST_F(Events, ADeleteIsADeletedEvent) {
  write("t", ds::Section::reported, R"({"a":1})");
  entries();
  engine_->remove({"t", "main"});
  const json::value e = ds::parse_json(notify::build_event(registration(""), notify::FeedEntryText(entries().at(0))));
  EXPECT_EQ(e.at("type"), "deviceshadow.shadow.deleted");
  EXPECT_EQ(e.at("data").at("op"), "delete");
  EXPECT_EQ(ds::to_json(e.at("data").at("reported").at("new")), "{}");
  EXPECT_EQ(ds::to_json(e.at("data").at("reported").at("old")), R"({"a":1})");
}

TEST_F(Events, ALargeEventIsSentWithoutItsStates) {
  write("t", ds::Section::reported, R"({"big":")" + std::string(5000, 'x') + R"("})");
  const notify::FeedEntryText entry(entries().at(0));
  const std::string full = notify::build_event(registration(""), entry);
  const json::value small = ds::parse_json(notify::build_event(registration(""), entry, 2000));
  EXPECT_GT(full.size(), 5000u);
  EXPECT_EQ(small.at("data").at("truncated"), true);
  EXPECT_FALSE(small.at("data").at("reported").as_object().contains("new"));
  EXPECT_FALSE(small.at("data").at("reported").as_object().contains("old"));
  EXPECT_TRUE(small.at("data").at("reported").as_object().contains("diff"));
  EXPECT_EQ(notify::build_event(registration(""), entry, full.size()), full);
}

TEST_F(Events, RegistrationsGetOnlyTheWritesTheySelect) {
  write("house-1", ds::Section::reported, R"({"climate":{"indoor":20},"light":true})");
  write("house-1", ds::Section::desired, R"({"light":false})");
  write("garage", ds::Section::reported, R"({"door":"open"})");
  const std::vector<std::string> all = entries();
  ASSERT_EQ(all.size(), 3u);
  auto reached = [&](const notify::Registration& r) {
    std::string out;
    for (const std::string& e : all) out += notify::wants(r, notify::FeedEntryText(e).write()) ? '1' : '0';
    return out;
  };
  EXPECT_EQ(reached(registration("")), "111");
  EXPECT_EQ(reached(registration(R"("sections":"desired")")), "010");
  EXPECT_EQ(reached(registration(R"("sections":"reported")")), "101");
  EXPECT_EQ(reached(registration(R"("match":"house-.*#main")")), "110");
  EXPECT_EQ(reached(registration(R"("match":"house-")")), "000");  // matched whole, not searched
  EXPECT_EQ(reached(registration(R"("paths":["/climate"])")), "100");
  EXPECT_EQ(reached(registration(R"("paths":["/light"],"sections":"desired")")), "010");
  EXPECT_EQ(reached(registration(R"("enabled":false)")), "000");
}

// The event as a document built member by member from the parsed entry and serialized: the
// spliced text must be exactly this.
std::string reference_event(const notify::Registration& r, const json::value& entry) {
  const json::object& event = entry.at("event").as_object();
  json::object data;
  data["thing"] = event.at("thing");
  data["name"] = event.at("name");
  data["op"] = event.at("op");
  if (event.contains("clientToken")) data["clientToken"] = event.at("clientToken");
  data["registration"] = r.id;
  for (ds::Section s : {ds::Section::reported, ds::Section::desired}) {
    const std::string key(ds::to_string(s));
    if (!event.contains(key) || !r.selects(s)) continue;
    json::object section;
    section["version"] = event.at(key).at("version");
    if (r.include_old) section["old"] = entry.at(key).at("old");
    if (r.include_new) section["new"] = entry.at(key).at("new");
    if (r.include_diff) section["diff"] = event.at(key).at("changes");
    data[key] = std::move(section);
  }
  if (event.contains("acknowledged") && r.selects(ds::Section::desired)) data["acknowledged"] = event.at("acknowledged");
  json::object e;
  e["specversion"] = "1.0";
  e["id"] = event.at("id");
  e["source"] = "deviceshadow";
  e["type"] = event.at("op") == "delete" ? "deviceshadow.shadow.deleted" : "deviceshadow.shadow.updated";
  e["subject"] = std::string(event.at("thing").as_string()) + "#" + std::string(event.at("name").as_string());
  e["time"] = event.at("timestamp");
  e["datacontenttype"] = "application/json";
  e["data"] = std::move(data);
  return ds::to_json(e);
}

TEST_F(Events, TheSplicedEventIsTheDocumentBuiltFromTheParsedEntry) {
  write("h\u00e9 \"quoted\" \\ #1", ds::Section::desired, R"({"sp":22,"mode":{"fan":"auto"},"list":[1,2.5,"x"]})", "tok-\u2603");
  write("h\u00e9 \"quoted\" \\ #1", ds::Section::reported, R"({"sp":22,"mode":{"fan":"on"},"t":-1.25e-7,"s":"a\nb"})");
  write("plain", ds::Section::reported, R"({"a":null,"b":true})");
  engine_->remove({"plain", "main"});
  write("ends in a backslash \\", ds::Section::reported, R"({"q\\":"\\\"","{[":"]}"})");
  const std::vector<std::string> all = entries();
  ASSERT_EQ(all.size(), 5u);
  int checked = 0;
  for (const std::string& text : all) {
    const notify::FeedEntryText entry(text);
    const json::value parsed = ds::parse_json(text);
    for (const char* fields : {"", R"("include":["diff"])", R"("include":["old"],"sections":"desired")",
                               R"("include":["new","diff"],"sections":"reported")"}) {
      const notify::Registration r = registration(fields);
      EXPECT_EQ(notify::build_event(r, entry), reference_event(r, parsed)) << text << " " << fields;
      ++checked;
    }
  }
  EXPECT_EQ(checked, 20);
  EXPECT_EQ(notify::FeedEntryText(all[1]).write().reported_paths, (std::vector<std::string>{"/sp", "/mode/fan", "/t", "/s"}));
  EXPECT_EQ(notify::FeedEntryText(all[1]).write().thing, "h\u00e9 \"quoted\" \\ #1");
}

std::string replaced(std::string text, std::string_view what, std::string_view with) {
  const std::size_t at = text.find(what);
  EXPECT_NE(at, std::string::npos) << what;
  return text.replace(at, what.size(), with);
}

TEST_F(Events, TheRecordAfterAWriteIsTheStoredOneWhileTheShadowHasNotMovedOn) {
  const ds::ShadowKey key{"plant", "main"};
  write("plant", ds::Section::reported, R"({"temp":35,"fw":"1"})");
  write("plant", ds::Section::desired, R"({"fw":"2"})");
  write("plant", ds::Section::reported, R"({"temp":20})");
  const std::vector<std::string> all = entries();
  ASSERT_EQ(all.size(), 3u);
  const ds::ShadowRecord stored = store_->read(key);

  // The last write: the store holds its record whole (leaf times included).
  const ds::ShadowRecord last = notify::FeedEntryText(all[2]).record_after(stored);
  EXPECT_EQ(last.reported.state_json, stored.reported.state_json);
  EXPECT_EQ(last.reported.times_json, stored.reported.times_json);
  EXPECT_EQ(last.desired.state_json, R"({"fw":"2"})");

  // The first: its reported section as it left it (the shadow moved on since), with the write's
  // version and time; desired, which it did not store, as stored.
  const ds::ShadowRecord first = notify::FeedEntryText(all[0]).record_after(stored);
  EXPECT_EQ(ds::parse_json(first.reported.state_json), ds::parse_json(R"({"temp":35,"fw":"1"})"));
  EXPECT_EQ(first.reported.version, 1u);
  EXPECT_EQ(first.reported.timestamp_ns, 1'700'000'000'000'000'000);
  EXPECT_TRUE(first.reported.times_json.empty());
  EXPECT_EQ(first.desired.state_json, stored.desired.state_json);
}

TEST_F(Events, TheRecordAfterADeleteHasNoLiveSection) {
  write("plant", ds::Section::reported, R"({"temp":35})");
  engine_->remove(ds::ShadowKey{"plant", "main"});
  const std::vector<std::string> all = entries();
  ASSERT_EQ(all.size(), 2u);
  ds::ShadowRecord before_delete;  // as if the store were read before the delete was stored
  before_delete.reported.version = 1;
  before_delete.reported.state_json = R"({"temp":35})";
  EXPECT_FALSE(notify::FeedEntryText(all[1]).record_after(before_delete).exists());
  EXPECT_FALSE(notify::FeedEntryText(all[1]).record_after(store_->read(ds::ShadowKey{"plant", "main"})).exists());
}

TEST(FeedEntryText, RefusesTextThatIsNotAFeedEntry) {
  const std::string good =
      R"({"event":{"id":"1","thing":"t","name":"main","op":"report","timestamp":"2026-01-01T00:00:00Z",)"
      R"("reported":{"version":1,"changes":[{"op":"add","path":"/a","new":1}]}},"reported":{"old":{},"new":{"a":1}}})";
  EXPECT_EQ(notify::FeedEntryText(good).write().reported_paths, std::vector<std::string>{"/a"});
  for (const std::string& bad :
       {std::string(), std::string("not json"), std::string("{}"), std::string("[]"), std::string(R"({"event":{}})"),
        good.substr(0, good.size() - 1), good.substr(0, 40), std::string(R"({"event":{"id":"1)"),
        std::string(R"({"event":{"id":"1","thing":"t","name":"main","op":"report","timestamp":"x","reported":{"version":1}}})"),
        std::string(R"({"event":{"id":1,"thing":"t","name":"main","op":"report","timestamp":"x"}})"),
        std::string(R"({"event":{"id":"1" "thing":"t"}})"),
        replaced(good, R"("new":{"a":1}})", R"("new":{"a":1]})"),  // closed by the wrong bracket
        replaced(good, R"("op":"report")", R"("op":nul)"), replaced(good, R"("version":1)", R"("version":x1)"),
        replaced(good, R"("thing":"t")", R"("thing":"t\q")"),  // an escape JSON does not have
        replaced(good, R"("new":{"a":1})", R"("new":{"a":)" + std::string(100, '[') + std::string(100, ']') + "}")}) {
    EXPECT_THROW(notify::FeedEntryText{bad}, std::invalid_argument) << bad;
  }
}

TEST(WebhookSignature, IsTheHmacOfTimeDotBody) {
  // Checked with Python: hmac.new(b"whsec", b'1700000000.{"a":1}', hashlib.sha256).hexdigest()
  EXPECT_EQ(notify::webhook_signature("whsec", 1700000000, R"({"a":1})"),
            "t=1700000000,v1=8ad37ba156048ae0e0a5533c75cdf26fee88b07f93cb57ee4c80adb053012032");
}

}  // namespace
