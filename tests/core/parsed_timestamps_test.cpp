// validate_state lists the timestamps it parsed; merge_section takes that list instead of
// parsing the same timestamps again, and parses them for a list of another state.
#include "deviceshadow/document.hpp"

#include <gtest/gtest.h>

namespace ds = deviceshadow;
namespace json = boost::json;

namespace {

const ds::DocumentOptions options;

const char* const kIncoming =
    R"({"temp":{"value":21.5,"ts":"2025-01-22T12:22:27Z"},"zones":[{"id":1,"on":{"v":1,"ts":1737548547}}],)"
    R"("fan":{"speed":3},"ack":{"v":2,"timestamp":1737548547000,"inner":{"v":3,"ts":"not checked inside"}}})";

TEST(ParsedTimestamps, ValidationListsEachTimestampInDocumentOrder) {
  const json::object state = ds::parse_json(kIncoming).as_object();
  const std::vector<ds::ParsedTimestamp> parsed = ds::validate_state(state, options);
  ASSERT_EQ(parsed.size(), 3u);  // the timestamp inside a timestamped value is payload
  EXPECT_EQ(parsed[0].value, &state.at("temp").as_object());
  EXPECT_EQ(parsed[0].member, &state.at("temp").at("ts"));
  EXPECT_EQ(parsed[1].member, &state.at("zones").at(0).at("on").at("ts"));
  EXPECT_EQ(parsed[2].member, &state.at("ack").at("timestamp"));
  const ds::Timestamp instant{1737548547, 0};
  for (const ds::ParsedTimestamp& p : parsed) EXPECT_EQ(p.instant, instant);
}

// The instants in the list decide, not the text: stored and incoming "temp" name the same
// instant, which is stale, but listed one second later the incoming value is newer.
TEST(ParsedTimestamps, MergeUsesTheListedInstants) {
  for (bool listed_later : {false, true}) {
    json::object incoming = ds::parse_json(kIncoming).as_object();
    std::vector<ds::ParsedTimestamp> parsed = ds::validate_state(incoming, options);
    if (listed_later) parsed[0].instant.seconds += 1;
    json::object stored = ds::parse_json(R"({"temp":{"value":20,"ts":1737548547}})").as_object();
    ds::MergeResult r = ds::merge_section(stored, std::move(incoming), ds::MergeMode::server_is_master,
                                          ds::Section::reported, options.timestamp_keys, parsed);
    EXPECT_EQ(r.stale, listed_later ? std::vector<std::string>{} : std::vector<std::string>{"/temp"});
    EXPECT_EQ(ds::to_json(stored.at("temp")).find("21.5") != std::string::npos, listed_later);
  }
}

// Entries merging does not ask for (here the added "fresh") are passed over: the listed
// instant of the value after them still decides.
TEST(ParsedTimestamps, MergeFindsAnEntryPastOnesItSkips) {
  json::object incoming =
      ds::parse_json(R"({"fresh":{"v":1,"ts":1},"temp":{"value":21.5,"ts":"2025-01-22T12:22:27Z"}})").as_object();
  std::vector<ds::ParsedTimestamp> parsed = ds::validate_state(incoming, options);
  parsed[1].instant.seconds += 1;
  json::object stored = ds::parse_json(R"({"temp":{"value":20,"ts":1737548547}})").as_object();
  ds::MergeResult r = ds::merge_section(stored, std::move(incoming), ds::MergeMode::server_is_master,
                                        ds::Section::reported, options.timestamp_keys, parsed);
  EXPECT_TRUE(r.stale.empty());
  EXPECT_EQ(stored.at("temp").at("value"), 21.5);
}

// A list that does not describe the merged state (its first entry is another state's) is
// dropped at the first member it lacks: later entries, even matching ones, are not used, so
// a wrong list costs one scan, not one per timestamp.
TEST(ParsedTimestamps, AListOfAnotherStateIsDroppedAtTheFirstMiss) {
  const json::object other = ds::parse_json(kIncoming).as_object();
  json::object incoming = ds::parse_json(kIncoming).as_object();
  const std::vector<ds::ParsedTimestamp> own = ds::validate_state(incoming, options);
  const std::vector<ds::ParsedTimestamp> parsed{ds::validate_state(other, options)[0], {own[2].value, own[2].member, {0, 0}}};
  json::object stored = ds::parse_json(R"({"temp":{"value":20,"ts":1},"ack":{"v":1,"ts":5}})").as_object();
  ds::MergeResult r = ds::merge_section(stored, std::move(incoming), ds::MergeMode::server_is_master,
                                        ds::Section::reported, options.timestamp_keys, parsed);
  EXPECT_TRUE(r.stale.empty());
  EXPECT_EQ(ds::to_json(stored.at("temp")), R"({"value":21.5,"ts":"2025-01-22T12:22:27Z"})");
  EXPECT_EQ(stored.at("ack").at("v"), 2);
}

}  // namespace
