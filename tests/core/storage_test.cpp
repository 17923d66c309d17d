// Where merged values live: merge_section moves incoming values into the stored section and
// must copy them when the two documents do not share a storage.
#include "deviceshadow/document.hpp"

#include <boost/json/monotonic_resource.hpp>
#include <gtest/gtest.h>

#include <optional>

namespace ds = deviceshadow;
namespace json = boost::json;

namespace {

const ds::TimestampKeys default_keys;

// Every node of v (values, strings, containers) allocated in the storage of `owner`.
bool lives_in(const json::value& v, const json::storage_ptr& owner) {
  if (v.storage().get() != owner.get()) return false;
  if (const json::object* o = v.if_object()) {
    for (const auto& m : *o) {
      if (!lives_in(m.value(), owner)) return false;
    }
  }
  if (const json::array* a = v.if_array()) {
    for (const json::value& e : *a) {
      if (!lives_in(e, owner)) return false;
    }
  }
  return true;
}

const char* const kReport =
    R"({"temp":{"value":21.5,"ts":"2025-01-22T12:22:27Z"},"fan":{"speed":3,"gone":null},)"
    R"("tags":["a","b"],"zones":[{"id":1,"on":true},{"id":2,"on":false}]})";

TEST(MergeStorage, ValuesFromAnotherArenaAreCopiedIntoTheStoredSection) {
  json::object stored = ds::parse_json(R"({"temp":{"value":20,"ts":1},"zones":[{"id":1,"on":false}]})").as_object();
  std::optional<ds::MergeResult> result;
  {
    json::monotonic_resource arena;
    json::value incoming = ds::parse_json(kReport, 64, &arena);
    result = ds::merge_section(stored, std::move(incoming.as_object()), ds::MergeMode::server_is_master,
                               ds::Section::reported, default_keys);
  }  // the arena is gone: nothing in `stored` or the changes may point into it
  EXPECT_TRUE(lives_in(stored, stored.storage()));
  EXPECT_EQ(ds::to_json(stored),
            R"({"temp":{"value":21.5,"ts":"2025-01-22T12:22:27Z"},"zones":[{"id":1,"on":true},{"id":2,"on":false}],)"
            R"("fan":{"speed":3},"tags":["a","b"]})");
  std::string changes;
  for (const ds::Change& c : result->changes) ds::append_json(changes, c, false);
  EXPECT_NE(changes.find(R"("new":{"value":21.5,"ts":"2025-01-22T12:22:27Z"})"), std::string::npos) << changes;
}

TEST(MergeStorage, ValuesInTheSameArenaMoveAndTheIncomingCopyIsLeftIntact) {
  json::monotonic_resource arena;
  json::storage_ptr sp(&arena);
  json::object stored = ds::parse_json(R"({"fan":{"speed":1}})", 64, sp).as_object();
  const json::object incoming = ds::parse_json(kReport, 64, sp).as_object();
  ds::merge_section(stored, incoming, ds::MergeMode::server_is_master, ds::Section::reported, default_keys);  // a copy
  EXPECT_EQ(ds::to_json(incoming), ds::to_json(ds::parse_json(kReport)));
  json::object moved(incoming, sp);
  ds::merge_section(stored, std::move(moved), ds::MergeMode::client_is_master, ds::Section::reported, default_keys);
  EXPECT_TRUE(lives_in(stored, sp));
  EXPECT_EQ(ds::to_json(stored), ds::to_json(ds::parse_json(
                                     R"({"fan":{"speed":3},"temp":{"value":21.5,"ts":"2025-01-22T12:22:27Z"},)"
                                     R"("tags":["a","b"],"zones":[{"id":1,"on":true},{"id":2,"on":false}]})")));
}

}  // namespace
