// The one backoff: equal jitter over an exponentially growing cap.
#include "deviceshadow/backoff.hpp"

#include <gtest/gtest.h>

#include <set>

namespace ds = deviceshadow;
using namespace std::chrono_literals;

namespace {

TEST(Backoff, EachRetryWaitsBetweenHalfTheCapAndTheCap) {
  for (int retry = 1; retry <= 8; ++retry) {
    const std::chrono::nanoseconds cap = std::min<std::chrono::nanoseconds>(100ms * (1 << (retry - 1)), 5s);
    for (int i = 0; i < 200; ++i) {
      const auto d = ds::backoff_delay(retry, 100ms, 5s);
      EXPECT_GE(d, cap / 2) << retry;
      EXPECT_LE(d, cap) << retry;
    }
  }
}

TEST(Backoff, LateRetriesStayAtTheMaximumWithoutOverflow) {
  for (int retry : {30, 31, 64, 1000, 1 << 30}) {
    const auto d = ds::backoff_delay(retry, 25ms, 2s);
    EXPECT_GE(d, 1s) << retry;
    EXPECT_LE(d, 2s) << retry;
  }
  EXPECT_EQ(ds::backoff_delay(0, 0ms, 2s), 0ns);
}

TEST(Backoff, DelaysSpreadOut) {
  std::set<std::int64_t> seen;
  for (int i = 0; i < 50; ++i) seen.insert(ds::backoff_delay(3, 10ms, 1s).count());
  EXPECT_GT(seen.size(), 40u);
}

}  // namespace
