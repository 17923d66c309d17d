// Child process of the crash test: writes reports through the engine on a SQLite store from
// four threads, with the change feed on, and prints "key\n" for every acknowledged write, until
// it is killed.
// Usage: crash_writer DB_PATH FIRST_KEY
#include "deviceshadow/engine.hpp"
#include "deviceshadow/sqlite_store.hpp"

#include <unistd.h>

#include <atomic>
#include <string>
#include <thread>
#include <vector>

int main(int argc, char** argv) {
  if (argc != 3) return 2;
  deviceshadow::SqliteOptions options;
  options.path = argv[1];
  auto store = deviceshadow::open_sqlite_store(options);
  deviceshadow::Engine engine(*store);
  engine.set_change_feed(true);
  std::atomic<long> next{std::stol(argv[2])};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (;;) {
        long n = next++;
        deviceshadow::UpdateRequest r;
        r.key = {"crash-" + std::to_string(n % 7), "main"};
        r.state["k" + std::to_string(n)] = n;
        engine.update(r);
        std::string line = std::to_string(n) + "\n";
        if (write(STDOUT_FILENO, line.data(), line.size()) < 0) return;  // one write(2): never interleaved
      }
    });
  }
  for (auto& t : threads) t.join();
}
