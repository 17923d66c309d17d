// Durable report throughput through the engine on SQLite (synchronous=FULL), and its latency.
// Runs, in one process, each scenario with group commit and with the baseline that commits
// one transaction per write, and prints a table with the ratio; then group commit with the
// change feed on (each write also appends its outbox entry), against group commit without.
//
//   bench_engine [--seconds S] [--threads N] [--dir DIR]
#include "deviceshadow/engine.hpp"
#include "deviceshadow/sqlite_store.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

namespace ds = deviceshadow;
using Clock = std::chrono::steady_clock;

namespace {

struct Result {
  double per_second;
  double p50_us;
  double p99_us;
};

// Each writer reports a changing sensor value with a fresh timestamp, like a device.
Result run(const std::filesystem::path& dir, bool group_commit, bool hot, int threads, double seconds, bool feed = false) {
  std::filesystem::remove_all(dir);
  ds::SqliteOptions options;
  options.path = (dir / "shadows.db").string();
  options.group_commit = group_commit;
  auto store = ds::open_sqlite_store(options);
  ds::Engine engine(*store);
  engine.set_change_feed(feed);
  std::atomic<bool> stop{false};
  std::vector<std::vector<double>> latencies(static_cast<std::size_t>(threads));
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t) {
    workers.emplace_back([&, t] {
      std::vector<double>& lat = latencies[static_cast<std::size_t>(t)];
      for (long i = 0; !stop.load(std::memory_order_relaxed); ++i) {
        ds::UpdateRequest r;
        r.key = {hot ? std::string("hot") : "device-" + std::to_string(t) + "-" + std::to_string(i % 64), "main"};
        boost::json::object reading;
        reading["value"] = 20.0 + static_cast<double>(i % 100) / 10;
        reading["ts"] = std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch()).count();
        r.state["sensor-" + std::to_string(t)] = std::move(reading);
        auto start = Clock::now();
        engine.update(r);
        lat.push_back(std::chrono::duration<double, std::micro>(Clock::now() - start).count());
      }
    });
  }
  std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
  stop = true;
  for (auto& w : workers) w.join();
  std::vector<double> all;
  for (auto& l : latencies) all.insert(all.end(), l.begin(), l.end());
  std::sort(all.begin(), all.end());
  auto pct = [&](double p) { return all.empty() ? 0.0 : all[static_cast<std::size_t>(p * static_cast<double>(all.size() - 1))]; };
  return {static_cast<double>(all.size()) / seconds, pct(0.50), pct(0.99)};
}

}  // namespace

int main(int argc, char** argv) {
  double seconds = 5;
  int threads = 8;
  std::filesystem::path dir = std::filesystem::temp_directory_path() / "deviceshadow-bench-engine";
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--seconds")) seconds = std::stod(argv[i + 1]);
    if (!std::strcmp(argv[i], "--threads")) threads = std::stoi(argv[i + 1]);
    if (!std::strcmp(argv[i], "--dir")) dir = argv[i + 1];
  }
  std::printf("durable reports through the engine on SQLite, %d writer threads, %.0f s per run\n\n", threads, seconds);
  std::printf("| shadows | commit | reports/s | p50 µs | p99 µs |\n|---|---|---|---|---|\n");
  for (bool hot : {false, true}) {
    Result baseline = run(dir, false, hot, threads, seconds);
    Result grouped = run(dir, true, hot, threads, seconds);
    const char* what = hot ? "one hot shadow" : "distinct";
    std::printf("| %s | one transaction per write (baseline) | %.0f | %.0f | %.0f |\n", what, baseline.per_second,
                baseline.p50_us, baseline.p99_us);
    std::printf("| %s | group commit | %.0f | %.0f | %.0f |\n", what, grouped.per_second, grouped.p50_us, grouped.p99_us);
    std::printf("| %s | ratio | %.1fx | | |\n", what, grouped.per_second / baseline.per_second);
    std::fflush(stdout);
  }
  Result without = run(dir, true, false, threads, seconds);
  Result with_feed = run(dir, true, false, threads, seconds, true);
  std::printf("| distinct | group commit, change feed off | %.0f | %.0f | %.0f |\n", without.per_second, without.p50_us,
              without.p99_us);
  std::printf("| distinct | group commit, change feed on (outbox) | %.0f | %.0f | %.0f |\n", with_feed.per_second,
              with_feed.p50_us, with_feed.p99_us);
  std::printf("| distinct | ratio feed on / off | %.2f | | |\n", with_feed.per_second / without.per_second);
  std::filesystem::remove_all(dir);
}
