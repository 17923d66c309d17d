// An Engine over each kind of store, with a controllable clock, for parameterized tests.
#pragma once

#include "deviceshadow/engine.hpp"
#include "deviceshadow/render.hpp"
#include "support/stores.hpp"

#include <atomic>

class EngineTest : public StoreTest {
 protected:
  void SetUp() override {
    StoreTest::SetUp();
    if (!IsSkipped() && !HasFailure()) make_engine();
  }
  void TearDown() override {
    engine_.reset();
    StoreTest::TearDown();
  }
  void make_engine(ds::EngineOptions options = {}) {
    options.clock = [this] { return clock_.load(); };
    options.backoff_base = std::chrono::microseconds(50);
    engine_ = std::make_unique<ds::Engine>(store(), std::move(options));
  }
  ds::Engine& engine() { return *engine_; }

  static ds::UpdateRequest request(std::string thing, ds::Section section, std::string_view state_json) {
    ds::UpdateRequest r;
    r.key = {std::move(thing), "main"};
    r.section = section;
    r.state = ds::parse_json(state_json).as_object();
    return r;
  }
  ds::UpdateResult report(std::string thing, std::string_view state_json) {
    return engine().update(request(std::move(thing), ds::Section::reported, state_json));
  }
  ds::UpdateResult desire(std::string thing, std::string_view state_json) {
    return engine().update(request(std::move(thing), ds::Section::desired, state_json));
  }
  // The error code an operation fails with ("none" if it does not).
  static std::string error_of(const std::function<void()>& f) {
    try {
      f();
    } catch (const ds::Error& e) {
      return std::string(ds::code_name(e.code()));
    }
    return "none";
  }

  std::atomic<std::int64_t> clock_{1'700'000'000'000'000'000};
  std::unique_ptr<ds::Engine> engine_;
};
