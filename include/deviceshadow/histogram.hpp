// A latency histogram with fixed bounds (seconds), as Prometheus renders them. Not
// thread-safe: its owner serializes access.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace deviceshadow {

struct Histogram {
  // Requests and store operations: 0.5 ms to 5 s.
  static constexpr std::array<double, 13> kRequestBounds = {0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
                                                             0.1,    0.25,  0.5,    1,     2.5,   5};
  // Notification deliveries, retries included: 1 ms to 10 min.
  static constexpr std::array<double, 16> kDeliveryBounds = {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25,
                                                              0.5,   1,      2.5,   5,    15,    60,   180, 600};

  explicit Histogram(std::span<const double> bounds = kRequestBounds) : bounds(bounds), counts(bounds.size() + 1) {}

  std::span<const double> bounds;
  std::vector<std::uint64_t> counts;  // per bucket, not cumulative; last: +Inf
  double sum = 0;
  std::uint64_t count = 0;

  void observe(double seconds) {
    std::size_t i = 0;
    while (i < bounds.size() && seconds > bounds[i]) ++i;
    ++counts[i];
    sum += seconds;
    ++count;
  }
};

}  // namespace deviceshadow
