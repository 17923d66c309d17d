// A latency histogram with fixed bounds (seconds), as Prometheus renders them. Not
// thread-safe: its owner serializes access.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

namespace deviceshadow {

struct Histogram {
  static constexpr std::array<double, 13> kBounds = {0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
                                                      0.1,    0.25,  0.5,    1,     2.5,   5};
  std::array<std::uint64_t, kBounds.size() + 1> counts{};  // per bucket, not cumulative; last: +Inf
  double sum = 0;
  std::uint64_t count = 0;

  void observe(double seconds) {
    std::size_t i = 0;
    while (i < kBounds.size() && seconds > kBounds[i]) ++i;
    ++counts[i];
    sum += seconds;
    ++count;
  }
};

}  // namespace deviceshadow
