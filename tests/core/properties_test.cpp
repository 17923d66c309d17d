// Properties of the document core checked on randomly generated documents (fixed seeds,
// so a failure reproduces).
#include "deviceshadow/document.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>

namespace ds = deviceshadow;
namespace json = boost::json;

namespace {

class Generator {
 public:
  explicit Generator(std::uint64_t seed) : rng_(seed) {}

  json::object document(int max_depth = 4) {
    json::object o;
    int members = pick(0, 5);
    for (int i = 0; i < members; ++i) o[key()] = value(max_depth - 1);
    return o;
  }

  json::value value(int depth) {
    switch (pick(0, depth > 0 ? 8 : 4)) {
      case 0: return pick(0, 3);
      case 1: return pick(0, 3) + 0.5;
      case 2: return json::string(std::string(1, static_cast<char>('p' + pick(0, 2))));
      case 3: return pick(0, 1) == 1;
      case 4: return timestamped(pick(0, 1'000'000));
      case 5:
      case 6: return document(depth);
      case 7: {
        json::array a;
        for (int i = pick(0, 3); i > 0; --i) a.push_back(pick(0, 2));
        return a;
      }
      default: {
        json::array a;
        int n = pick(0, 3);
        bool ids = pick(0, 1) == 1;
        for (int i = 0; i < n; ++i) {
          json::object e = document(depth - 1);
          if (ids) e["id"] = i * 3 + pick(0, 2);  // unique within the array
          a.push_back(std::move(e));
        }
        return a;
      }
    }
  }

  // A timestamped value whose instant is `seconds`, in a randomly chosen encoding.
  json::value timestamped(std::int64_t seconds) {
    json::object o;
    o["v"] = pick(0, 2);
    switch (pick(0, 3)) {
      case 0: o["ts"] = seconds; break;
      case 1: o["ts"] = seconds * 1000; break;
      case 2: o["ts"] = ds::format_rfc3339({seconds, 0}); break;
      default: o["timestamp"] = seconds * 1'000'000'000; break;
    }
    return o;
  }

  std::string key() { return std::string(1, static_cast<char>('a' + pick(0, 4))); }
  int pick(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng_); }
  std::mt19937_64& rng() { return rng_; }

 private:
  std::mt19937_64 rng_;
};

const ds::TimestampKeys keys;

// JSON text with object members sorted by key: equal for states with the same content.
std::string canonical(const json::value& v) {
  if (v.is_object()) {
    std::vector<std::pair<std::string, std::string>> members;
    for (const auto& m : v.get_object()) members.emplace_back(m.key(), canonical(m.value()));
    std::sort(members.begin(), members.end());
    std::string out = "{";
    for (const auto& [k, text] : members) out += k + ":" + text + ",";
    return out + "}";
  }
  if (v.is_array()) {
    std::string out = "[";
    for (const auto& e : v.get_array()) out += canonical(e) + ",";
    return out + "]";
  }
  return ds::to_json(v);
}

TEST(Properties, MergingADocumentIntoItselfChangesNothing) {
  Generator gen(1);
  for (int round = 0; round < 2000; ++round) {
    json::object doc = gen.document();
    for (ds::MergeMode mode : {ds::MergeMode::server_is_master, ds::MergeMode::client_is_master}) {
      json::object stored = doc;
      ds::MergeResult r = ds::merge_section(stored, doc, mode, ds::Section::reported, keys);
      ASSERT_TRUE(r.changes.empty()) << ds::to_json(doc) << " first change at " << r.changes.front().path;
      ASSERT_EQ(ds::to_json(stored), ds::to_json(doc));
    }
  }
}

TEST(Properties, TimestampedWritesConvergeInAnyOrder) {
  Generator gen(2);
  // Leaf paths shared by all writes, so that writes overlap; every value is timestamped.
  const std::vector<std::vector<std::string>> paths = {{"a"}, {"b", "x"}, {"b", "y"}, {"c", "d", "e"}, {"c", "f"}};
  for (int round = 0; round < 300; ++round) {
    std::vector<json::object> writes;
    std::vector<int> seconds(40);
    std::iota(seconds.begin(), seconds.end(), 1000);
    std::shuffle(seconds.begin(), seconds.end(), gen.rng());  // distinct timestamps
    std::size_t next = 0;
    for (int w = gen.pick(2, 6); w > 0; --w) {
      json::object write;
      for (const auto& path : paths) {
        if (gen.pick(0, 2) == 0) continue;
        json::object* node = &write;
        for (std::size_t i = 0; i + 1 < path.size(); ++i) {
          json::value& child = (*node)[path[i]];
          if (!child.is_object()) child.emplace_object();
          node = &child.get_object();
        }
        (*node)[path.back()] = gen.timestamped(seconds[next++]);
      }
      writes.push_back(std::move(write));
    }
    std::string first;
    std::vector<std::size_t> order(writes.size());
    std::iota(order.begin(), order.end(), 0);
    for (int permutation = 0; permutation < 6; ++permutation) {
      std::shuffle(order.begin(), order.end(), gen.rng());
      json::object state;
      for (std::size_t i : order) ds::merge_section(state, writes[i], ds::MergeMode::server_is_master, ds::Section::reported, keys);
      std::string result = canonical(state);  // member order follows arrival order
      if (permutation == 0) {
        first = result;
      } else {
        ASSERT_EQ(result, first) << "round " << round;
      }
    }
  }
}

TEST(Properties, AcknowledgementLeavesNoDesiredLeafEqualToReported) {
  Generator gen(3);
  for (int round = 0; round < 3000; ++round) {
    json::object reported = gen.document();
    // Desired overlaps reported often: start from a copy of reported and perturb it.
    json::object desired = gen.pick(0, 1) ? reported : gen.document();
    ds::merge_section(desired, gen.document(), ds::MergeMode::server_is_master, ds::Section::desired, keys);
    std::vector<ds::Acknowledgement> acked = ds::acknowledge(desired, reported, keys);
    // Every leaf still desired differs from reported: the delta is the whole of desired.
    ASSERT_EQ(ds::to_json(ds::compute_delta(desired, reported, keys)), ds::to_json(desired)) << ds::to_json(reported);
    // Acknowledging again finds nothing.
    ASSERT_TRUE(ds::acknowledge(desired, reported, keys).empty());
  }
}

TEST(Properties, MergedStatesStayValid) {
  Generator gen(4);
  ds::DocumentOptions options;
  for (int round = 0; round < 2000; ++round) {
    json::object stored = gen.document();
    json::object incoming = gen.document();
    auto mode = gen.pick(0, 1) ? ds::MergeMode::server_is_master : ds::MergeMode::client_is_master;
    ds::MergeResult r = ds::merge_section(stored, incoming, mode, ds::Section::reported, keys);
    ASSERT_NO_THROW(ds::validate_state(stored, options)) << ds::to_json(stored);
    // No null member is ever stored.
    std::function<bool(const json::value&)> has_null_member = [&](const json::value& v) {
      if (v.is_object() && !keys.find(v.get_object())) {
        for (const auto& m : v.get_object()) {
          if (m.value().is_null() || has_null_member(m.value())) return true;
        }
      }
      if (v.is_array()) {
        for (const auto& e : v.get_array()) {
          if (has_null_member(e)) return true;
        }
      }
      return false;
    };
    ASSERT_FALSE(has_null_member(stored)) << ds::to_json(stored);
  }
}

// Merging with the timestamps validation parsed gives what parsing them again gives.
TEST(Properties, MergingWithTheParsedTimestampsIsTheSame) {
  Generator gen(5);
  ds::DocumentOptions options;
  std::string rendered[2];
  for (int round = 0; round < 2000; ++round) {
    const json::object stored = gen.document(), incoming = gen.document();
    const auto mode = gen.pick(0, 1) ? ds::MergeMode::server_is_master : ds::MergeMode::client_is_master;
    for (int with_list = 0; with_list < 2; ++with_list) {
      json::object merged = stored, consumed = incoming;
      const std::vector<ds::ParsedTimestamp> parsed = ds::validate_state(consumed, options);
      ds::MergeResult r = ds::merge_section(merged, std::move(consumed), mode, ds::Section::reported, keys,
                                            with_list ? std::span(parsed) : std::span<const ds::ParsedTimestamp>());
      rendered[with_list] = ds::to_json(merged);
      for (const ds::Change& c : r.changes) ds::append_json(rendered[with_list], c);
      for (const std::string& path : r.stale) rendered[with_list] += path;
    }
    ASSERT_EQ(rendered[1], rendered[0]) << ds::to_json(stored) << " <- " << ds::to_json(incoming);
  }
}

}  // namespace
