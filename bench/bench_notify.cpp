// Notifications on SQLite: what registrations cost writers, how fast the dispatcher delivers,
// its latency, and its memory with a large backlog. Webhook targets post to a fast receiver in
// this process, so delivery, its receiver and the writes share the machine's CPUs.
//
//   bench_notify [--seconds S] [--threads N] [--rounds R] [--backlog M] [--dir DIR]
//   environment: BENCH_ONLY=writes|drain|latency|memory runs one scenario; BENCH_CONCURRENCY=N
//   sets --notify-concurrency; BENCH_NICE=N --notify-nice; BENCH_SECTIONS=desired makes the
//   registrations match no write (reports only), which leaves the cost of the feed and of
//   reading and matching it; BENCH_NONDURABLE=1 runs the writes scenario without fsync
//   (synchronous=OFF); BENCH_REGISTRATIONS=N registers N instead of three in it.
//
//  1. write throughput with no registration and with three (all delivered to the receiver),
//     alternating R times; the ratio of the medians;
//  2. drain: M events written while no dispatcher ran, then delivered by one registration, and
//     the process's CPU time per event meanwhile;
//  3. latency from write to receipt at 1000 writes/s (p50, p99);
//  4. memory: M undelivered events while the target answers 503, RSS before and after.
#include "deviceshadow/engine.hpp"
#include "deviceshadow/sqlite_store.hpp"
#include "deviceshadow/timestamp.hpp"
#include "notify/dispatcher.hpp"
#include "per_second.hpp"

#include <boost/json.hpp>

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

namespace ds = deviceshadow;
namespace notify = deviceshadow::notify;
using Clock = std::chrono::steady_clock;

namespace {

// A fast webhook receiver: one thread, epoll, HTTP/1.1 keep-alive, every request answered 204
// (or `status`) as soon as its body is in. Counts events and, when asked, their latency from
// the write (the CloudEvent's "time").
class Receiver {
 public:
  Receiver() {
    listener_ = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::bind(listener_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 || ::listen(listener_, 512) != 0) {
      throw std::runtime_error("receiver: cannot listen");
    }
    socklen_t len = sizeof addr;
    ::getsockname(listener_, reinterpret_cast<sockaddr*>(&addr), &len);
    port_ = ntohs(addr.sin_port);
    epoll_ = ::epoll_create1(0);
    add(listener_);
    ::pipe2(wake_, O_NONBLOCK);
    add(wake_[0]);
    thread_ = std::thread([this] { run(); });
  }
  ~Receiver() {
    ::write(wake_[1], "x", 1);
    thread_.join();
    for (auto& [fd, buffer] : connections_) ::close(fd);
    ::close(listener_);
    ::close(epoll_);
    ::close(wake_[0]);
    ::close(wake_[1]);
  }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_) + "/hook"; }
  std::atomic<std::uint64_t> received{0};
  std::atomic<int> status{204};
  std::atomic<bool> measure{false};
  std::vector<double> latencies_ms() {
    std::lock_guard lock(mutex_);
    return latencies_;
  }

 private:
  void add(int fd) {
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.fd = fd;
    ::epoll_ctl(epoll_, EPOLL_CTL_ADD, fd, &ev);
  }
  void run() {
    epoll_event events[64];
    char chunk[65536];
    for (;;) {
      const int n = ::epoll_wait(epoll_, events, 64, -1);
      for (int i = 0; i < n; ++i) {
        const int fd = events[i].data.fd;
        if (fd == wake_[0]) return;
        if (fd == listener_) {
          for (int c; (c = ::accept4(listener_, nullptr, nullptr, SOCK_NONBLOCK)) >= 0;) {
            connections_[c];
            add(c);
          }
          continue;
        }
        std::string& buffer = connections_[fd];
        ssize_t got;  // level-triggered: a short read has taken all there was
        while ((got = ::read(fd, chunk, sizeof chunk)) > 0) {
          buffer.append(chunk, static_cast<std::size_t>(got));
          if (static_cast<std::size_t>(got) < sizeof chunk) break;
        }
        if (got == 0 || (got < 0 && errno != EAGAIN)) {
          ::close(fd);
          connections_.erase(fd);
          continue;
        }
        serve(fd, buffer);
      }
    }
  }
  // Answers every complete request in the buffer.
  void serve(int fd, std::string& buffer) {
    for (;;) {
      const std::size_t head_end = buffer.find("\r\n\r\n");
      if (head_end == std::string::npos) return;
      std::size_t length = 0;
      const std::size_t cl = buffer.find("Content-Length:");
      if (cl != std::string::npos && cl < head_end) length = std::stoul(buffer.substr(cl + 15, 20));
      if (buffer.size() < head_end + 4 + length) return;
      const int answer = status.load();
      if (answer == 204) {
        ++received;
        if (measure) record(std::string_view(buffer).substr(head_end + 4, length));
      }
      const std::string reply = "HTTP/1.1 " + std::to_string(answer) + (answer == 204 ? " No Content" : " Unavailable") +
                                "\r\nContent-Length: 0\r\n\r\n";
      ::write(fd, reply.data(), reply.size());
      buffer.erase(0, head_end + 4 + length);
    }
  }
  void record(std::string_view body) {
    const auto event = boost::json::parse(body).as_object();
    const auto written = ds::parse_rfc3339(event.at("time").as_string());
    const double ms = static_cast<double>(ds::now().unix_nanos() - written->unix_nanos()) / 1e6;
    std::lock_guard lock(mutex_);
    latencies_.push_back(ms);
  }

  int listener_ = -1, epoll_ = -1, wake_[2] = {-1, -1};
  unsigned short port_ = 0;
  std::unordered_map<int, std::string> connections_;
  std::mutex mutex_;
  std::vector<double> latencies_;
  std::thread thread_;
};

std::unique_ptr<ds::StoreBackend> open_store(const std::filesystem::path& dir, bool durable) {
  ds::SqliteOptions o;
  o.path = (dir / "shadows.db").string();
  o.durable = durable;
  return ds::open_sqlite_store(o);
}

void report(ds::Engine& engine, int thread, long i) {
  ds::UpdateRequest r;
  r.key = {"device-" + std::to_string(thread) + "-" + std::to_string(i % 64), "main"};
  boost::json::object reading;
  reading["value"] = 20.0 + static_cast<double>(i % 100) / 10;
  reading["ts"] = ds::now().unix_nanos();
  r.state["sensor"] = std::move(reading);
  engine.update(r);
}

// Writers for `seconds`; returns writes per second.
double write_for(ds::Engine& engine, int threads, double seconds) {
  return per_second(threads, seconds, [&](int t, long i) { report(engine, t, i); });
}

// Writes `n` events with the feed on and no dispatcher running.
void fill(ds::Engine& engine, long n, int threads) {
  engine.set_change_feed(true);
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t) {
    workers.emplace_back([&, t] {
      for (long i = t; i < n; i += threads) report(engine, t, i / threads);
    });
  }
  for (auto& w : workers) w.join();
}

std::string webhook(const std::string& url) {
  const char* sections = std::getenv("BENCH_SECTIONS") ? std::getenv("BENCH_SECTIONS") : "reported";
  return std::string(R"({"sections":")") + sections + R"(","target":{"type":"webhook","url":")" + url + R"("},"maxAttempts":1000})";
}

bool wait_for(const std::function<bool()>& done, double seconds) {
  auto deadline = Clock::now() + std::chrono::duration<double>(seconds);
  while (!done()) {
    if (Clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return true;
}

double cpu_seconds() {
  rusage u{};
  ::getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) + (u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}

long rss_kib() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::stol(line.substr(6));
  }
  return -1;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[static_cast<std::size_t>(p * static_cast<double>(v.size() - 1))];
}

}  // namespace

int main(int argc, char** argv) {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  double seconds = 5;
  int threads = 16;
  long backlog = 1'000'000;
  int rounds = 3;
  std::filesystem::path dir = std::filesystem::temp_directory_path() / "bench_notify";
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--seconds")) seconds = std::stod(argv[i + 1]);
    if (!std::strcmp(argv[i], "--threads")) threads = std::stoi(argv[i + 1]);
    if (!std::strcmp(argv[i], "--backlog")) backlog = std::stol(argv[i + 1]);
    if (!std::strcmp(argv[i], "--rounds")) rounds = std::stoi(argv[i + 1]);
    if (!std::strcmp(argv[i], "--dir")) dir = argv[i + 1];
  }
  notify::DispatcherOptions options;
  if (const char* c = std::getenv("BENCH_CONCURRENCY")) options.concurrency = std::stoul(c);
  if (const char* n = std::getenv("BENCH_NICE")) options.nice = std::stoi(n);
  const int registrations = std::getenv("BENCH_REGISTRATIONS") ? std::stoi(std::getenv("BENCH_REGISTRATIONS")) : 3;
  Receiver receiver;

  const char* only = std::getenv("BENCH_ONLY");  // run one scenario: "writes", "drain", "latency" or "memory"
  auto runs = [&](const char* scenario) { return !only || std::strcmp(only, scenario) == 0; };
  // 1. Durable writes with no registration and with three, alternating `rounds` times (the
  //    machine is shared and noisy); medians compared.
  std::printf("| scenario | result |\n|---|---|\n");
  struct Phase {
    std::vector<double> rate, delivered, cpu;
  } phases[2];
  for (int round = 0; runs("writes") && round < rounds; ++round) {
    for (int with : {0, 1}) {
      std::filesystem::remove_all(dir);
      std::filesystem::create_directories(dir);
      auto store = open_store(dir, std::getenv("BENCH_NONDURABLE") == nullptr);
      ds::Engine engine(*store);
      notify::Dispatcher dispatcher(engine, *store, options);
      for (int r = 0; with && r < registrations; ++r) dispatcher.put("r" + std::to_string(r), webhook(receiver.url()));
      receiver.received = 0;
      const double cpu = cpu_seconds();
      phases[with].rate.push_back(write_for(engine, threads, seconds));
      phases[with].cpu.push_back((cpu_seconds() - cpu) / seconds);
      phases[with].delivered.push_back(static_cast<double>(receiver.received.load()) / seconds);
    }
  }
  const double none = median(phases[0].rate), registered = median(phases[1].rate);
  if (runs("writes")) {
  std::printf("| durable writes/s, %d writers, no registration (median of %d) | %.0f |\n", threads, rounds, none);
  std::printf("| durable writes/s, %d webhook registrations (median of %d) | %.0f |\n", registrations, rounds, registered);
  std::vector<double> ratios;  // per round: the two runs of a round are neighbours in time
  for (int round = 0; round < rounds; ++round) ratios.push_back(phases[1].rate[round] / phases[0].rate[round]);
  std::printf("| ratio %d registrations / none: median of the rounds' ratios (min, max) | %.2f (%.2f, %.2f) |\n", registrations,
              median(ratios), *std::min_element(ratios.begin(), ratios.end()), *std::max_element(ratios.begin(), ratios.end()));
  std::printf("| events delivered/s meanwhile (%d registrations together) | %.0f |\n", registrations, median(phases[1].delivered));
  std::printf("| CPU used, cores of %u: none / %d registrations | %.2f / %.2f |\n", std::thread::hardware_concurrency(), registrations,
              median(phases[0].cpu), median(phases[1].cpu));
  }

  // 2. Drain a backlog written while no dispatcher ran.
  const long drain = std::min<long>(backlog, 200'000);
  if (runs("drain")) {
    std::filesystem::remove_all(dir);
    std::filesystem::create_directories(dir);
    auto store = open_store(dir, false);
    ds::Engine engine(*store);
    { notify::Dispatcher(engine, *store, options).put("drain", webhook(receiver.url())); }
    fill(engine, drain, 16);
    receiver.received = 0;
    auto start = Clock::now();
    const double cpu = cpu_seconds();
    notify::Dispatcher dispatcher(engine, *store, options);
    wait_for([&] { return receiver.received.load() >= static_cast<std::uint64_t>(drain); }, 600);
    const double events = static_cast<double>(receiver.received.load());
    const double rate = events / std::chrono::duration<double>(Clock::now() - start).count();
    std::printf("| backlog of %ld drained by one registration, events/s | %.0f |\n", drain, rate);
    std::printf("| CPU per event drained (reading the feed, delivering, the receiver), µs | %.1f |\n", (cpu_seconds() - cpu) / events * 1e6);
  }

  // 3. Latency at 1000 writes/s.
  if (runs("latency")) {
    std::filesystem::remove_all(dir);
    std::filesystem::create_directories(dir);
    auto store = open_store(dir, true);
    ds::Engine engine(*store);
    notify::Dispatcher dispatcher(engine, *store, options);
    dispatcher.put("latency", webhook(receiver.url()));
    receiver.measure = true;
    receiver.received = 0;
    const long n = static_cast<long>(1000 * seconds);
    auto start = Clock::now();
    for (long i = 0; i < n; ++i) {
      std::this_thread::sleep_until(start + std::chrono::microseconds(1000 * i));
      report(engine, 0, i);
    }
    wait_for([&] { return receiver.received.load() >= static_cast<std::uint64_t>(n); }, 60);
    receiver.measure = false;
    auto lat = receiver.latencies_ms();
    std::printf("| latency write → receipt at 1000 writes/s, p50 / p99 ms | %.2f / %.2f |\n", percentile(lat, 0.5),
                percentile(lat, 0.99));
  }

  // 4. Memory with a large backlog while the target is down.
  if (runs("memory")) {
    std::filesystem::remove_all(dir);
    std::filesystem::create_directories(dir);
    auto store = open_store(dir, false);
    ds::Engine engine(*store);
    { notify::Dispatcher(engine, *store, options).put("down", webhook(receiver.url())); }
    fill(engine, backlog, 16);
    receiver.status = 503;
    const long before = rss_kib();
    notify::Dispatcher dispatcher(engine, *store, options);
    std::this_thread::sleep_for(std::chrono::seconds(10));
    const long after = rss_kib();
    auto st = *dispatcher.status("down");
    std::printf("| %ld undelivered events, target down: RSS before / after the dispatcher started, MiB | %.1f / %.1f |\n",
                backlog, before / 1024.0, after / 1024.0);
    std::printf("| … pending, failed attempts after 10 s | %llu, %llu |\n", static_cast<unsigned long long>(st.pending),
                static_cast<unsigned long long>(st.failed));
    receiver.status = 204;
  }
  std::filesystem::remove_all(dir);
  return 0;
}
