// Notification targets against real local services: events/s that shadowd's dispatcher
// delivers to SQS on moto_server and to a Mosquitto broker, each against a raw client's rate
// measured in the same round (a minimal keep-alive client doing the same calls by hand:
// SendMessageBatch of 10, or QoS 1 PUBLISH with as many awaiting PUBACK as the dispatcher
// keeps in flight). Run under scripts/with-services.sh (DS_MOTO_ENDPOINT, DS_MQTT_URL):
//
//   scripts/with-services.sh build/default/bench/bench_targets [--events N] [--rounds R] [--dir DIR]
//   environment: BENCH_CONCURRENCY=N sets --notify-concurrency (8); BENCH_NICE=N the nice levels
//   the delivery threads run below the process (10); BENCH_ONLY=sqs|mqtt runs one
//
// Instructions per event: under `valgrind --tool=callgrind --instr-atstart=no` the drain (every
// thread, from the dispatcher's start until the last event is delivered) is dumped as "drain",
// and the raw MQTT client's run as "raw mqtt": divide a dump's total Ir by the events, e.g.
// with BENCH_ONLY=mqtt --rounds 1. Each drain
// (and the raw MQTT client) also prints the process's CPU time (user + system) and context
// switches per event to stderr.
//
// The dispatcher's rate is a backlog of N events (written while no dispatcher ran, 1,000
// shadows) drained by one registration; the emulator or broker shares the 2 cores with it.
#include "aws/client.hpp"
#include "aws/credentials.hpp"
#include "aws/signed_post.hpp"
#include "deviceshadow/engine.hpp"
#include "deviceshadow/json.hpp"
#include "deviceshadow/sqlite_store.hpp"
#include "deviceshadow/timestamp.hpp"
#include "notify/dispatcher.hpp"

#include <boost/json.hpp>
#include <mosquitto.h>
#include <sys/resource.h>
#include <valgrind/callgrind.h>

#include <algorithm>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

namespace ds = deviceshadow;
namespace notify = deviceshadow::notify;
using Clock = std::chrono::steady_clock;

namespace {

double since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

// The process's CPU time (user + system) and context switches since it was made, per event, to stderr.
struct Usage {
  rusage start{};
  Usage() { getrusage(RUSAGE_SELF, &start); }
  void print(const char* what, long n) const {
    rusage now{};
    getrusage(RUSAGE_SELF, &now);
    auto cpu_us = [](const rusage& r) {
      return (r.ru_utime.tv_sec + r.ru_stime.tv_sec) * 1e6 + r.ru_utime.tv_usec + r.ru_stime.tv_usec;
    };
    std::fprintf(stderr, "%s: %.1f CPU µs and %.2f context switches (%.2f voluntary) per event\n", what,
                 (cpu_us(now) - cpu_us(start)) / n,
                 static_cast<double>(now.ru_nvcsw + now.ru_nivcsw - start.ru_nvcsw - start.ru_nivcsw) / n,
                 static_cast<double>(now.ru_nvcsw - start.ru_nvcsw) / n);
  }
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

// A body of the size of the events below (about 450 bytes).
std::string sample_event() {
  std::string body = R"({"specversion":"1.0","id":"0000000000000001-0001","source":"deviceshadow","type":"deviceshadow.shadow.updated","subject":"device-1#main","time":"2026-11-23T12:00:00.000000000Z","datacontenttype":"application/json","data":{"thing":"device-1","name":"main","op":"report","registration":"bench","reported":{"version":7,"old":{"sensor":{"value":21.5,"ts":1700000000000000000}},"new":{"sensor":{"value":21.6,"ts":1700000000000000001}},"diff":[{"op":"replace","path":"/sensor/value","value":21.6}]}}})";
  return body;
}

// Writes `n` reports to 1,000 shadows with the feed on and no dispatcher running.
void fill(ds::Engine& engine, long n) {
  engine.set_change_feed(true);
  std::vector<std::thread> workers;
  for (int t = 0; t < 8; ++t) {
    workers.emplace_back([&, t] {
      for (long i = t; i < n; i += 8) {
        ds::UpdateRequest r;
        r.key = {"device-" + std::to_string(i % 1000), "main"};
        boost::json::object reading{{"value", 20.0 + static_cast<double>(i % 100) / 10}, {"ts", ds::now().unix_nanos()}};
        r.state["sensor"] = std::move(reading);
        engine.update(r);
      }
    });
  }
  for (auto& w : workers) w.join();
}

// Events/s delivered by one registration with `target` (JSON) draining a backlog of `n`.
double drain(const std::filesystem::path& dir, const std::string& target, long n, const notify::DispatcherOptions& options) {
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  ds::SqliteOptions o;
  o.path = (dir / "shadows.db").string();
  o.durable = false;
  auto store = ds::open_sqlite_store(o);
  ds::Engine engine(*store);
  const std::string registration = R"({"sections":"reported","maxAttempts":1000,"target":)" + target + "}";
  { notify::Dispatcher(engine, *store, options).put("bench", registration); }
  fill(engine, n);
  CALLGRIND_START_INSTRUMENTATION;  // no-ops outside callgrind: the drain is dumped alone
  CALLGRIND_ZERO_STATS;
  const Usage usage;
  const auto start = Clock::now();
  notify::Dispatcher dispatcher(engine, *store, options);
  while (dispatcher.status("bench")->delivered < static_cast<std::uint64_t>(n)) {
    if (since(start) > 600 * (RUNNING_ON_VALGRIND ? 50 : 1)) {
      std::fprintf(stderr, "drain: gave up; %s\n", dispatcher.status("bench")->last_error.value_or("").c_str());
      return 0;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  const double rate = static_cast<double>(n) / since(start);
  CALLGRIND_DUMP_STATS_AT("drain");
  usage.print("drain", n);
  return rate;
}

class Sqs {
 public:
  explicit Sqs(std::string endpoint)
      : endpoint_(std::move(endpoint)),
        credentials_(ds::aws::load_credentials()),
        client_({.endpoint = endpoint_, .region = "us-east-1", .service = "sqs", .target_prefix = "AmazonSQS."}, credentials_) {}

  std::string create_queue() {
    const std::string name = "bench-" + std::to_string(std::random_device{}());
    return std::string(client_.call("CreateQueue", R"({"QueueName":")" + name + R"("})", true).at("QueueUrl").as_string());
  }

  // Messages/s sent by SendMessageBatch of 10 from one keep-alive connection, with the
  // attributes the target sends.
  double raw_rate(const std::string& queue_url, long n) {
    ds::aws::SignedPost http({endpoint_, "us-east-1", "sqs"});
    std::string entry = R"({"MessageBody":)";
    ds::append_json_string(entry, sample_event());
    entry += R"(,"MessageAttributes":{"thing":{"DataType":"String","StringValue":"device-1"},"name":{"DataType":"String","StringValue":"main"},"type":{"DataType":"String","StringValue":"deviceshadow.shadow.updated"}},"Id":")";
    const auto start = Clock::now();
    for (long sent = 0; sent < n; sent += 10) {
      std::string body = R"({"QueueUrl":")" + queue_url + R"(","Entries":[)";
      for (int i = 0; i < 10; ++i) body += (i ? "," : "") + entry + std::to_string(i) + "\"}";
      body += "]}";
      auto answer = http.post({{"Content-Type", "application/x-amz-json-1.0"}, {"X-Amz-Target", "AmazonSQS.SendMessageBatch"}},
                              std::move(body), credentials_);
      if (answer.status != 200 || answer.body.find("\"Failed\": [{") != std::string::npos) {
        std::fprintf(stderr, "raw SendMessageBatch: %ld %s %s\n", answer.status, answer.transport_error.c_str(), answer.body.c_str());
        return 0;
      }
    }
    return static_cast<double>(n) / since(start);
  }

 private:
  std::string endpoint_;
  ds::aws::Credentials credentials_;
  ds::aws::JsonClient client_;
};

// Messages/s published at QoS 1 with at most `window` awaiting their PUBACK.
double raw_mqtt_rate(const std::string& url, long n, std::size_t window) {
  struct State {
    std::mutex mutex;
    std::condition_variable cv;
    long acked = 0;
    bool connected = false;
  } state;
  mosquitto_lib_init();
  mosquitto* mosq = mosquitto_new(nullptr, true, &state);
  mosquitto_connect_callback_set(mosq, [](mosquitto*, void* s, int rc) {
    auto* st = static_cast<State*>(s);
    std::lock_guard lock(st->mutex);
    st->connected = rc == 0;
    st->cv.notify_all();
  });
  mosquitto_publish_callback_set(mosq, [](mosquitto*, void* s, int) {
    auto* st = static_cast<State*>(s);
    std::lock_guard lock(st->mutex);
    ++st->acked;
    st->cv.notify_all();
  });
  const int port = std::atoi(url.c_str() + url.rfind(':') + 1);
  mosquitto_connect(mosq, "127.0.0.1", port, 30);
  mosquitto_loop_start(mosq);
  {
    std::unique_lock lock(state.mutex);
    state.cv.wait(lock, [&] { return state.connected; });
  }
  const std::string payload = sample_event();
  CALLGRIND_START_INSTRUMENTATION;
  CALLGRIND_ZERO_STATS;
  const Usage usage;
  const auto start = Clock::now();
  for (long i = 0; i < n; ++i) {
    {
      std::unique_lock lock(state.mutex);
      state.cv.wait(lock, [&] { return i - state.acked < static_cast<long>(window); });
    }
    const std::string topic = "raw/device-" + std::to_string(i % 1000) + "/main";
    mosquitto_publish(mosq, nullptr, topic.c_str(), static_cast<int>(payload.size()), payload.data(), 1, false);
  }
  {
    std::unique_lock lock(state.mutex);
    state.cv.wait(lock, [&] { return state.acked >= n; });
  }
  const double rate = static_cast<double>(n) / since(start);
  CALLGRIND_DUMP_STATS_AT("raw mqtt");
  CALLGRIND_STOP_INSTRUMENTATION;
  usage.print("raw mqtt", n);
  mosquitto_disconnect(mosq);
  mosquitto_loop_stop(mosq, true);
  mosquitto_destroy(mosq);
  return rate;
}

}  // namespace

int main(int argc, char** argv) {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  long events = 20000;
  int rounds = 3;
  std::filesystem::path dir = std::filesystem::temp_directory_path() / "bench_targets";
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--events")) events = std::stol(argv[i + 1]);
    if (!std::strcmp(argv[i], "--rounds")) rounds = std::stoi(argv[i + 1]);
    if (!std::strcmp(argv[i], "--dir")) dir = argv[i + 1];
  }
  notify::DispatcherOptions options;
  if (const char* c = std::getenv("BENCH_CONCURRENCY")) options.concurrency = std::stoul(c);
  if (const char* n = std::getenv("BENCH_NICE")) options.nice = std::stoi(n);
  const char* moto = std::getenv("DS_MOTO_ENDPOINT");
  const char* mqtt = std::getenv("DS_MQTT_URL");
  if (!moto || !mqtt) {
    std::fprintf(stderr, "run under scripts/with-services.sh (DS_MOTO_ENDPOINT, DS_MQTT_URL)\n");
    return 2;
  }
  std::printf("events per run: %ld, rounds: %d, concurrency: %zu, nice: %d\n\n", events, rounds, options.concurrency, options.nice);
  std::printf("| round | SQS raw msg/s | SQS shadowd events/s | ratio | MQTT raw msg/s | MQTT shadowd events/s | ratio |\n|---|---|---|---|---|---|---|\n");
  std::vector<double> sqs_ratios, mqtt_ratios, sqs_raw, sqs_ours, mqtt_raw, mqtt_ours;
  Sqs sqs(moto);
  for (int round = 1; round <= rounds; ++round) {
    const char* only = std::getenv("BENCH_ONLY");
    const bool run_sqs = !only || !std::strcmp(only, "sqs");
    const bool run_mqtt = !only || !std::strcmp(only, "mqtt");
    const double sr = run_sqs ? sqs.raw_rate(sqs.create_queue(), events) : 0;
    const double so = run_sqs ? drain(dir, R"({"type":"sqs","queueUrl":")" + sqs.create_queue() + R"(","endpoint":")" + moto + "\"}", events, options) : 0;
    const double mr = run_mqtt ? raw_mqtt_rate(mqtt, events, options.concurrency) : 0;
    const double mo = run_mqtt ? drain(dir, R"({"type":"mqtt","broker":")" + std::string(mqtt) + R"(","topic":"bench/{thing}/{name}"})", events, options) : 0;
    sqs_raw.push_back(sr), sqs_ours.push_back(so), mqtt_raw.push_back(mr), mqtt_ours.push_back(mo);
    sqs_ratios.push_back(so / sr), mqtt_ratios.push_back(mo / mr);
    std::printf("| %d | %.0f | %.0f | %.2f | %.0f | %.0f | %.2f |\n", round, sr, so, so / sr, mr, mo, mo / mr);
  }
  std::printf("| median | %.0f | %.0f | **%.2f** | %.0f | %.0f | **%.2f** |\n", median(sqs_raw), median(sqs_ours),
              median(sqs_ratios), median(mqtt_raw), median(mqtt_ours), median(mqtt_ratios));
  std::filesystem::remove_all(dir);
}
