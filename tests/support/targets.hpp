// Checks every notification target passes.
#pragma once

#include "notify/target.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <thread>

// wake() from another thread ends a run() that would otherwise wait 30 s.
inline void expect_wake_ends_a_waiting_run(deviceshadow::notify::Target& target) {
  std::thread waker([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    target.wake();
  });
  const auto started = std::chrono::steady_clock::now();
  target.run(std::chrono::seconds(30), [](std::uint64_t, deviceshadow::notify::DeliveryResult) {});
  waker.join();
  EXPECT_LT(std::chrono::steady_clock::now() - started, std::chrono::seconds(20));
}
