// Document-core benchmarks on three fixtures (about 10, 100 and 1,000 leaves; the 100-leaf
// incoming report is about 4 KB). Every leaf is a timestamped sensor value; each report
// carries newer timestamps for all of them, and a third of the leaves have a pending desired
// value that the report acknowledges: the worst case for changes and acknowledgements.
//
//   bench_document                       Google Benchmark run (time per operation)
//   bench_document --repeat N LEAVES [full|times|distinct-times|partial|partial-times|merge|copy]
//                                        runs one operation N times, for callgrind: the full
//                                        report, the same keeping leaf times (stored times
//                                        uniform, or a distinct time per leaf), a report of a
//                                        tenth of the leaves without and with (distinct) times, or
//                                        parse-merge-acknowledge with its stored sections
//                                        copied in, or that copy alone
//   bench_document --fixtures DIR        times the full report on the fixtures of
//                                        bench/go_original/make_fixtures.py, for go_compare.sh
#include "deviceshadow/arena.hpp"
#include "deviceshadow/document.hpp"
#include "deviceshadow/leaf_times.hpp"

#include <benchmark/benchmark.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>

namespace ds = deviceshadow;
namespace json = boost::json;

namespace {

struct Fixture {
  json::object reported;  // stored
  json::object desired;   // stored, a third of the leaves pending
  std::string report;     // incoming JSON text of a report updating every leaf
  std::string partial;    // the same for the first tenth of the leaves (at least one)
  // Stored leaf times of each section with a different time per leaf (the worst case for
  // reading them); times of leaves that changed together are stored as one number instead.
  std::string reported_times;
  std::string desired_times;
};

// Leaf times as a full report keeps them: none, the stored ones uniform (every leaf written by
// the previous report, the steady state of this fixture) or distinct per leaf.
enum class Times { none, uniform, distinct };
constexpr std::int64_t kStoredNs = 1'700'000'000'000'000'000;  // the previous write
constexpr std::int64_t kNowNs = kStoredNs + 1'000'000'000;

json::object& member_object(json::object& parent, const std::string& key) {
  json::value& v = parent[key];
  if (!v.is_object()) v.emplace_object();
  return v.get_object();
}

// Leaves grouped ten to a device component: {"c0":{"s0":{"value":..,"ts":..},..},..}.
Fixture make_fixture(int leaves) {
  Fixture f;
  json::object incoming, partial, reported_times, desired_times;
  for (int i = 0; i < leaves; ++i) {
    std::string group = "c" + std::to_string(i / 10);
    std::string leaf = "s" + std::to_string(i % 10);
    json::object old_value{{"value", 20.5 + i % 7}, {"ts", "2025-01-22T13:22:26.5+01:00"}};
    json::object new_value{{"value", 21.5 + i % 7}, {"ts", "2025-01-22T12:22:27Z"}};
    member_object(f.reported, group)[leaf] = old_value;
    if (i % 3 == 0) member_object(f.desired, group)[leaf] = json::object{{"value", 21.5 + i % 7}};
    member_object(incoming, group)[leaf] = new_value;
    if (i == 0 || i < leaves / 10) member_object(partial, group)[leaf] = new_value;
    member_object(reported_times, group)[leaf] = kStoredNs - i;
    if (i % 3 == 0) member_object(desired_times, group)[leaf] = kStoredNs - i;
  }
  f.report = ds::to_json(incoming);
  f.partial = ds::to_json(partial);
  f.reported_times = ds::to_json(reported_times);
  f.desired_times = ds::to_json(desired_times);
  return f;
}

// Each operation's arena starts in a buffer this large, which holds the 1,000-leaf case
// whole: no operation takes heap blocks.
constexpr std::size_t kArenaBytes = 2 << 20;

const Fixture& fixture(int leaves) {
  static const Fixture f10 = make_fixture(10), f100 = make_fixture(100), f1000 = make_fixture(1000);
  return leaves == 10 ? f10 : leaves == 100 ? f100 : f1000;
}

// One report as the engine runs it, in a per-request arena: copy the stored sections in,
// parse, validate, merge, acknowledge, serialize the changed sections, render the changes,
// and (unless Times::none) compute the new leaf times of both changed sections.
std::size_t full_report(const Fixture& f, const ds::DocumentOptions& options, Times times = Times::none,
                        bool partial = false) {
  static thread_local std::vector<unsigned char> buffer(kArenaBytes);
  ds::Arena arena(buffer.data(), buffer.size());
  json::storage_ptr sp(&arena);
  json::value incoming = ds::parse_json(partial ? f.partial : f.report, 64, sp);
  ds::UpdateOutcome out = ds::apply_update(json::object(f.reported, sp), json::object(f.desired, sp),
                                           std::move(incoming.get_object()), {}, options);
  std::string changes = "[";
  for (const ds::Change& c : out.changes) ds::append_json(changes, c);
  std::size_t times_size = 0;
  if (times != Times::none) {
    const bool distinct = times == Times::distinct;
    static const std::string uniform = std::to_string(kStoredNs);
    times_size += ds::update_leaf_times(distinct ? f.reported_times : uniform, kStoredNs, out.reported, out.changes,
                                        ds::Section::reported, kNowNs).size();
    times_size += ds::update_leaf_times(distinct ? f.desired_times : uniform, kStoredNs, out.desired, out.changes,
                                        ds::Section::desired, kNowNs).size();
  }
  return changes.size() + out.reported_json.size() + times_size;
}

void BM_ParseReport(benchmark::State& state) {
  const Fixture& f = fixture(static_cast<int>(state.range(0)));
  for (auto _ : state) benchmark::DoNotOptimize(ds::parse_json(f.report));
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * f.report.size()));
}

void BM_ApplyUpdate(benchmark::State& state) {
  const Fixture& f = fixture(static_cast<int>(state.range(0)));
  ds::DocumentOptions options;
  json::value incoming = ds::parse_json(f.report);
  for (auto _ : state) {
    benchmark::DoNotOptimize(ds::apply_update(f.reported, f.desired, incoming.get_object(), {}, options));
  }
}

void BM_FullReport(benchmark::State& state) {
  const Fixture& f = fixture(static_cast<int>(state.range(0)));
  ds::DocumentOptions options;
  for (auto _ : state) benchmark::DoNotOptimize(full_report(f, options));
  state.counters["report_bytes"] = static_cast<double>(f.report.size());
}

// The full report keeping per-leaf times; compare with BM_FullReport of the same run.
void BM_FullReportWithLeafTimes(benchmark::State& state) {
  const Fixture& f = fixture(static_cast<int>(state.range(0)));
  ds::DocumentOptions options;
  for (auto _ : state) benchmark::DoNotOptimize(full_report(f, options, Times::uniform));
}
void BM_FullReportWithDistinctLeafTimes(benchmark::State& state) {
  const Fixture& f = fixture(static_cast<int>(state.range(0)));
  ds::DocumentOptions options;
  for (auto _ : state) benchmark::DoNotOptimize(full_report(f, options, Times::distinct));
}
// A report of a tenth of the leaves, without and with times (distinct per stored leaf, which
// must then be read and rewritten).
void BM_PartialReport(benchmark::State& state) {
  const Fixture& f = fixture(static_cast<int>(state.range(0)));
  ds::DocumentOptions options;
  for (auto _ : state) benchmark::DoNotOptimize(full_report(f, options, Times::none, true));
}
void BM_PartialReportWithLeafTimes(benchmark::State& state) {
  const Fixture& f = fixture(static_cast<int>(state.range(0)));
  ds::DocumentOptions options;
  for (auto _ : state) benchmark::DoNotOptimize(full_report(f, options, Times::distinct, true));
}

// The operation the document-engine issue times: parse the incoming report, validate it, merge
// it and acknowledge, producing the change list (as data), on stored sections already in the
// arena. Serializing the result and rendering the changes are left to BM_FullReport.
std::size_t parse_merge_acknowledge(const Fixture& f, json::object& reported, json::object& desired,
                                    const ds::DocumentOptions& options, const json::storage_ptr& sp) {
  json::value incoming = ds::parse_json(f.report, 64, sp);
  const auto parsed = ds::validate_state(incoming.get_object(), options);
  ds::MergeResult merged = ds::merge_section(reported, std::move(incoming.get_object()), ds::MergeMode::server_is_master,
                                             ds::Section::reported, options.timestamp_keys, parsed);
  std::vector<ds::Acknowledgement> acknowledged = ds::acknowledge(desired, reported, options.timestamp_keys);
  return merged.changes.size() + acknowledged.size();
}

// The stored sections are copied into the arena with the clock paused.
void BM_ParseMergeAcknowledge(benchmark::State& state) {
  const Fixture& f = fixture(static_cast<int>(state.range(0)));
  ds::DocumentOptions options;
  static thread_local std::vector<unsigned char> buffer(kArenaBytes);
  std::size_t changes = 0;
  for (auto _ : state) {
    state.PauseTiming();
    ds::Arena arena(buffer.data(), buffer.size());
    json::storage_ptr sp(&arena);
    json::object reported(f.reported, sp), desired(f.desired, sp);
    state.ResumeTiming();
    changes = parse_merge_acknowledge(f, reported, desired, options, sp);
    benchmark::DoNotOptimize(changes);
  }
  state.counters["changes"] = static_cast<double>(changes);
}

void BM_Delta(benchmark::State& state) {
  const Fixture& f = fixture(static_cast<int>(state.range(0)));
  ds::TimestampKeys keys;
  for (auto _ : state) benchmark::DoNotOptimize(ds::compute_delta(f.desired, f.reported, keys));
}

BENCHMARK(BM_ParseReport)->Arg(10)->Arg(100)->Arg(1000);
BENCHMARK(BM_ApplyUpdate)->Arg(10)->Arg(100)->Arg(1000);
BENCHMARK(BM_FullReport)->Arg(10)->Arg(100)->Arg(1000);
BENCHMARK(BM_FullReportWithLeafTimes)->Arg(10)->Arg(100)->Arg(1000);
BENCHMARK(BM_FullReportWithDistinctLeafTimes)->Arg(10)->Arg(100)->Arg(1000);
BENCHMARK(BM_PartialReport)->Arg(10)->Arg(100)->Arg(1000);
BENCHMARK(BM_PartialReportWithLeafTimes)->Arg(10)->Arg(100)->Arg(1000);
BENCHMARK(BM_ParseMergeAcknowledge)->Arg(10)->Arg(100)->Arg(1000);
BENCHMARK(BM_Delta)->Arg(10)->Arg(100)->Arg(1000);

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error("cannot read " + path);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// ns per call of f, repeated until it has run a second, as Go's testing.Benchmark times the
// other side.
template <class F>
double ns_per_op(F&& f) {
  using Clock = std::chrono::steady_clock;
  std::size_t sink = 0;
  for (long n = 1;; n *= 2) {
    const auto start = Clock::now();
    for (long i = 0; i < n; ++i) sink += f();
    const double ns = std::chrono::duration<double, std::nano>(Clock::now() - start).count();
    benchmark::DoNotOptimize(sink);
    if (ns >= 1e9) return ns / static_cast<double>(n);
  }
}

// Prints "LEAVES FULL_NS MERGE_NS MERGE_ALONE_NS CHANGES" for each size of the fixtures in `dir`:
// ns per full report (as the engine runs it, serializing the result and rendering the changes),
// per parse-merge-acknowledge with the stored sections copied into the arena first (the Go
// original's merge builds its result anew), the same less that copy (the stored sections already
// in memory, as the Go side keeps its typed model), and the changes a report makes
// (acknowledgements too).
int time_fixtures(const std::string& dir) {
  ds::DocumentOptions options;
  std::vector<unsigned char> buffer(kArenaBytes);
  for (const char* leaves : {"10", "100", "1000"}) {
    const std::string base = dir + "/" + leaves + "/";
    Fixture f;
    f.reported = ds::parse_json(read_file(base + "reported.json")).as_object();
    f.desired = ds::parse_json(read_file(base + "desired.json")).as_object();
    f.report = read_file(base + "report.json");
    const std::size_t changes = ds::apply_update(f.reported, f.desired, ds::parse_json(f.report).as_object(), {}, options).changes.size();
    const double full = ns_per_op([&] { return full_report(f, options); });
    const double merge = ns_per_op([&] {
      ds::Arena arena(buffer.data(), buffer.size());
      json::storage_ptr sp(&arena);
      json::object reported(f.reported, sp), desired(f.desired, sp);
      return parse_merge_acknowledge(f, reported, desired, options, sp);
    });
    const double copy = ns_per_op([&] {
      ds::Arena arena(buffer.data(), buffer.size());
      json::storage_ptr sp(&arena);
      json::object reported(f.reported, sp), desired(f.desired, sp);
      return reported.size() + desired.size();
    });
    std::printf("%s %.0f %.0f %.0f %zu\n", leaves, full, merge, merge - copy, changes);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 3 && std::strcmp(argv[1], "--fixtures") == 0) return time_fixtures(argv[2]);
  if (argc >= 4 && std::strcmp(argv[1], "--repeat") == 0) {
    const Fixture& f = fixture(std::atoi(argv[3]));
    const std::string what = argc > 4 ? argv[4] : "full";
    ds::DocumentOptions options;
    std::vector<unsigned char> buffer(kArenaBytes);
    std::size_t sink = 0;
    for (int i = std::atoi(argv[2]); i > 0; --i) {
      if (what == "full" || what == "times" || what == "distinct-times") {
        sink += full_report(f, options, what == "full" ? Times::none : what == "times" ? Times::uniform : Times::distinct);
        continue;
      }
      if (what == "partial" || what == "partial-times") {
        sink += full_report(f, options, what == "partial" ? Times::none : Times::distinct, true);
        continue;
      }
      ds::Arena arena(buffer.data(), buffer.size());
      json::storage_ptr sp(&arena);
      json::object reported(f.reported, sp), desired(f.desired, sp);  // "copy": this alone
      if (what == "merge") sink += parse_merge_acknowledge(f, reported, desired, options, sp);
      sink += reported.size();
    }
    return sink == 1 ? 1 : 0;
  }
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  return 0;
}
