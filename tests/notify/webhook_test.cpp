// The webhook target against a real HTTP receiver (the project's own transport, in process).
#include "notify/event.hpp"
#include "notify/target.hpp"
#include "server/http.hpp"
#include "support/http_receiver.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <mutex>
#include <thread>

namespace notify = deviceshadow::notify;
namespace srv = deviceshadow::server;
using Outcome = notify::DeliveryResult::Outcome;

namespace {

// A receiver that records every request and answers with `status` after `delay`.
class Receiver {
 public:
  std::string url(const std::string& path = "/hook") const { return http_.url(path); }
  std::vector<srv::HttpRequest> requests() { return http_.requests(); }
  static std::string header(const srv::HttpRequest& r, std::string_view name) { return HttpReceiver::header(r, name); }
  std::atomic<int> status{200};
  std::atomic<int> delay_ms{0};

 private:
  HttpReceiver http_{[this](const srv::HttpRequest&) {
    if (delay_ms) std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms.load()));
    return srv::HttpResponse{status.load(), "text/plain", "receiver says " + std::to_string(status.load()), {}};
  }};  // last: stopped before the members its handler reads are gone
};

notify::Delivery delivery(std::string_view body) { return {"id-1", "deviceshadow.shadow.updated", "t", "main", body}; }

TEST(Webhook, PostsTheEventSignedWithTheRegistrationsHeaders) {
  Receiver receiver;
  notify::WebhookTarget config{receiver.url(), "whsec", {{"X-Team", "ops"}}, std::chrono::milliseconds(5000)};
  auto target = notify::make_webhook_target(config);
  const std::string body = R"({"specversion":"1.0","id":"id-1"})";
  for (int i = 0; i < 3; ++i) EXPECT_EQ(notify::deliver_now(*target, delivery(body)).outcome, Outcome::delivered);
  const auto requests = receiver.requests();
  ASSERT_EQ(requests.size(), 3u);
  const srv::HttpRequest& r = requests[0];
  EXPECT_EQ(r.method, "POST");
  EXPECT_EQ(r.target, "/hook");
  EXPECT_EQ(r.body, body);
  EXPECT_EQ(Receiver::header(r, "Content-Type"), "application/cloudevents+json");
  EXPECT_EQ(Receiver::header(r, "X-Team"), "ops");
  const std::string signature = Receiver::header(r, "X-Shadow-Signature");
  ASSERT_EQ(signature.rfind("t=", 0), 0u) << signature;
  const std::int64_t t = std::stoll(signature.substr(2, signature.find(',') - 2));
  EXPECT_EQ(signature, notify::webhook_signature("whsec", t, body));
  EXPECT_NEAR(static_cast<double>(t), static_cast<double>(std::time(nullptr)), 60);
}

TEST(Webhook, WithoutASecretThereIsNoSignature) {
  Receiver receiver;
  auto target = notify::make_webhook_target({receiver.url(), "", {}, std::chrono::milliseconds(5000)});
  EXPECT_EQ(notify::deliver_now(*target, delivery("{}")).outcome, Outcome::delivered);
  EXPECT_EQ(Receiver::header(receiver.requests().at(0), "X-Shadow-Signature"), "(none)");
}

TEST(Webhook, StatusClassesDecideRetryOrReject) {
  Receiver receiver;
  auto target = notify::make_webhook_target({receiver.url(), "", {}, std::chrono::milliseconds(5000)});
  const std::vector<std::pair<int, Outcome>> cases = {
      {200, Outcome::delivered}, {204, Outcome::delivered}, {299, Outcome::delivered},
      {408, Outcome::retry},     {429, Outcome::retry},     {500, Outcome::retry},   {503, Outcome::retry},
      {400, Outcome::reject},    {401, Outcome::reject},    {404, Outcome::reject},  {410, Outcome::reject},
      {301, Outcome::reject},    {302, Outcome::reject},
  };
  for (const auto& [status, outcome] : cases) {
    receiver.status = status;
    notify::DeliveryResult result = notify::deliver_now(*target, delivery("{}"));
    EXPECT_EQ(result.outcome, outcome) << status;
    if (outcome != Outcome::delivered) {
      EXPECT_NE(result.error.find("HTTP " + std::to_string(status)), std::string::npos) << result.error;
    }
  }
  EXPECT_EQ(receiver.requests().size(), cases.size());  // a 3xx is not followed
}

TEST(Webhook, ARefusedConnectionOrATimeoutIsRetried) {
  std::string closed_url;
  {
    Receiver gone;
    closed_url = gone.url();
  }
  auto refused = notify::make_webhook_target({closed_url, "", {}, std::chrono::milliseconds(2000)});
  notify::DeliveryResult r = notify::deliver_now(*refused, delivery("{}"));
  EXPECT_EQ(r.outcome, Outcome::retry);
  EXPECT_FALSE(r.error.empty());

  Receiver slow;
  slow.delay_ms = 1500;
  auto target = notify::make_webhook_target({slow.url(), "", {}, std::chrono::milliseconds(200)});
  r = notify::deliver_now(*target, delivery("{}"));
  EXPECT_EQ(r.outcome, Outcome::retry);
  EXPECT_NE(r.error.find("imeout"), std::string::npos) << r.error;
  slow.delay_ms = 0;
  EXPECT_EQ(notify::deliver_now(*target, delivery("{}")).outcome, Outcome::delivered);  // a new connection after the broken one
}

}  // namespace
