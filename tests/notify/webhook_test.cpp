// The webhook target against a real HTTP receiver (the project's own transport, in process).
#include "notify/event.hpp"
#include "notify/target.hpp"
#include "server/http.hpp"
#include "support/http_receiver.hpp"

#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

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

// A receiver that answers each request as if keeping the connection alive, then closes it: the
// target's idle connection is closed under it between deliveries.
class ClosingReceiver {
 public:
  ClosingReceiver() {
    listener_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ::bind(listener_, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
    ::listen(listener_, 8);
    socklen_t len = sizeof addr;
    ::getsockname(listener_, reinterpret_cast<sockaddr*>(&addr), &len);
    port_ = ntohs(addr.sin_port);
    thread_ = std::thread([this] {
      for (int c; (c = ::accept(listener_, nullptr, nullptr)) >= 0;) {
        std::string request;
        char chunk[4096];
        for (ssize_t got; request.find("\r\n\r\n{}") == std::string::npos && (got = ::read(c, chunk, sizeof chunk)) > 0;) {
          request.append(chunk, static_cast<std::size_t>(got));
        }
        const std::string reply = "HTTP/1.1 204 No Content\r\nContent-Length: 0\r\n\r\n";
        [[maybe_unused]] const auto put = ::write(c, reply.data(), reply.size());
        ::close(c);
        ++answered;
      }
    });
  }
  ~ClosingReceiver() {
    ::shutdown(listener_, SHUT_RDWR);
    thread_.join();
    ::close(listener_);
  }
  std::string url(const std::string& host) const { return "http://" + host + ":" + std::to_string(port_) + "/hook"; }
  std::atomic<int> answered{0};

 private:
  int listener_ = -1;
  int port_ = 0;
  std::thread thread_;
};

// A cached connection the receiver closed wakes the target once (it stops watching it), not at
// every run(); the next delivery opens a new connection. Also through a host name, which
// libcurl resolves on sockets of its own.
TEST(Webhook, AnIdleConnectionClosedByTheReceiverNeitherSpinsNorFailsTheNextDelivery) {
  ClosingReceiver receiver;
  for (const std::string host : {"127.0.0.1", "localhost"}) {
    auto target = notify::make_webhook_target({receiver.url(host), "", {}, std::chrono::milliseconds(5000)});
    for (int i = 0; i < 3; ++i) {
      EXPECT_EQ(notify::deliver_now(*target, delivery("{}")).outcome, Outcome::delivered) << host << " " << i;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));  // the receiver has closed the connection
      const auto started = std::chrono::steady_clock::now();
      for (int wait = 0; wait < 4; ++wait) target->run(std::chrono::milliseconds(50), [](std::uint64_t, notify::DeliveryResult) {});
      EXPECT_GE(std::chrono::steady_clock::now() - started, std::chrono::milliseconds(150)) << host;  // one early return at most
    }
  }
  EXPECT_EQ(receiver.answered, 6);
}

}  // namespace
