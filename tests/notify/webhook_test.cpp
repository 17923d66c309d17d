// The webhook target against real HTTP receivers (the project's own transport, in process, and
// raw sockets for answers it would not give), with each of its two clients; and the HTTP/1.x
// response reader of the plain one.
#include "notify/event.hpp"
#include "notify/target.hpp"
#include "notify/targets/http1.hpp"
#include "notify/targets/webhook.hpp"
#include "http/server.hpp"
#include "support/http_receiver.hpp"
#include "support/targets.hpp"

#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <mutex>
#include <thread>

namespace notify = deviceshadow::notify;
namespace srv = deviceshadow::http;
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

// Each test runs with each client: the plain one (http://) and libcurl (https://, proxies).
using Client = std::unique_ptr<notify::Target> (*)(const notify::WebhookTarget&);

class Webhook : public ::testing::TestWithParam<Client> {
 protected:
  std::unique_ptr<notify::Target> make(const notify::WebhookTarget& config) {
    auto target = GetParam()(config);
    if (!target) throw std::runtime_error("no client for " + config.url);
    return target;
  }
};

INSTANTIATE_TEST_SUITE_P(Clients, Webhook, ::testing::Values(&notify::make_plain_webhook, &notify::make_curl_webhook),
                         [](const auto& info) { return info.param == &notify::make_plain_webhook ? "plain" : "curl"; });

TEST_P(Webhook, PostsTheEventSignedWithTheRegistrationsHeaders) {
  Receiver receiver;
  notify::WebhookTarget config{receiver.url(), "whsec", {{"X-Team", "ops"}}, std::chrono::milliseconds(5000)};
  auto target = make(config);
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

TEST_P(Webhook, WithoutASecretThereIsNoSignature) {
  Receiver receiver;
  auto target = make({receiver.url(), "", {}, std::chrono::milliseconds(5000)});
  EXPECT_EQ(notify::deliver_now(*target, delivery("{}")).outcome, Outcome::delivered);
  EXPECT_EQ(Receiver::header(receiver.requests().at(0), "X-Shadow-Signature"), "(none)");
}

TEST_P(Webhook, StatusClassesDecideRetryOrReject) {
  Receiver receiver;
  auto target = make({receiver.url(), "", {}, std::chrono::milliseconds(5000)});
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

TEST_P(Webhook, ARefusedConnectionOrATimeoutIsRetried) {
  std::string closed_url;
  {
    Receiver gone;
    closed_url = gone.url();
  }
  auto refused = make({closed_url, "", {}, std::chrono::milliseconds(2000)});
  notify::DeliveryResult r = notify::deliver_now(*refused, delivery("{}"));
  EXPECT_EQ(r.outcome, Outcome::retry);
  EXPECT_FALSE(r.error.empty());

  Receiver slow;
  slow.delay_ms = 1500;
  auto target = make({slow.url(), "", {}, std::chrono::milliseconds(200)});
  r = notify::deliver_now(*target, delivery("{}"));
  EXPECT_EQ(r.outcome, Outcome::retry);
  EXPECT_NE(r.error.find("imeout"), std::string::npos) << r.error;
  slow.delay_ms = 0;
  EXPECT_EQ(notify::deliver_now(*target, delivery("{}")).outcome, Outcome::delivered);  // a new connection after the broken one
}

// A listening socket on a free port of 127.0.0.1.
int listen_on_loopback(int& port) {
  const int listener = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 || ::listen(listener, 8) != 0) {
    throw std::runtime_error("cannot listen on 127.0.0.1");
  }
  socklen_t len = sizeof addr;
  ::getsockname(listener, reinterpret_cast<sockaddr*>(&addr), &len);
  port = ntohs(addr.sin_port);
  return listener;
}

// A receiver that answers each request as if keeping the connection alive, then closes it: the
// target's idle connection is closed under it between deliveries.
class ClosingReceiver {
 public:
  ClosingReceiver() {
    listener_ = listen_on_loopback(port_);
    thread_ = std::thread([this] {
      for (int c; (c = ::accept(listener_, nullptr, nullptr)) >= 0;) {
        std::string request;
        char chunk[4096];
        for (ssize_t got; request.find("\r\n\r\n{}") == std::string::npos && (got = ::read(c, chunk, sizeof chunk)) > 0;) {
          request.append(chunk, static_cast<std::size_t>(got));
        }
        const std::string reply = "HTTP/1.1 204 No Content\r\nContent-Length: 0\r\n\r\n";
        ++answered;  // before the reply: the client may read `answered` as soon as the reply arrives
        [[maybe_unused]] const auto put = ::write(c, reply.data(), reply.size());
        ::close(c);
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
TEST_P(Webhook, AnIdleConnectionClosedByTheReceiverNeitherSpinsNorFailsTheNextDelivery) {
  ClosingReceiver receiver;
  for (const std::string host : {"127.0.0.1", "localhost"}) {
    auto target = make({receiver.url(host), "", {}, std::chrono::milliseconds(5000)});
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

// A receiver on raw sockets that answers the requests it reads, in order, with the bytes of a
// script: kClose closes the connection without an answer; an answer with "Connection: close",
// of HTTP/1.0 or without a length closes it after.
class ScriptedReceiver {
 public:
  static constexpr const char* kClose = "<close>";

  explicit ScriptedReceiver(std::vector<std::string> script) : script_(std::move(script)) {
    listener_ = listen_on_loopback(port_);
    thread_ = std::thread([this] {
      for (int c; (c = ::accept(listener_, nullptr, nullptr)) >= 0;) {
        ++connections;
        serve(c);
        ::close(c);
      }
    });
  }
  ~ScriptedReceiver() {
    ::shutdown(listener_, SHUT_RDWR);
    thread_.join();
    ::close(listener_);
  }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_) + "/hook?via=script"; }
  std::atomic<int> connections{0};
  std::vector<std::string> heads() {
    std::lock_guard lock(mutex_);
    return heads_;
  }

 private:
  // Serves one connection until an answer closes it, the client does, or the script ends.
  void serve(int c) {
    std::string in;
    char chunk[4096];
    for (;;) {
      std::size_t end;
      while ((end = in.find("\r\n\r\n")) == std::string::npos) {
        const ssize_t got = ::read(c, chunk, sizeof chunk);
        if (got <= 0) return;
        in.append(chunk, static_cast<std::size_t>(got));
      }
      const std::size_t at = in.find("Content-Length: ");
      const std::size_t length = at < end ? std::stoul(in.substr(at + 16)) : 0;
      while (in.size() < end + 4 + length) {
        const ssize_t got = ::read(c, chunk, sizeof chunk);
        if (got <= 0) return;
        in.append(chunk, static_cast<std::size_t>(got));
      }
      std::string answer;
      {
        std::lock_guard lock(mutex_);
        heads_.push_back(in.substr(0, end));
        if (next_ == script_.size()) return;
        answer = script_[next_++];
      }
      in.erase(0, end + 4 + length);
      if (answer == kClose) return;
      for (std::size_t sent = 0; sent < answer.size();) {  // in two writes: answers arrive in pieces too
        const std::size_t piece = sent == 0 ? answer.size() / 2 + 1 : answer.size() - sent;
        const ssize_t put = ::write(c, answer.data() + sent, piece);
        if (put <= 0) return;
        sent += static_cast<std::size_t>(put);
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
      }
      const bool framed = answer.find("ength: ") != std::string::npos || answer.find("chunked") != std::string::npos || answer.find(" 204 ") != std::string::npos;
      if (!framed || answer.find("Connection: close") != std::string::npos || answer.rfind("HTTP/1.0", 0) == 0) return;
    }
  }

  std::vector<std::string> script_;
  std::size_t next_ = 0;
  std::vector<std::string> heads_;
  std::mutex mutex_;
  int listener_ = -1;
  int port_ = 0;
  std::thread thread_;
};

TEST_P(Webhook, ReadsEveryFramingOfAnAnswerAndKeepsTheConnectionWhenItMay) {
  ScriptedReceiver receiver({
      "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n4;ext=1\r\nfine\r\n0\r\nX-Trailer: t\r\n\r\n",
      "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 204 No Content\r\n\r\n",
      "HTTP/1.1 503 Unavailable\r\nContent-Length: 15\r\n\r\nbusy\r\n  now  \x01\n",
      "HTTP/1.0 202 Accepted\r\nContent-Length: 0\r\n\r\n",  // 1.0: the connection ends
      "HTTP/1.1 500 Oops\r\nContent-Type: text/plain\r\n\r\ndown",  // until the close
      "HTTP/1.1 201 Created\r\ncontent-length: 2\r\nConnection: close\r\n\r\nok",
  });
  auto target = make({receiver.url(), "", {{"X-Team", "ops"}}, std::chrono::milliseconds(5000)});
  EXPECT_EQ(notify::deliver_now(*target, delivery("{}")).outcome, Outcome::delivered);
  EXPECT_EQ(notify::deliver_now(*target, delivery("{}")).outcome, Outcome::delivered);
  notify::DeliveryResult busy = notify::deliver_now(*target, delivery("{}"));
  EXPECT_EQ(busy.outcome, Outcome::retry);
  EXPECT_TRUE(busy.error.ends_with("HTTP 503: busy now  \\x01")) << busy.error;  // line breaks as spaces
  EXPECT_EQ(notify::deliver_now(*target, delivery("{}")).outcome, Outcome::delivered);
  notify::DeliveryResult down = notify::deliver_now(*target, delivery("{}"));
  EXPECT_EQ(down.outcome, Outcome::retry);
  EXPECT_NE(down.error.find("HTTP 500: down"), std::string::npos) << down.error;
  EXPECT_EQ(notify::deliver_now(*target, delivery("{}")).outcome, Outcome::delivered);
  EXPECT_EQ(receiver.connections, 3);  // the first four answers on one, then after 1.0 and the close
  const auto heads = receiver.heads();
  ASSERT_EQ(heads.size(), 6u);
  EXPECT_EQ(heads[0].rfind("POST /hook?via=script HTTP/1.1\r\n", 0), 0u) << heads[0];
  EXPECT_NE(heads[0].find("\r\nHost: 127.0.0.1:"), std::string::npos) << heads[0];
  EXPECT_NE(heads[0].find("\r\nX-Team: ops"), std::string::npos) << heads[0];
}

TEST_P(Webhook, GarbageOrNoAnswerIsRetriedAndTheNextDeliveryGetsThrough) {
  using namespace std::string_literals;
  ScriptedReceiver receiver({ScriptedReceiver::kClose, "\0\xffSMTP ready\r\n\r\n"s, "HTTP/1.1 2xx Fine\r\n\r\n",
                             "HTTP/1.1 503 Unavailable\r\nContent-Length: 4\r\n\r\n\0\xff\n!"s, "HTTP/1.1 204 No Content\r\n\r\n"});
  auto target = make({receiver.url(), "", {}, std::chrono::milliseconds(5000)});
  for (int i = 0; i < 4; ++i) {
    const notify::DeliveryResult r = notify::deliver_now(*target, delivery("{}"));
    EXPECT_EQ(r.outcome, Outcome::retry) << i;
    EXPECT_FALSE(r.error.empty()) << i;
    // What the receiver sent shows escaped: errors go to logs and JSON.
    EXPECT_TRUE(std::ranges::all_of(r.error, [](char c) { return c >= 0x20 && c < 0x7f; })) << r.error;
  }
  EXPECT_EQ(notify::deliver_now(*target, delivery("{}")).outcome, Outcome::delivered);
}

// A receiver that answers 413 as soon as it has read a request's head and reads no more, then
// holds the connection or closes it at once (the unsent rest of the request then resets it):
// either way the answer counts although the body could not be sent.
TEST_P(Webhook, AnAnswerBeforeTheWholeRequestIsSentCounts) {
  for (const bool close_at_once : {false, true}) {
    // libcurl reports the failed send instead when the reset reaches it before it has read the
    // answer, which depends on timing: the reset case is the plain client's.
    if (close_at_once && GetParam() == &notify::make_curl_webhook) continue;
    int port = 0;
    const int listener = listen_on_loopback(port);
    std::atomic<bool> answered{false};
    std::thread receiver([listener, close_at_once, &answered] {
      const int c = ::accept(listener, nullptr, nullptr);
      std::string head;
      char byte;
      while (head.find("\r\n\r\n") == std::string::npos && ::read(c, &byte, 1) == 1) head += byte;
      const std::string reply = "HTTP/1.1 413 Payload Too Large\r\nContent-Length: 8\r\n\r\ntoo much";
      [[maybe_unused]] const auto put = ::write(c, reply.data(), reply.size());
      for (int i = 0; i < 500 && !close_at_once && !answered; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
      ::close(c);
    });
    auto target = make({"http://127.0.0.1:" + std::to_string(port) + "/hook", "", {}, std::chrono::milliseconds(2500)});
    const notify::DeliveryResult r = notify::deliver_now(*target, delivery(std::string(64 << 20, 'x')));
    answered = true;
    EXPECT_EQ(r.outcome, Outcome::reject) << close_at_once << " " << r.error;
    EXPECT_NE(r.error.find("HTTP 413: too much"), std::string::npos) << r.error;
    receiver.join();
    ::close(listener);
  }
}

// A kept-alive connection the receiver closed before the next delivery (which runs at once,
// before the target could notice): the request goes again on a new connection. One that
// breaks after part of an answer is a failure, and is not sent again.
TEST_P(Webhook, ADeadKeptConnectionIsReplacedUnlessItHadBegunToAnswer) {
  ClosingReceiver closing;
  auto target = make({closing.url("127.0.0.1"), "", {}, std::chrono::milliseconds(5000)});
  EXPECT_EQ(notify::deliver_now(*target, delivery("{}")).outcome, Outcome::delivered);
  std::this_thread::sleep_for(std::chrono::milliseconds(50));  // the receiver has closed it
  EXPECT_EQ(notify::deliver_now(*target, delivery("{}")).outcome, Outcome::delivered);
  EXPECT_EQ(closing.answered, 2);

  ScriptedReceiver partial({"HTTP/1.1 204 No Content\r\n\r\n", "HTTP/1.1 2"});  // then closes
  auto second = make({partial.url(), "", {}, std::chrono::milliseconds(5000)});
  EXPECT_EQ(notify::deliver_now(*second, delivery("{}")).outcome, Outcome::delivered);
  EXPECT_EQ(notify::deliver_now(*second, delivery("{}")).outcome, Outcome::retry);
  // Not sent a third time by the plain client (libcurl sends it again when no whole header
  // line came; a receiver sees a duplicate either way, which ids make harmless).
  if (GetParam() == &notify::make_plain_webhook) {
    EXPECT_EQ(partial.heads().size(), 2u);
  }
}

// Time runs out while connecting (the listener's queue is full, so the connect hangs) and while
// sending (the receiver reads nothing); wake() ends a run() at once.
TEST_P(Webhook, TheTimeoutHoldsWhileConnectingAndWhileSending) {
  int port = 0;
  const int listener = listen_on_loopback(port);
  ::listen(listener, 0);  // a queue of one, filled below and never accepted
  std::vector<int> fillers;
  for (int i = 0; i < 8; ++i) {
    const int c = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = htons(static_cast<std::uint16_t>(port));
    ::connect(c, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
    fillers.push_back(c);
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  auto target = make({"http://127.0.0.1:" + std::to_string(port) + "/hook", "", {}, std::chrono::milliseconds(300)});
  notify::DeliveryResult r = notify::deliver_now(*target, delivery("{}"), std::chrono::seconds(10));
  EXPECT_EQ(r.outcome, Outcome::retry);
  EXPECT_NE(r.error.find("imeout"), std::string::npos) << r.error;
  for (const int c : fillers) ::close(c);
  ::close(listener);

  const int silent = listen_on_loopback(port);  // accepts (in the kernel), reads nothing
  target = make({"http://127.0.0.1:" + std::to_string(port) + "/hook", "", {}, std::chrono::milliseconds(300)});
  r = notify::deliver_now(*target, delivery(std::string(64 << 20, 'x')), std::chrono::seconds(10));
  EXPECT_EQ(r.outcome, Outcome::retry);
  EXPECT_NE(r.error.find("imeout"), std::string::npos) << r.error;
  ::close(silent);

  expect_wake_ends_a_waiting_run(*target);
}

TEST_P(Webhook, AHostThatDoesNotResolveIsRetried) {
  auto target = make({"http://no-such-host.invalid/hook", "", {}, std::chrono::milliseconds(3000)});
  const notify::DeliveryResult r = notify::deliver_now(*target, delivery("{}"), std::chrono::seconds(10));
  EXPECT_EQ(r.outcome, Outcome::retry);
  EXPECT_FALSE(r.error.empty());
}

// Many deliveries in flight at once, some larger than a socket's buffer, each answered.
TEST_P(Webhook, ManyDeliveriesInFlightAreEachAnswered) {
  Receiver receiver;
  receiver.status = 204;
  auto target = make({receiver.url(), "s", {}, std::chrono::milliseconds(10000)});
  const std::string small = R"({"n":1})", large(900 << 10, 'x');
  std::vector<std::string> ids;
  for (int i = 0; i < 40; ++i) ids.push_back("id-" + std::to_string(i));
  for (int i = 0; i < 40; ++i) target->start(i, {ids[i], "deviceshadow.shadow.updated", "t", "main", i % 10 == 0 ? large : small});
  std::vector<int> outcomes(40, -1);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (std::ranges::count(outcomes, -1) > 0 && std::chrono::steady_clock::now() < deadline) {
    target->run(std::chrono::milliseconds(100), [&](std::uint64_t tag, notify::DeliveryResult r) {
      ASSERT_EQ(outcomes.at(tag), -1) << "reported twice: " << tag;
      outcomes.at(tag) = static_cast<int>(r.outcome);
    });
  }
  EXPECT_EQ(std::ranges::count(outcomes, static_cast<int>(Outcome::delivered)), 40);
  const auto requests = receiver.requests();
  ASSERT_EQ(requests.size(), 40u);
  EXPECT_EQ(std::ranges::count_if(requests, [&](const auto& r) { return r.body == large; }), 4);
  for (const auto& r : requests) {
    const std::string signature = Receiver::header(r, "X-Shadow-Signature");
    EXPECT_EQ(signature, notify::webhook_signature("s", std::stoll(signature.substr(2)), r.body));
  }
}

TEST(WebhookClient, PlainHttpWithoutProxyOrOwnFramingHeadersSkipsLibcurl) {
  auto plain = [](std::string url, std::vector<std::pair<std::string, std::string>> headers = {}) {
    return notify::make_plain_webhook({std::move(url), "", std::move(headers), std::chrono::milliseconds(1000)}) != nullptr;
  };
  EXPECT_TRUE(plain("http://127.0.0.1:1/x?y=1"));
  EXPECT_TRUE(plain("http://[::1]/x"));
  EXPECT_TRUE(plain("http://hooks.example.com/x", {{"Authorization", "Bearer t"}}));
  EXPECT_FALSE(plain("https://hooks.example.com/x"));
  EXPECT_FALSE(plain("http://user:pw@hooks.example.com/x"));
  EXPECT_FALSE(plain("http://hooks.example.com/x", {{"host", "other.example.com"}}));
  EXPECT_FALSE(plain("http://hooks.example.com/x", {{"Content-Length", "1"}}));
  EXPECT_FALSE(plain("http://b\xc3\xbc" "cher.example/x"));  // IDN: libcurl converts the name
  EXPECT_FALSE(plain("http://[fe80::1%25eth0]:8080/x"));     // a zone
  ::setenv("http_proxy", "http://proxy.example.com:3128", 1);
  EXPECT_FALSE(plain("http://hooks.example.com/x"));
  ::unsetenv("http_proxy");
  EXPECT_TRUE(plain("http://hooks.example.com/x"));
}

using Progress = notify::Http1Response::Progress;

// Feeds `text` one byte at a time: every split of an answer must read the same.
Progress feed_bytewise(notify::Http1Response& r, std::string_view text) {
  Progress p = Progress::incomplete;
  for (char c : text) p = r.feed(std::string_view(&c, 1));
  return p;
}

TEST(Http1Response, ReadsLengthChunksAndInterimAnswersInAnyPieces) {
  notify::Http1Response chunked;
  EXPECT_EQ(feed_bytewise(chunked, "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 404 Not Found\r\nTransfer-Encoding: gzip, chunked\r\n\r\n"
                                   "3\r\nnot\r\n9;x=y\r\n here, no\r\n0\r\nTrailer: 1\r\n\r\n"),
            Progress::complete);
  EXPECT_EQ(chunked.status(), 404);
  EXPECT_EQ(chunked.body(), "not here, no");
  EXPECT_TRUE(chunked.reusable());

  notify::Http1Response length;
  EXPECT_EQ(length.feed("HTTP/1.0 200 OK\r\nConnection: Keep-Alive\r\nContent-Length: 5\r\n\r\nhel"), Progress::incomplete);
  EXPECT_EQ(length.feed("lo"), Progress::complete);
  EXPECT_EQ(length.body(), "hello");
  EXPECT_TRUE(length.reusable());
  length.feed("HTTP/1.1 200 OK\r\n");  // an answer nobody asked for
  EXPECT_FALSE(length.reusable());

  notify::Http1Response until_close;
  EXPECT_EQ(until_close.feed("HTTP/1.1 500 Error\r\n\r\n" + std::string(2000, 'e')), Progress::incomplete);
  EXPECT_EQ(until_close.end_of_stream(), Progress::complete);
  EXPECT_EQ(until_close.body().size(), notify::Http1Response::kBodyKept);
  EXPECT_FALSE(until_close.reusable());

  notify::Http1Response closing;
  EXPECT_EQ(closing.feed("HTTP/1.1 204 No Content\r\nConnection: close\r\n\r\n"), Progress::complete);
  EXPECT_FALSE(closing.reusable());
}

// Found by fuzz_http1: a "0" chunk header right after a chunk's data (no CR LF between) is
// malformed however it is split; it used to wait forever for a fifth byte when fed bytewise.
TEST(Http1Response, ALastChunkWithoutTheCrLfBeforeItIsMalformedInAnyPieces) {
  const std::string answer = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1\r\n\r0\r\n\n";
  notify::Http1Response whole, bytewise;
  EXPECT_EQ(whole.feed(answer), Progress::malformed);
  EXPECT_EQ(feed_bytewise(bytewise, answer), Progress::malformed);
}

TEST(Http1Response, CloseWinsAndSuspectFramingEndsTheConnection) {
  auto reusable = [](std::string head) {
    notify::Http1Response r;
    EXPECT_EQ(r.feed(head + "\r\n"), Progress::complete) << head;
    return r.reusable();
  };
  EXPECT_TRUE(reusable("HTTP/1.1 204 No Content\r\n"));
  EXPECT_FALSE(reusable("HTTP/1.1 204 No Content\r\nConnection: close, keep-alive\r\n"));
  EXPECT_FALSE(reusable("HTTP/1.1 204 No Content\r\nConnection: close\r\nConnection: keep-alive\r\n"));
  EXPECT_FALSE(reusable("HTTP/1.0 204 No Content\r\n"));
  EXPECT_TRUE(reusable("HTTP/1.0 204 No Content\r\nConnection: keep-alive\r\n"));
  EXPECT_FALSE(reusable("HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n"));
  EXPECT_TRUE(reusable("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked, ,\r\n\r\n0\r\n"));  // empty elements count for nothing
  // Framed by both Transfer-Encoding and Content-Length, in either order: refused (retried)
  // rather than read by the Transfer-Encoding and the connection closed, as RFC 9112 6.3 allows
  // ("ought to be handled as an error"); Beast's parser refuses most of these itself.
  for (const std::string both : {"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n0\r\n\r\n",
                                 "HTTP/1.1 200 OK\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
                                 "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\nContent-Length: 3\r\n\r\nabc"}) {
    notify::Http1Response r;
    EXPECT_EQ(feed_bytewise(r, both), Progress::malformed) << both;
    EXPECT_FALSE(r.reusable());
  }
}

TEST(Http1Response, ReadsWhatReceiversSendAndRefusesBareLineFeedsAtOnce) {
  // No reason and no space before it: read, as libcurl reads it.
  notify::Http1Response bare_status;
  EXPECT_EQ(feed_bytewise(bare_status, "HTTP/1.1 204\r\n\r\n"), Progress::complete);
  EXPECT_EQ(bare_status.status(), 204);
  EXPECT_TRUE(bare_status.reusable());
  // An empty chunked body arriving in pieces (Beast asserts on the last chunk given in under 5 bytes).
  notify::Http1Response empty;
  EXPECT_EQ(feed_bytewise(empty, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"), Progress::complete);
  EXPECT_TRUE(empty.reusable());
  // A folded header line (obs-fold) is joined (RFC 9112 5.2).
  notify::Http1Response folded;
  EXPECT_EQ(folded.feed("HTTP/1.1 200 OK\r\nX-Long: a\r\n b\r\nContent-Length: 0\r\n\r\n"), Progress::complete);
  // Lines ending in a bare LF (RFC 9112 2.2 allows but does not require reading them): refused as
  // soon as the first one is in, not when the connection or the time runs out.
  for (const std::string lf : {"HTTP/1.1 204 No Content\n", "HTTP/1.1 204 No Content\r\nX: y\n"}) {
    notify::Http1Response r;
    EXPECT_EQ(r.feed(lf), Progress::malformed) << lf;
  }
}

TEST(Http1Response, TheHeadLimitDoesNotDependOnHowTheBytesArrive) {
  const std::string head = "HTTP/1.1 204 No Content\r\nX-Big: " + std::string(40000, 'b') + "\r\n\r\n";
  notify::Http1Response whole, bytewise;
  EXPECT_EQ(whole.feed(head), Progress::complete);
  EXPECT_EQ(feed_bytewise(bytewise, head), Progress::complete);
}

// A bad status line is refused as soon as it is in; a bad header line once the head's empty
// line is (Beast's parser judges a head when the whole of it has come), a chunk longer than its
// size once the 4 bytes after its data are.
TEST(Http1Response, RefusesWhatIsNotAnAnswer) {
  for (const std::string bad : {"SMTP ready\r\n", "HTTP/2 200\r\n", "HTTP/1.1 20 OK\r\n", "HTTP/1.1 200OK\r\n", "HTTP/1.1 099 Low\r\n",
                                "HTTP/1.1 200 OK\r\nno colon\r\n\r\n", "HTTP/1.1 200 OK\r\n folded: x\r\n\r\n",
                                "HTTP/1.1 200 OK\r\nContent-Length: 1x\r\n\r\n", "HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n",
                                "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
                                "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1\r\nab\r\n0\r\n",
                                "HTTP/1.1 101 Switching Protocols\r\n\r\n"}) {
    notify::Http1Response r;
    EXPECT_EQ(r.feed(bad), Progress::malformed) << bad;
    EXPECT_NE(r.error().find("malformed"), std::string::npos) << r.error();
  }
  notify::Http1Response huge;
  EXPECT_EQ(huge.feed("HTTP/1.1 200 OK\r\n" + std::string(notify::Http1Response::kHeadLimit, 'h')), Progress::malformed);
  notify::Http1Response cut;
  EXPECT_EQ(cut.feed("HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\nshort"), Progress::incomplete);
  EXPECT_EQ(cut.end_of_stream(), Progress::malformed);
  notify::Http1Response nothing;
  EXPECT_EQ(nothing.end_of_stream(), Progress::malformed);
  EXPECT_FALSE(nothing.started());
}

}  // namespace
