// DynamoDB throughput in one run against the same endpoint (DynamoDB Local in this repo):
// raw conditional PutItem/s from a minimal keep-alive client (the baseline), then engine
// reports/s through the DynamoDB store, each with N threads on distinct items/shadows.
//   bench_dynamodb ENDPOINT [seconds] [threads] [history on|off]
#include "aws/client.hpp"
#include "deviceshadow/dynamodb_store.hpp"
#include "deviceshadow/engine.hpp"
#include "deviceshadow/error.hpp"

#include <atomic>
#include <chrono>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

namespace ds = deviceshadow;

template <class F>
double per_second(int threads, double seconds, F&& op) {
  std::atomic<bool> stop{false};
  std::atomic<long> done{0};
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t) {
    workers.emplace_back([&, t] {
      for (long i = 0; !stop; ++i) {
        op(t, i);
        ++done;
      }
    });
  }
  std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
  stop = true;
  for (auto& w : workers) w.join();
  return static_cast<double>(done) / seconds;
}

// The condition members of a conditional write at version v (0: the item must not exist).
std::string condition_json(long v) {
  return v == 0 ? R"x("ConditionExpression":"attribute_not_exists(PK)")x"
                : R"("ConditionExpression":"version = :v","ExpressionAttributeValues":{":v":{"N":")" + std::to_string(v) + "\"}}";
}

int main(int argc, char** argv) {
  if (argc < 2) return 2;
  ds::DynamoDbOptions o;
  o.endpoint = argv[1];
  o.region = "us-east-1";
  o.table = "bench" + std::to_string(std::chrono::steady_clock::now().time_since_epoch().count());
  double seconds = argc > 2 ? std::stod(argv[2]) : 5;
  int threads = argc > 3 ? std::stoi(argv[3]) : 8;
  bool history = argc > 4 ? std::string(argv[4]) != "off" : true;
  ds::create_dynamodb_table(o, /*with_stream=*/false);  // streams make DynamoDB Local decay over time

  ds::aws::ClientOptions c;
  c.endpoint = o.endpoint;
  c.region = o.region;
  ds::aws::JsonClient client(c, {"local", "local", ""});
  std::vector<long> versions(static_cast<std::size_t>(threads) * 64, 0);
  double raw = per_second(threads, seconds, [&](int t, long i) {
    long& v = versions[static_cast<std::size_t>(t * 64 + i % 64)];
    std::string key = "raw-" + std::to_string(t) + "-" + std::to_string(i % 64);
    std::string condition = condition_json(v);
    std::string body = R"({"TableName":")" + o.table + R"(","Item":{"PK":{"S":")" + key + R"("},"SK":{"S":"DSR#main"},"version":{"N":")" +
                       std::to_string(v + 1) + R"("},"state":{"M":{"temp":{"M":{"value":{"N":"21.5"},"ts":{"N":")" + std::to_string(i) +
                       R"("}}}}}},)" + condition + "}";
    client.call("PutItem", body, false);
    ++v;
  });

  // The same write plus a history item in one transaction, raw: what the design costs at least.
  std::vector<long> tx_versions(static_cast<std::size_t>(threads) * 64, 0);
  double raw_tx = per_second(threads, seconds, [&](int t, long i) {
    long& v = tx_versions[static_cast<std::size_t>(t * 64 + i % 64)];
    std::string key = "tx-" + std::to_string(t) + "-" + std::to_string(i % 64);
    std::string condition = condition_json(v);
    std::string body = R"({"TransactItems":[{"Put":{"TableName":")" + o.table + R"(","Item":{"PK":{"S":")" + key +
                       R"("},"SK":{"S":"DSR#main"},"version":{"N":")" + std::to_string(v + 1) + R"("},"state":{"M":{"temp":{"M":{"value":{"N":"21.5"}}}}}},)" +
                       condition + R"(}},{"Put":{"TableName":")" + o.table + R"(","Item":{"PK":{"S":"DH#)" + key + R"("},"SK":{"S":")" +
                       std::to_string(v) + R"("},"event":{"S":"{}"}}}}]})";
    client.call("TransactWriteItems", body, false);
    ++v;
  });

  auto store = ds::open_dynamodb_store(o);
  ds::EngineOptions options;
  options.history = history;
  ds::Engine engine(*store, options);
  double reports = per_second(threads, seconds, [&](int t, long i) {
    ds::UpdateRequest r;
    r.key = {"dev-" + std::to_string(t) + "-" + std::to_string(i % 64), "main"};
    r.state["temp"] = boost::json::object{{"value", 21.5}, {"ts", i}};
    engine.update(r);
  });
  ds::delete_dynamodb_table(o);
  std::printf("| raw conditional PutItem (baseline) | %.0f/s | 1.00 |\n", raw);
  std::printf("| raw TransactWriteItems: conditional Put + history Put | %.0f/s | %.2f |\n", raw_tx, raw_tx / raw);
  std::printf("| engine reports through the DynamoDB store, history %s | %.0f/s | %.2f |\n", history ? "on" : "off", reports,
              reports / raw);
}
