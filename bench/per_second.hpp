// What the C++ benchmarks share: a timed run of an operation on several threads.
#pragma once

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

// Calls op(thread, i) in a loop on `threads` threads for `seconds`; returns the calls a second
// over the time they took (the last calls, which finish after the stop, included).
template <class F>
double per_second(int threads, double seconds, F&& op) {
  std::atomic<bool> stop{false};
  std::atomic<long> done{0};
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t) {
    workers.emplace_back([&, t] {
      for (long i = 0; !stop.load(std::memory_order_relaxed); ++i) {
        op(t, i);
        ++done;
      }
    });
  }
  const auto start = std::chrono::steady_clock::now();
  std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
  stop = true;
  for (auto& w : workers) w.join();
  return static_cast<double>(done) / std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}
