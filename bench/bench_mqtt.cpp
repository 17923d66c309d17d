// MQTT round trips through a broker, from N device clients at once (libmosquitto, QoS 1), each
// with one request in flight:
//   shadow  an AWS IoT shadow update of the client's own thing, done when its
//           $aws/things/{thing}/shadow/update/accepted arrives (shadowd --mqtt serves it);
//   echo    a publish to a topic the client subscribes to, done when the broker delivers it
//           back: the broker's own publish→deliver rate, the baseline.
// Prints one line: mode, round trips/s over the run, p50 and p99 latency in ms.
// Usage: bench_mqtt MODE PORT [clients=32] [seconds=5] [thing prefix=bench]
#include <mosquitto.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

struct Client {
  int index = 0;
  bool shadow = true;
  std::string request_topic;
  std::string answer_topic;
  std::string prefix;
  std::atomic<bool>* running = nullptr;
  std::uint64_t sent = 0;
  Clock::time_point started;
  std::vector<double> latencies_ms;  // written by this client's network thread only
  mosquitto* mosq = nullptr;

  void send() {
    ++sent;
    const std::string payload = "{\"state\":{\"reported\":{\"n\":" + std::to_string(sent) + "}},\"clientToken\":\"" +
                                prefix + "-" + std::to_string(index) + "-" + std::to_string(sent) + "\"}";
    started = Clock::now();
    mosquitto_publish(mosq, nullptr, request_topic.c_str(), static_cast<int>(payload.size()), payload.data(), 1, false);
  }
};

void on_connect(mosquitto* mosq, void* p, int rc) {
  auto& c = *static_cast<Client*>(p);
  if (rc != 0) {
    std::fprintf(stderr, "client %d: connect refused (%d)\n", c.index, rc);
    std::exit(1);
  }
  mosquitto_subscribe(mosq, nullptr, c.answer_topic.c_str(), 1);
}

void on_subscribe(mosquitto*, void* p, int, int, const int*) { static_cast<Client*>(p)->send(); }

void on_message(mosquitto*, void* p, const mosquitto_message*) {
  auto& c = *static_cast<Client*>(p);
  c.latencies_ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - c.started).count());
  if (c.running->load()) c.send();
}

double percentile(std::vector<double>& v, double q) {
  if (v.empty()) return 0;
  const auto k = static_cast<std::size_t>(q * static_cast<double>(v.size() - 1));
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(k), v.end());
  return v[k];
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: bench_mqtt shadow|echo PORT [clients] [seconds] [thing prefix]\n");
    return 2;
  }
  const std::string mode = argv[1];
  const int port = std::atoi(argv[2]);
  const int clients = argc > 3 ? std::atoi(argv[3]) : 32;
  const double seconds = argc > 4 ? std::atof(argv[4]) : 5;
  const std::string prefix = argc > 5 ? argv[5] : "bench";
  if (mode != "shadow" && mode != "echo") return 2;

  mosquitto_lib_init();
  std::atomic<bool> running{true};
  std::vector<std::unique_ptr<Client>> all;
  for (int i = 0; i < clients; ++i) {
    auto c = std::make_unique<Client>();
    c->index = i;
    c->prefix = prefix;
    c->running = &running;
    const std::string thing = prefix + "-" + std::to_string(i);
    if (mode == "shadow") {
      c->request_topic = "$aws/things/" + thing + "/shadow/update";
      c->answer_topic = c->request_topic + "/accepted";
    } else {
      c->request_topic = c->answer_topic = "bench/echo/" + thing;
    }
    c->mosq = mosquitto_new(nullptr, true, c.get());
    mosquitto_int_option(c->mosq, MOSQ_OPT_TCP_NODELAY, 1);  // as device SDKs do; Nagle would add ~40 ms per turn
    mosquitto_connect_callback_set(c->mosq, on_connect);
    mosquitto_subscribe_callback_set(c->mosq, on_subscribe);
    mosquitto_message_callback_set(c->mosq, on_message);
    all.push_back(std::move(c));
  }
  const auto begin = Clock::now();
  for (auto& c : all) {
    if (mosquitto_connect(c->mosq, "127.0.0.1", port, 30) != MOSQ_ERR_SUCCESS) {
      std::fprintf(stderr, "cannot connect to 127.0.0.1:%d\n", port);
      return 1;
    }
    mosquitto_loop_start(c->mosq);
  }
  std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
  running = false;
  const double elapsed = std::chrono::duration<double>(Clock::now() - begin).count();
  std::this_thread::sleep_for(std::chrono::milliseconds(500));  // the last answers
  std::vector<double> latencies;
  for (auto& c : all) {
    mosquitto_disconnect(c->mosq);
    mosquitto_loop_stop(c->mosq, false);
    latencies.insert(latencies.end(), c->latencies_ms.begin(), c->latencies_ms.end());
    mosquitto_destroy(c->mosq);
  }
  mosquitto_lib_cleanup();
  const double rate = static_cast<double>(latencies.size()) / elapsed;
  const double p50 = percentile(latencies, 0.50), p99 = percentile(latencies, 0.99);
  std::printf("%s %.0f/s p50 %.2fms p99 %.2fms\n", mode.c_str(), rate, p50, p99);
  return latencies.empty() ? 1 : 0;
}
