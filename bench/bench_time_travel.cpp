// The cost of an as-of read against the length of a shadow's history, on SQLite
// (durable=false: the write phase is set-up, not what is measured). For each history length,
// one shadow gets that many reports (a few members changing, one added now and then), then
// as-of reads at moments spread over its history are timed, with and without images
// (EngineOptions::history_image_every), and the events each read loaded are counted.
//
//   bench_time_travel [--reads N] [--dir DIR]
#include "deviceshadow/engine.hpp"
#include "deviceshadow/sqlite_store.hpp"
#include "deviceshadow/time_travel.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>
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

}  // namespace

int main(int argc, char** argv) {
  int reads = 200;
  std::filesystem::path dir = std::filesystem::temp_directory_path() / "bench_time_travel";
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--reads")) reads = std::atoi(argv[i + 1]);
    if (!std::strcmp(argv[i], "--dir")) dir = argv[i + 1];
  }
  std::printf("| events in history | images every | events read per as-of read (mean / max) | time per read (mean / p99) |\n");
  std::printf("|---:|---:|---:|---:|\n");
  for (int events : {100, 1000, 10000}) {
    for (std::size_t every : {std::size_t{0}, std::size_t{64}}) {
      const Result r = run(dir, events, every, reads);
      std::printf("| %d | %s | %.0f / %zu | %.0f µs / %.0f µs |\n", events, every ? "64" : "none", r.mean_events,
                  r.max_events, r.mean_us, r.p99_us);
      std::fflush(stdout);
    }
  }
  std::filesystem::remove_all(dir);
}
