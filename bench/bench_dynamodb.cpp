// DynamoDB write throughput against one endpoint (DynamoDB Local in this repo), N client
// threads on distinct items, 64 per thread, created before the timed run. Prints
// "WORKLOAD WRITES_PER_SECOND" per workload:
//   put                    raw conditional PutItem from a minimal keep-alive client (the baseline)
//   transact               raw TransactWriteItems: the conditional Put plus a history Put
//   engine:LAYOUT:HISTORY  engine reports through the DynamoDB store, e.g. engine:combined:off;
//                          HISTORY "feed" is a report of --history stream: no history item, the
//                          change feed on (the item carries its event)
//   bench_dynamodb ENDPOINT SECONDS THREADS WORKLOAD...
// With BENCH_STREAM=1 the table has a stream (nobody reads it) and workloads print as WORKLOAD-stream.
#include "aws/client.hpp"
#include "deviceshadow/dynamodb_store.hpp"
#include "deviceshadow/engine.hpp"
#include "deviceshadow/error.hpp"
#include "per_second.hpp"

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

namespace ds = deviceshadow;

namespace {

constexpr int kItemsPerThread = 64;

// Runs op once on every item (threads in parallel): creates them, so timing sees steady state.
template <class F>
void each_item_once(int threads, F&& op) {
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t) {
    workers.emplace_back([&, t] {
      for (long i = 0; i < kItemsPerThread; ++i) op(t, i);
    });
  }
  for (auto& w : workers) w.join();
}

// The condition members of a conditional write at version v (0: the item must not exist).
std::string condition_json(long v) {
  return v == 0 ? R"x("ConditionExpression":"attribute_not_exists(PK)")x"
                : R"("ConditionExpression":"version = :v","ExpressionAttributeValues":{":v":{"N":")" + std::to_string(v) + "\"}}";
}

// Raw writes of `body(key, version, i)` to distinct items, each conditional on its version;
// the items are created before the timed run.
template <class Body>
double raw(ds::aws::JsonClient& client, const char* operation, int threads, double seconds, Body body) {
  const std::string run = std::to_string(std::chrono::steady_clock::now().time_since_epoch().count());
  std::vector<long> versions(static_cast<std::size_t>(threads) * kItemsPerThread, 0);
  auto write = [&](int t, long i) {
    long& v = versions[static_cast<std::size_t>(t * kItemsPerThread + i % kItemsPerThread)];
    client.call(operation, body(run + "-" + std::to_string(t) + "-" + std::to_string(i % kItemsPerThread), v, i), false);
    ++v;
  };
  each_item_once(threads, write);
  return per_second(threads, seconds, write);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 5) {
    std::fprintf(stderr, "usage: bench_dynamodb ENDPOINT SECONDS THREADS WORKLOAD...\n");
    return 2;
  }
  ds::DynamoDbOptions o;
  o.endpoint = argv[1];
  o.region = "us-east-1";
  o.table = "bench" + std::to_string(std::chrono::steady_clock::now().time_since_epoch().count());
  const double seconds = std::stod(argv[2]);
  const int threads = std::stoi(argv[3]);
  // Streams make DynamoDB Local decay over time: only BENCH_STREAM=1 asks for one (the baseline
  // of writes to a table whose stream is read).
  const bool stream = std::getenv("BENCH_STREAM") != nullptr;
  ds::create_dynamodb_table(o, stream);

  ds::aws::ClientOptions c;
  c.endpoint = o.endpoint;
  c.region = o.region;
  ds::aws::JsonClient client(c, {"local", "local", ""});
  const std::string table = o.table;
  for (int a = 4; a < argc; ++a) {
    const std::string workload = argv[a];
    double rate = 0;
    if (workload == "put") {
      rate = raw(client, "PutItem", threads, seconds, [&](const std::string& key, long v, long i) {
        return R"({"TableName":")" + table + R"(","Item":{"PK":{"S":"raw-)" + key + R"("},"SK":{"S":"DSR#main"},"version":{"N":")" +
               std::to_string(v + 1) + R"("},"state":{"M":{"temp":{"M":{"value":{"N":"21.5"},"ts":{"N":")" + std::to_string(i) +
               R"("}}}}}},)" + condition_json(v) + "}";
      });
    } else if (workload == "transact") {
      rate = raw(client, "TransactWriteItems", threads, seconds, [&](const std::string& key, long v, long i) {
        return R"({"TransactItems":[{"Put":{"TableName":")" + table + R"(","Item":{"PK":{"S":"tx-)" + key +
               R"("},"SK":{"S":"DSR#main"},"version":{"N":")" + std::to_string(v + 1) +
               R"("},"state":{"M":{"temp":{"M":{"value":{"N":"21.5"},"ts":{"N":")" + std::to_string(i) + R"("}}}}}},)" +
               condition_json(v) + R"(}},{"Put":{"TableName":")" + table + R"(","Item":{"PK":{"S":"DH#tx-)" + key +
               R"("},"SK":{"S":")" + std::to_string(v) + R"("},"event":{"S":"{}"}}}}]})";
      });
    } else if (workload.rfind("engine:", 0) == 0) {
      ds::DynamoDbOptions eo = o;
      eo.layout = workload.find(":combined:") != std::string::npos ? ds::DynamoDbLayout::combined : ds::DynamoDbLayout::separate;
      auto store = ds::open_dynamodb_store(eo);
      ds::EngineOptions options;
      const std::string history = workload.substr(workload.rfind(':') + 1);
      options.history = history == "on";
      ds::Engine engine(*store, options);
      engine.set_change_feed(history == "feed");
      const std::string run = std::to_string(a);
      auto report = [&](int t, long i, long ts) {
        ds::UpdateRequest r;
        r.key = {"dev-" + run + "-" + std::to_string(t) + "-" + std::to_string(i % kItemsPerThread), "main"};
        r.state["temp"] = boost::json::object{{"value", 21.5}, {"ts", ts}};
        engine.update(r);
      };
      each_item_once(threads, [&](int t, long i) { report(t, i, 0); });
      rate = per_second(threads, seconds, [&](int t, long i) { report(t, i, i + 1); });
    } else {
      std::fprintf(stderr, "unknown workload %s\n", workload.c_str());
      return 2;
    }
    std::printf("%s%s %.0f\n", workload.c_str(), stream ? "-stream" : "", rate);
    std::fflush(stdout);
  }
  ds::delete_dynamodb_table(o);
}
