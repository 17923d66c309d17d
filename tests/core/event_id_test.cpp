// History event ids: made and read back by one pair of functions.
#include "deviceshadow/event_id.hpp"

#include <gtest/gtest.h>

#include <cstdint>

namespace ds = deviceshadow;

TEST(EventId, MadeIdsReadBack) {
  for (std::int64_t ns : {std::int64_t{0}, std::int64_t{1764230400123456789}, INT64_MAX}) {
    for (char letter : {'R', 'D', 'C', 'X'}) {
      for (std::uint64_t version : {std::uint64_t{1}, std::uint64_t{42}, UINT64_MAX}) {
        const std::string id = ds::make_event_id(ns, letter, version);
        EXPECT_LE(id.size(), ds::kMaxEventIdBytes) << id;
        EXPECT_EQ(ds::event_id_time(id), ns) << id;
      }
    }
  }
  // Ids order by time, bytewise.
  EXPECT_LT(ds::make_event_id(9, 'R', 100), ds::make_event_id(10, 'R', 1));
}

TEST(EventId, OtherTextIsNoId) {
  for (const char* text : {"", "junk", "2026-11-27T10:00:00Z", "00000000000000000001#R", "00000000000000000001#Q1",
                           "0000000000000000001#R1", "00000000000000000001-R1", "00000000000000000001#R1x",
                           "99999999999999999999#R1", "09223372036854775808#R1",
                           "00000000000000000001#R123456789012345678901"}) {
    EXPECT_FALSE(ds::event_id_time(text).has_value()) << text;
  }
}
