// The cost of an as-of read against the length of a shadow's history, on SQLite
// (durable=false: the write phase is set-up, not what is measured). For each history length,
// one shadow gets that many reports (a few members changing, one added now and then), then
// as-of reads at moments spread over its history are timed, with and without images
// (EngineOptions::history_image_every), and the events each read loaded are counted.
//
// --goals measures the time-travel goals instead, each against its baseline in the same run:
// as-of reads at random moments of a 100,000-event history against GETs of the same shadow
// (SQLite and memory), the durable report rate with images and without (alternating rounds),
// and the points a second of a series of one leaf over that history.
//
//   bench_time_travel [--reads N] [--dir DIR] [--goals [--events N] [--no-durable]]
#include "deviceshadow/engine.hpp"
#include "deviceshadow/memory_store.hpp"
#include "deviceshadow/sqlite_store.hpp"
#include "deviceshadow/store_backend.hpp"
#include "deviceshadow/time_travel.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <random>
#include <sys/resource.h>
#include <string>
#include <thread>
#include <vector>

namespace ds = deviceshadow;
using Clock = std::chrono::steady_clock;

namespace {

struct Result {
  double mean_events;
  std::size_t max_events;
  double mean_us;
  double p99_us;
};

Result run(const std::filesystem::path& dir, int events, std::size_t image_every, int reads) {
  std::filesystem::remove_all(dir);
  ds::SqliteOptions options;
  options.path = (dir / "shadows.db").string();
  options.durable = false;
  auto store = ds::open_sqlite_store(options);
  ds::EngineOptions engine_options;
  engine_options.history_image_every = image_every;
  ds::Engine engine(*store, engine_options);
  const ds::ShadowKey key{"bench-thing", "main"};
  std::vector<std::string> ids;
  for (int i = 0; i < events; ++i) {
    ds::UpdateRequest r;
    r.key = key;
    r.state = ds::parse_json("{\"temp\":" + std::to_string(20 + i % 7) + ",\"humidity\":" + std::to_string(i % 50) +
                             ",\"m" + std::to_string(i % 40) + "\":" + std::to_string(i) + "}")
                  .as_object();
    engine.update(r);
    ds::HistoryRequest q;
    q.limit = 1;
    ids.push_back(engine.history(key, q).events.at(0).id);
  }
  std::vector<double> us;
  std::size_t total_events = 0, max_events = 0;
  for (int k = 0; k < reads; ++k) {
    ds::Moment m;
    m.kind = ds::Moment::Kind::event;
    m.event_id = ids[static_cast<std::size_t>(k) * ids.size() / static_cast<std::size_t>(reads)];
    const auto start = Clock::now();
    const ds::PastShadow past = ds::shadow_as_of(engine, key, m);
    us.push_back(std::chrono::duration<double, std::micro>(Clock::now() - start).count());
    total_events += past.events_read;
    max_events = std::max(max_events, past.events_read);
  }
  std::sort(us.begin(), us.end());
  double sum = 0;
  for (double u : us) sum += u;
  return {static_cast<double>(total_events) / reads, max_events, sum / reads, us[us.size() * 99 / 100]};
}


double percentile(std::vector<double> v, double p) {
  std::sort(v.begin(), v.end());
  return v[static_cast<std::size_t>(static_cast<double>(v.size() - 1) * p)];
}

std::unique_ptr<ds::StoreBackend> open_store(const std::filesystem::path& dir, bool sqlite, bool durable) {
  if (!sqlite) return ds::make_memory_store();
  std::filesystem::remove_all(dir);
  ds::SqliteOptions options;
  options.path = (dir / "shadows.db").string();
  options.durable = durable;
  return ds::open_sqlite_store(options);
}

std::string report_state(int i) {
  return "{\"temp\":" + std::to_string(20 + i % 7) + ",\"humidity\":" + std::to_string(i % 50) + ",\"m" +
         std::to_string(i % 40) + "\":" + std::to_string(i) + "}";
}

// As-of reads at random times of an `events`-long history against GETs, then the series of
// /temp over it, page by page.
void as_of_against_get(const std::filesystem::path& dir, bool sqlite, int events, int reads) {
  auto store = open_store(dir, sqlite, false);
  ds::Engine engine(*store);
  const ds::ShadowKey key{"bench-thing", "main"};
  std::int64_t first = 0;
  for (int i = 0; i < events; ++i) {
    ds::UpdateRequest r;
    r.key = key;
    r.state = ds::parse_json(report_state(i)).as_object();
    engine.update(r);
    if (i == 0) first = engine.options().clock();
  }
  const std::int64_t last = engine.options().clock();
  std::mt19937_64 rng(42);
  std::vector<double> as_of_us, get_us;
  std::size_t events_read = 0;
  for (int k = 0; k < reads; ++k) {  // interleaved, so both see the same machine
    ds::Moment m;
    m.time_ns = first + static_cast<std::int64_t>(rng() % static_cast<std::uint64_t>(last - first));
    auto start = Clock::now();
    events_read = std::max(events_read, ds::shadow_as_of(engine, key, m, false).events_read);
    as_of_us.push_back(std::chrono::duration<double, std::micro>(Clock::now() - start).count());
    start = Clock::now();
    const ds::ShadowView now = engine.get(key);
    get_us.push_back(std::chrono::duration<double, std::micro>(Clock::now() - start).count());
    if (now.record.reported.version == 0) std::abort();
  }
  std::printf("| %s | %d | as-of p50 %.0f µs, p99 %.0f µs (at most %zu events) | GET p50 %.0f µs, p99 %.0f µs | **%.2f** |\n",
              sqlite ? "SQLite" : "memory", events, percentile(as_of_us, 0.5), percentile(as_of_us, 0.99), events_read,
              percentile(get_us, 0.5), percentile(get_us, 0.99), percentile(as_of_us, 0.99) / percentile(get_us, 0.99));
  ds::SeriesRequest q;
  q.path = "/temp";
  q.limit = ds::kMaxPageLimit;
  std::size_t points = 0;
  const auto start = Clock::now();
  do {
    ds::Series page = ds::shadow_series(engine, key, q);
    points += page.points.size();
    q.cursor = page.cursor;
  } while (!q.cursor.empty());
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  std::printf("| %s | %d | series of /temp: %zu points in %.2f s | | **%.0f points/s** |\n", sqlite ? "SQLite" : "memory",
              events, points, seconds, static_cast<double>(points) / seconds);
  std::fflush(stdout);
}

struct Rate {
  double writes_per_second;
  double cpu_us_per_write;  // user and system time of the process: steadier than the rate on a shared machine
};

double cpu_seconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) + (u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}

// Durable reports from 8 threads, each to its own shadows, for `writes` writes.
Rate durable_rate(const std::filesystem::path& dir, std::size_t image_every, int writes) {
  auto store = open_store(dir, true, true);
  ds::EngineOptions options;
  options.history_image_every = image_every;
  ds::Engine engine(*store, options);
  constexpr int kThreads = 8;
  const auto start = Clock::now();
  const double cpu_start = cpu_seconds();
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < writes / kThreads; ++i) {
        ds::UpdateRequest r;
        r.key = {"bench-" + std::to_string(t * 10 + i % 10), "main"};
        r.state = ds::parse_json(report_state(i)).as_object();
        engine.update(r);
      }
    });
  }
  for (std::thread& t : threads) t.join();
  return {writes / std::chrono::duration<double>(Clock::now() - start).count(), (cpu_seconds() - cpu_start) * 1e6 / writes};
}

void goals(const std::filesystem::path& dir, int events, int reads, bool durable) {
  std::printf("| store | events | as-of read at a random time | GET of the same shadow | p99 ratio / rate |\n|---|---:|---|---|---:|\n");
  as_of_against_get(dir, true, events, reads);
  as_of_against_get(dir, false, events, reads);
  if (!durable) return;
  std::vector<double> with, without, with_cpu, without_cpu;
  constexpr int kRounds = 5;
  for (int round = 0; round < kRounds; ++round) {
    const Rate a = durable_rate(dir, 0, 20000), b = durable_rate(dir, 64, 20000);
    without.push_back(a.writes_per_second);
    without_cpu.push_back(a.cpu_us_per_write);
    with.push_back(b.writes_per_second);
    with_cpu.push_back(b.cpu_us_per_write);
  }
  std::printf("\nDurable reports (SQLite synchronous=FULL, 8 writer threads, 80 shadows, 20,000 writes a round, %d "
              "alternating rounds), medians: without images %.0f/s and %.1f µs of CPU a write; with images (the defaults) "
              "%.0f/s and %.1f µs; ratios: rate **%.3f**, CPU a write **%.3f**\n",
              kRounds, percentile(without, 0.5), percentile(without_cpu, 0.5), percentile(with, 0.5),
              percentile(with_cpu, 0.5), percentile(with, 0.5) / percentile(without, 0.5),
              percentile(with_cpu, 0.5) / percentile(without_cpu, 0.5));
}
}  // namespace

int main(int argc, char** argv) {
  int reads = 200, events = 100000;
  bool measure_goals = false, durable = true;
  std::filesystem::path dir = std::filesystem::temp_directory_path() / "bench_time_travel";
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--goals")) measure_goals = true;
    if (!std::strcmp(argv[i], "--no-durable")) durable = false;
    if (i + 1 >= argc) continue;
    if (!std::strcmp(argv[i], "--reads")) reads = std::atoi(argv[i + 1]);
    if (!std::strcmp(argv[i], "--events")) events = std::atoi(argv[i + 1]);
    if (!std::strcmp(argv[i], "--dir")) dir = argv[i + 1];
  }
  if (measure_goals) {
    goals(dir, events, std::max(reads, 1000), durable);
    std::filesystem::remove_all(dir);
    return 0;
  }
  std::printf("| events in history | images | events read per as-of read (mean / max) | time per read (mean / p99) |\n");
  std::printf("|---:|---:|---:|---:|\n");
  for (int events : {100, 1000, 10000}) {
    for (std::size_t every : {std::size_t{0}, std::size_t{64}}) {
      const Result r = run(dir, events, every, reads);
      std::printf("| %d | %s | %.0f / %zu | %.0f µs / %.0f µs |\n", events, every ? "default" : "none", r.mean_events,
                  r.max_events, r.mean_us, r.p99_us);
      std::fflush(stdout);
    }
  }
  std::filesystem::remove_all(dir);
}
