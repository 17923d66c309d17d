// shadowd's metrics registry (src/server/metrics.hpp).
#include "http/metrics.hpp"

#include "deviceshadow/memory_store.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <mutex>
#include <thread>

namespace srv = deviceshadow::http;

namespace {

// A section of the output may take a lock that a thread recording a store operation holds (the
// stream reader writes history inside its own lock): render must not hold the registry's lock
// while it calls sections, or the two wait for each other for ever.
TEST(Metrics, SectionsRenderWithoutTheRegistryLockHeld) {
  srv::Metrics metrics;
  std::mutex section_lock;
  metrics.add_section([&](std::string& out) {
    std::lock_guard lock(section_lock);
    out += "section 1\n";
  });
  std::unique_lock held(section_lock);  // as the stream reader, in its handler
  deviceshadow::EngineStats stats;
  auto rendered = std::async(std::launch::async, [&] { return metrics.render(stats); });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));  // render reaches the section
  auto recorded = std::async(std::launch::async, [&] { metrics.store_operation("append_history", 0.01); });
  // A bound on liveness, not a timing assertion: it completes at once or never.
  EXPECT_EQ(recorded.wait_for(std::chrono::seconds(10)), std::future_status::ready);
  held.unlock();
  EXPECT_NE(rendered.get().find("section 1"), std::string::npos);
  recorded.wait();
  EXPECT_NE(metrics.render(stats).find(R"(shadowd_store_operation_duration_seconds_count{operation="append_history"} 1)"),
            std::string::npos);
}

// shadowd wraps its store in a MeteredStore: try_read must reach the store behind it (else no
// GET would be answered on an I/O thread), and count as a read.
TEST(Metrics, AMeteredStoreTriesToReadThroughItsStore) {
  srv::Metrics metrics;
  auto inner = deviceshadow::make_memory_store();
  srv::MeteredStore metered(*inner, metrics);
  const std::optional<deviceshadow::ShadowRecord> record = metered.try_read({"t", "main"});
  ASSERT_TRUE(record);
  EXPECT_FALSE(record->exists());
  EXPECT_NE(metrics.render({}).find(R"(shadowd_store_operation_duration_seconds_count{operation="read"} 1)"), std::string::npos);
}

// A request refused before it was routed is labelled with the template it fits; a literal
// segment beats a placeholder; nothing fits: "unmatched".
TEST(RouteLabel, TheTemplateARequestFits) {
  constexpr srv::Route routes[] = {{"/v1/things/{thing}/shadows/{name}/{section}", "POST"},
                                   {"/v1/things/{thing}/shadows/{name}/history", "GET"},
                                   {"/v1/things", "GET"}};
  auto label = [&](std::vector<std::string> segments) { return std::string(srv::route_label(routes, segments)); };
  EXPECT_EQ(label({"v1", "things", "t", "shadows", "main", "history"}), "/v1/things/{thing}/shadows/{name}/history");
  EXPECT_EQ(label({"v1", "things", "t", "shadows", "main", "reported"}), "/v1/things/{thing}/shadows/{name}/{section}");
  EXPECT_EQ(label({"v1", "things"}), "/v1/things");
  EXPECT_EQ(label({"v1", "things", "t"}), "unmatched");
  EXPECT_EQ(label({"v1", "nothing"}), "unmatched");
  EXPECT_EQ(label({}), "unmatched");
}

}  // namespace
