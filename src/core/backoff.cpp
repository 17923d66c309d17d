#include "deviceshadow/backoff.hpp"

#include <algorithm>
#include <random>
#include <thread>

namespace deviceshadow {

std::chrono::nanoseconds backoff_delay(int retry, std::chrono::nanoseconds base, std::chrono::nanoseconds max) {
  thread_local std::mt19937_64 random{std::random_device{}()};
  const int shift = std::clamp(retry - 1, 0, 30);
  const std::int64_t cap = std::min<std::int64_t>(max.count(), base.count() > (max.count() >> shift) ? max.count()
                                                                                                      : base.count() << shift);
  std::uniform_int_distribution<std::int64_t> pick(cap / 2, std::max<std::int64_t>(cap, 0));
  return std::chrono::nanoseconds(pick(random));
}

void sleep_before_retry(int retry, std::chrono::nanoseconds base, std::chrono::nanoseconds max) {
  std::this_thread::sleep_for(backoff_delay(retry, base, max));
}

}  // namespace deviceshadow
