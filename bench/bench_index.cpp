// Declared indexes on SQLite (docs/queries.md, "Indexes"), in one run: the durable report rate
// with 5 declared fields against without, the background build, and the queries an index
// serves: a count and a 100-result page on a declared eq, an aggregate over its matches.
//
//   bench_index [--shadows N] [--seconds S] [--threads T] [--rounds R] [--dir DIR]
//
// The fleet is written first (not durable, through the engine, T threads); each shadow reports
// fw (one of 10 versions), temp (a timestamped value), battery, site (one of 1,000) and online.
// Then, durable: report rounds without the index and with it, alternating; each report changes
// the temp of a random shadow, a declared field, so every write with the index replaces an entry.
#include "deviceshadow/engine.hpp"
#include "deviceshadow/sqlite_store.hpp"
#include "query/aggregate.hpp"
#include "query/index.hpp"
#include "query/search.hpp"
#include "per_second.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <sys/resource.h>

namespace ds = deviceshadow;
namespace q = deviceshadow::query;
using Clock = std::chrono::steady_clock;

namespace {

const std::vector<std::string> kFields{"reported/fw", "reported/temp", "reported/battery", "reported/site", "reported/online"};

std::string thing_of(long i) { return "site-" + std::to_string(i % 1000) + "/dev-" + std::to_string(i); }

std::int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

void populate(ds::Engine& engine, long shadows, int threads) {
  std::atomic<long> next{0};
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t) {
    workers.emplace_back([&] {
      for (long i; (i = next++) < shadows;) {
        ds::UpdateRequest r;
        r.key = {thing_of(i), "main"};
        r.state = ds::parse_json(R"({"fw":"1.)" + std::to_string(i % 10) + R"(","temp":{"value":)" +
                                 std::to_string(15 + i % 20) + R"(,"ts":)" + std::to_string(now_ns()) + R"(},"battery":)" +
                                 std::to_string(i % 101) + R"(,"site":"s)" + std::to_string(i % 1000) +
                                 R"(","online":)" + (i % 3 ? "true" : "false") + "}")
                      .as_object();
        engine.update(r);
      }
    });
  }
  for (auto& w : workers) w.join();
}

// What the process has written (write(2) and kin: the log and its checkpoints) and its CPU time.
struct Usage {
  double written_bytes = 0;
  double cpu_us = 0;
};
Usage usage() {
  Usage u;
  std::ifstream io("/proc/self/io");
  for (std::string key; io >> key;) {
    if (key == "wchar:") io >> u.written_bytes;
  }
  rusage r{};
  getrusage(RUSAGE_SELF, &r);
  u.cpu_us = static_cast<double>(r.ru_utime.tv_sec + r.ru_stime.tv_sec) * 1e6 + static_cast<double>(r.ru_utime.tv_usec + r.ru_stime.tv_usec);
  return u;
}

struct Round {
  double rate = 0;  // reports/s
  double written_kib = 0;  // per report
  double cpu_us = 0;       // per report, every thread of the process
};

// Reports a new temp of random shadows from `threads` writers for `seconds`.
Round report_round(ds::Engine& engine, long shadows, int threads, double seconds) {
  std::vector<std::mt19937_64> rngs;
  for (int t = 0; t < threads; ++t) rngs.emplace_back(static_cast<unsigned>(t) * 7919 + static_cast<unsigned>(now_ns()));
  std::atomic<long> reports{0};
  const Usage before = usage();
  const double rate = per_second(threads, seconds, [&](int t, long) {
    std::mt19937_64& rng = rngs[static_cast<std::size_t>(t)];
    ds::UpdateRequest r;
    r.key = {thing_of(static_cast<long>(rng() % static_cast<unsigned long>(shadows))), "main"};
    boost::json::object temp;
    temp["value"] = 15.0 + static_cast<double>(rng() % 200) / 10;
    temp["ts"] = now_ns();
    r.state["temp"] = std::move(temp);
    engine.update(r);
    ++reports;
  });
  const Usage after = usage();
  const double n = static_cast<double>(std::max(1L, reports.load()));
  return {rate, (after.written_bytes - before.written_bytes) / 1024 / n, (after.cpu_us - before.cpu_us) / n};
}

// The median of `runs` timings of f, in ms.
template <class F>
double median_ms(int runs, F&& f) {
  std::vector<double> ms;
  for (int i = 0; i < runs; ++i) {
    const auto start = Clock::now();
    f();
    ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - start).count());
  }
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  long shadows = 1000000;
  double seconds = 5;
  int threads = 8, rounds = 2;
  std::filesystem::path dir = std::filesystem::temp_directory_path() / "deviceshadow-bench-index";
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--shadows")) shadows = std::stol(argv[i + 1]);
    if (!std::strcmp(argv[i], "--seconds")) seconds = std::stod(argv[i + 1]);
    if (!std::strcmp(argv[i], "--threads")) threads = std::stoi(argv[i + 1]);
    if (!std::strcmp(argv[i], "--rounds")) rounds = std::stoi(argv[i + 1]);
    if (!std::strcmp(argv[i], "--dir")) dir = argv[i + 1];
  }
  std::filesystem::remove_all(dir);
  ds::SqliteOptions options;
  options.path = (dir / "shadows.db").string();
  ds::EngineOptions engine_options;
  engine_options.history = false;  // the fleet's own history is not what is measured
  {
    options.durable = false;
    auto store = ds::open_sqlite_store(options);
    ds::Engine engine(*store, engine_options);
    const auto start = Clock::now();
    populate(engine, shadows, threads);
    std::printf("populated %ld shadows in %.1f s\n", shadows, std::chrono::duration<double>(Clock::now() - start).count());
    std::fflush(stdout);
  }
  options.durable = true;
  auto store = ds::open_sqlite_store(options);
  ds::Engine plain(*store, engine_options), indexed(*store, engine_options);
  q::IndexKeeper keeper(*store, engine_options.document.timestamp_keys);
  indexed.set_indexer(&keeper);
  const auto start = Clock::now();
  keeper.declare(kFields);
  keeper.wait_until_built();
  std::printf("built 5 fields over %ld shadows in %.1f s\n", shadows, std::chrono::duration<double>(Clock::now() - start).count());
  std::fflush(stdout);

  std::printf("\n| round | durable reports/s without the index | with 5 declared fields | ratio "
              "| KiB written a report, without / with | CPU µs a report, without / with |\n|---|---|---|---|---|---|\n");
  for (int r = 1; r <= rounds; ++r) {
    const Round without = report_round(plain, shadows, threads, seconds);
    const Round with = report_round(indexed, shadows, threads, seconds);
    std::printf("| %d | %.0f | %.0f | %.2f | %.1f / %.1f | %.0f / %.0f |\n", r, without.rate, with.rate, with.rate / without.rate,
                without.written_kib, with.written_kib, without.cpu_us, with.cpu_us);
    std::fflush(stdout);
  }

  // fw is never reported again, so its index is exact whichever engine wrote last.
  const ds::TimestampKeys& keys = engine_options.document.timestamp_keys;
  const q::Filter eq = q::Filter::parse(R"(eq(reported/fw,"1.3"))", now_ns());
  const q::QueryOptions with_index{.budget = 200000, .indexes = &keeper};
  std::uint64_t count = 0;
  const double count_ms = median_ms(5, [&] { count = q::count(*store, keys, {eq, {}, std::nullopt, false}, with_index); });
  std::size_t page = 0;
  const double page_ms = median_ms(5, [&] {
    page = 0;
    q::scan(*store, keys, {eq, {}, std::nullopt, false}, with_index, [&](const q::Subject&) { return ++page < 100; });
  });
  std::string groups;
  const double averages_ms = median_ms(3, [&] {  // the same without percentiles, for their cost
    q::Aggregation a({q::parse_property("reported/online")}, {q::parse_metric("n", "count()"), q::parse_metric("t", "avg(reported/temp)")}, 100);
    q::scan(*store, keys, {eq, {}, std::nullopt, false}, with_index, [&](const q::Subject& s) {
      a.add(s);
      return true;
    });
  });
  const double aggregate_ms = median_ms(3, [&] {
    q::Aggregation a({q::parse_property("reported/online")},
                     {q::parse_metric("n", "count()"), q::parse_metric("t", "avg(reported/temp)"),
                      q::parse_metric("p", "percentiles(reported/temp,99)")},
                     100);
    q::scan(*store, keys, {eq, {}, std::nullopt, false}, with_index, [&](const q::Subject& s) {
      a.add(s);
      return true;
    });
    groups = a.render();
  });
  std::printf("\n| query (eq(reported/fw,\"1.3\"), %ld shadows) | median ms |\n|---|---|\n", shadows);
  std::printf("| count: %llu | %.1f |\n", static_cast<unsigned long long>(count), count_ms);
  std::printf("| page of %zu | %.1f |\n", page, page_ms);
  std::printf("| aggregate over the %llu matches, by reported/online: count and avg of reported/temp | %.0f |\n",
              static_cast<unsigned long long>(count), averages_ms);
  std::printf("| the same with the p99 of reported/temp | %.0f |\n", aggregate_ms);
  std::printf("%s\n", groups.c_str());
  std::filesystem::remove_all(dir);
}
