// The SQS and SNS targets against moto_server (scripts/with-services.sh starts it and sets
// DS_MOTO_ENDPOINT); queues are made and read back with the project's AWS JSON client.
#include "aws/client.hpp"
#include "aws/credentials.hpp"
#include "deviceshadow/json.hpp"
#include "notify/target.hpp"
#include "notify/targets/aws_target.hpp"

#include <gtest/gtest.h>

#include <cstdlib>
#include <map>
#include <optional>
#include <random>
#include <set>

namespace notify = deviceshadow::notify;
namespace aws = deviceshadow::aws;
namespace json = boost::json;
using Outcome = notify::DeliveryResult::Outcome;

namespace {

std::string moto_endpoint() {
  const char* e = std::getenv("DS_MOTO_ENDPOINT");
  return e ? e : "";
}

#define REQUIRE_MOTO()                                                                      \
  do {                                                                                      \
    if (moto_endpoint().empty()) {                                                          \
      if (std::getenv("DS_REQUIRE_MOTO")) FAIL() << "DS_REQUIRE_MOTO is set without DS_MOTO_ENDPOINT"; \
      GTEST_SKIP() << "moto_server is not running (scripts/with-services.sh starts it)";  \
    }                                                                                       \
  } while (0)

class Sqs {
 public:
  Sqs()
      : client_({.endpoint = moto_endpoint(), .region = "us-east-1", .service = "sqs", .target_prefix = "AmazonSQS."},
                aws::load_credentials()) {}

  // A new queue named `name` with a random part (before a ".fifo" suffix), so that runs on one
  // moto_server do not meet.
  std::string create(std::string name, std::map<std::string, std::string> attributes = {}) {
    const std::size_t dot = name.find(".fifo");
    name.insert(dot == std::string::npos ? name.size() : dot, "-" + std::to_string(std::random_device{}()));
    json::object body{{"QueueName", name}};
    json::object a;
    for (const auto& [k, v] : attributes) a[k] = v;
    if (!a.empty()) body["Attributes"] = std::move(a);
    return std::string(client_.call("CreateQueue", deviceshadow::to_json(body), true).at("QueueUrl").as_string());
  }

  // Every message now in the queue (visible ones), with attributes.
  std::vector<json::object> receive_all(const std::string& url, std::size_t expected) {
    std::vector<json::object> messages;
    for (int round = 0; round < 20 && messages.size() < expected; ++round) {
      json::object body{{"QueueUrl", url}, {"MaxNumberOfMessages", 10}, {"MessageAttributeNames", json::array{"All"}},
                        {"AttributeNames", json::array{"All"}}, {"WaitTimeSeconds", 1}};
      json::value answer = client_.call("ReceiveMessage", deviceshadow::to_json(body), true);
      if (const json::value* m = answer.as_object().if_contains("Messages")) {
        for (const json::value& one : m->as_array()) messages.push_back(one.as_object());
      }
    }
    return messages;
  }

 private:
  aws::JsonClient client_;
};

std::string attribute(const json::object& message, const char* name) {
  return std::string(message.at("MessageAttributes").at(name).at("StringValue").as_string());
}

// Starts every delivery, then runs the target until each has an outcome.
std::vector<notify::DeliveryResult> deliver_all(notify::Target& target, const std::vector<notify::Delivery>& deliveries) {
  std::vector<std::optional<notify::DeliveryResult>> results(deliveries.size());
  for (std::size_t i = 0; i < deliveries.size(); ++i) target.start(i, deliveries[i]);
  std::size_t left = deliveries.size();
  for (int round = 0; round < 600 && left > 0; ++round) {
    target.run(std::chrono::milliseconds(100), [&](std::uint64_t tag, notify::DeliveryResult r) {
      EXPECT_FALSE(results.at(tag).has_value()) << "outcome reported twice";
      results.at(tag) = std::move(r);
      --left;
    });
  }
  std::vector<notify::DeliveryResult> out;
  for (auto& r : results) out.push_back(r.value_or(notify::DeliveryResult{Outcome::retry, "no outcome"}));
  return out;
}

TEST(FifoId, KeepsShortPrintableIdsAndHashesTheOthers) {
  EXPECT_EQ(notify::aws_target::fifo_id("t1#main"), "t1#main");
  EXPECT_EQ(notify::aws_target::fifo_id(std::string(128, 'a')), std::string(128, 'a'));
  EXPECT_EQ(notify::aws_target::fifo_id(std::string(129, 'a')), aws::hex_sha256(std::string(129, 'a')));
  EXPECT_EQ(notify::aws_target::fifo_id("My House#main"), aws::hex_sha256("My House#main"));
  EXPECT_EQ(notify::aws_target::fifo_id("Zürich#main").size(), 64u);
}

// Expired temporary credentials are a failure a later attempt passes (they are read again).
TEST(AwsTarget, ExpiredCredentialsAreRetriedAndAccessDeniedIsNot) {
  for (const char* code : {"ExpiredToken", "ExpiredTokenException", "RequestExpired", "ThrottlingException"}) {
    EXPECT_TRUE(notify::aws_target::retryable_error_code(code)) << code;
  }
  for (const char* code : {"AccessDenied", "AWS.SimpleQueueService.NonExistentQueue", "InvalidClientTokenId"}) {
    EXPECT_FALSE(notify::aws_target::retryable_error_code(code)) << code;
  }
}

TEST(SqsTarget, SendsABatchWithAttributes) {
  REQUIRE_MOTO();
  Sqs sqs;
  const std::string url = sqs.create("notify-plain");
  auto target = notify::make_sqs_target({url, "", moto_endpoint()});
  std::vector<std::string> bodies;
  for (int i = 0; i < 12; ++i) bodies.push_back(R"({"n":)" + std::to_string(i) + "}");
  std::vector<std::string> ids;
  for (int i = 0; i < 12; ++i) ids.push_back("id-" + std::to_string(i));
  std::vector<notify::Delivery> deliveries;
  for (int i = 0; i < 12; ++i) deliveries.push_back({ids[i], "deviceshadow.shadow.updated", "My House", "main", bodies[i]});
  for (const auto& r : deliver_all(*target, deliveries)) EXPECT_EQ(r.outcome, Outcome::delivered) << r.error;
  auto messages = sqs.receive_all(url, 12);
  ASSERT_EQ(messages.size(), 12u);
  std::set<std::string> received;
  for (const auto& m : messages) {
    received.insert(std::string(m.at("Body").as_string()));
    EXPECT_EQ(attribute(m, "thing"), "My House");
    EXPECT_EQ(attribute(m, "name"), "main");
    EXPECT_EQ(attribute(m, "type"), "deviceshadow.shadow.updated");
  }
  EXPECT_EQ(received, std::set<std::string>(bodies.begin(), bodies.end()));
}

TEST(SqsTarget, FifoQueueGroupsByShadowAndDeduplicatesById) {
  REQUIRE_MOTO();
  Sqs sqs;
  const std::string url = sqs.create("notify-order.fifo", {{"FifoQueue", "true"}});
  auto target = notify::make_sqs_target({url, "us-east-1", moto_endpoint()});
  const std::string long_id(200, 'x');
  std::vector<notify::Delivery> deliveries = {
      {"e1", "deviceshadow.shadow.updated", "t1", "main", "{\"v\":1}"},
      {long_id, "deviceshadow.shadow.deleted", "My House", "climate", "{\"v\":2}"},
      {"e1", "deviceshadow.shadow.updated", "t1", "main", "{\"v\":1}"},  // a redelivery: deduplicated
  };
  for (const auto& r : deliver_all(*target, deliveries)) EXPECT_EQ(r.outcome, Outcome::delivered) << r.error;
  auto messages = sqs.receive_all(url, 2);
  ASSERT_EQ(messages.size(), 2u);
  std::map<std::string, std::pair<std::string, std::string>> ids;  // body → group, dedup
  for (const auto& m : messages) {
    const json::object& a = m.at("Attributes").as_object();
    ids[std::string(m.at("Body").as_string())] = {std::string(a.at("MessageGroupId").as_string()),
                                                  std::string(a.at("MessageDeduplicationId").as_string())};
  }
  EXPECT_EQ(ids["{\"v\":1}"], (std::pair<std::string, std::string>("t1#main", "e1")));
  const std::pair<std::string, std::string> hashed(aws::hex_sha256("My House#climate"), aws::hex_sha256(long_id));
  EXPECT_EQ(ids["{\"v\":2}"], hashed);
}

// The queue's MaximumMessageSize is read by the first call (never by the thread that builds
// events); an event built larger than it before it was known is handed back to be built again.
TEST(SqsTarget, ReadsTheQueuesMaximumMessageSize) {
  REQUIRE_MOTO();
  Sqs sqs;
  auto small = notify::make_sqs_target({sqs.create("notify-small", {{"MaximumMessageSize", "4096"}}), "", moto_endpoint()});
  EXPECT_EQ(small->max_event_bytes(), 256u * 1024 - 1024) << "not known before the first call";
  const std::string big(5000, 'x');
  auto r = notify::deliver_now(*small, {"e1", "deviceshadow.shadow.updated", "t", "main", big});
  EXPECT_EQ(r.outcome, Outcome::rebuild) << r.error;
  EXPECT_EQ(small->max_event_bytes(), 4096u - 1024u);
  EXPECT_EQ(notify::deliver_now(*small, {"e1", "deviceshadow.shadow.updated", "t", "main", "{}"}).outcome, Outcome::delivered);
  auto unknown = notify::make_sqs_target({moto_endpoint() + "/123456789012/no-such-queue", "", moto_endpoint()});
  notify::deliver_now(*unknown, {"e2", "deviceshadow.shadow.updated", "t", "main", "{}"});
  EXPECT_EQ(unknown->max_event_bytes(), 256u * 1024 - 1024);
}

TEST(SqsTarget, AMissingQueueIsRejected) {
  REQUIRE_MOTO();
  auto target = notify::make_sqs_target({moto_endpoint() + "/123456789012/no-such-queue", "", moto_endpoint()});
  auto r = notify::deliver_now(*target, {"e1", "deviceshadow.shadow.updated", "t", "main", "{}"});
  EXPECT_EQ(r.outcome, Outcome::reject);
  EXPECT_NE(r.error.find("QueueDoesNotExist"), std::string::npos) << r.error;
}

TEST(SqsTarget, AnUnreachableEndpointIsRetried) {
  auto target = notify::make_sqs_target({"http://127.0.0.1:9/123456789012/q", "us-east-1", ""});
  auto r = notify::deliver_now(*target, {"e1", "deviceshadow.shadow.updated", "t", "main", "{}"});
  EXPECT_EQ(r.outcome, Outcome::retry);
  EXPECT_NE(r.error.find("sqs:"), std::string::npos) << r.error;
}

TEST(SnsTarget, AMissingTopicIsRejected) {
  REQUIRE_MOTO();
  auto target = notify::make_sns_target({"arn:aws:sns:us-east-1:123456789012:no-such-topic", "", moto_endpoint()});
  auto r = notify::deliver_now(*target, {"e1", "deviceshadow.shadow.updated", "t", "main", "{}"});
  EXPECT_EQ(r.outcome, Outcome::reject) << r.error;
}

TEST(SnsTarget, AnUnreachableEndpointIsRetried) {
  auto target = notify::make_sns_target({"arn:aws:sns:us-east-1:123456789012:t", "", "http://127.0.0.1:9"});
  auto r = notify::deliver_now(*target, {"e1", "deviceshadow.shadow.updated", "t", "main", "{}"});
  EXPECT_EQ(r.outcome, Outcome::retry);
}

}  // namespace
