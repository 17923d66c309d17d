// The one backoff of the project: every retry (a version conflict in the engine, a throttled or
// failed AWS call, a failed notification delivery) waits a jittered, exponentially growing time.
#pragma once

#include <chrono>

namespace deviceshadow {

// The wait before retry number `retry` (1: the first): drawn uniformly from [cap/2, cap], where
// cap = min(max, base * 2^(retry-1)) ("equal jitter": retries of many callers spread out, and no
// retry comes at once). Thread-safe.
std::chrono::nanoseconds backoff_delay(int retry, std::chrono::nanoseconds base, std::chrono::nanoseconds max);

// Sleeps backoff_delay(retry, base, max).
void sleep_before_retry(int retry, std::chrono::nanoseconds base, std::chrono::nanoseconds max);

}  // namespace deviceshadow
