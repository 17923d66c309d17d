// Which requests API v1 answers on the I/O thread (Api::handle_inline): the GETs of one shadow
// when the store can read at once, and nothing that would wait.
#include "api/api.hpp"

#include "deviceshadow/engine.hpp"
#include "deviceshadow/memory_store.hpp"
#include "http/log.hpp"
#include "http/metrics.hpp"
#include "support/forwarding_store.hpp"
#include "support/http_request.hpp"

#include <gtest/gtest.h>

#include <string>

namespace ds = deviceshadow;
namespace api = deviceshadow::api;
namespace http = deviceshadow::http;

namespace {

class InlineAnswers : public ::testing::Test {
 protected:
  InlineAnswers() {
    ds::UpdateRequest r;
    r.key = {"t 1", "main"};
    r.state["a"] = 1;
    engine.update(r);
  }
  std::optional<http::HttpResponse> inline_answer(std::string method, std::string target, bool inline_reads = true) {
    api::Api a(engine, nullptr, metrics, logger, nullptr, api::ApiOptions{.inline_reads = inline_reads});
    return a.handle_inline(http_request(std::move(method), std::move(target)));
  }
  std::unique_ptr<ds::StoreBackend> store = ds::make_memory_store();
  ds::Engine engine{*store};
  http::Metrics metrics;
  http::Logger logger{http::LogLevel::error};
};

TEST_F(InlineAnswers, AGetOfOneShadowIsAnsweredAsThePoolWouldAnswerIt) {
  const std::optional<http::HttpResponse> now = inline_answer("GET", "/v1/things/t%201/shadows/main?metadata=true");
  ASSERT_TRUE(now);
  api::Api pool(engine, nullptr, metrics, logger);
  const http::HttpResponse later = pool.handle(http_request("GET", "/v1/things/t%201/shadows/main?metadata=true"));
  EXPECT_EQ(now->status, 200);
  EXPECT_EQ(now->body, later.body);
  // Its refusals too: they wait on nothing.
  const std::optional<http::HttpResponse> missing = inline_answer("GET", "/v1/things/t%201/shadows/other");
  ASSERT_TRUE(missing);
  EXPECT_EQ(missing->status, 404);
  const std::optional<http::HttpResponse> bad = inline_answer("GET", "/v1/things/t%201/shadows/main?nope=1");
  ASSERT_TRUE(bad);
  EXPECT_EQ(bad->status, 400);
}

TEST_F(InlineAnswers, WhatWouldWaitGoesToThePool) {
  // As of a moment: reads history.
  EXPECT_FALSE(inline_answer("GET", "/v1/things/t%201/shadows/main?reportedVersion=1"));
  // Writes, other reads, and every GET when inline reads are off.
  EXPECT_FALSE(inline_answer("POST", "/v1/things/t%201/shadows/main/reported"));
  EXPECT_FALSE(inline_answer("DELETE", "/v1/things/t%201/shadows/main"));
  EXPECT_FALSE(inline_answer("GET", "/v1/things/t%201/shadows"));
  EXPECT_FALSE(inline_answer("GET", "/v1/things/t%201/shadows/main/history"));
  EXPECT_FALSE(inline_answer("GET", "/v1/shadows?filter=eq(thing,%22t%22)"));
  EXPECT_FALSE(inline_answer("GET", "/readyz"));
  EXPECT_FALSE(inline_answer("GET", "/v1/things/t%201/shadows/main", false));
  EXPECT_TRUE(inline_answer("GET", "/healthz"));
}

// A request handed on is counted once, by the worker that answers it.
TEST_F(InlineAnswers, ARequestHandedOnIsCountedOnce) {
  EXPECT_FALSE(inline_answer("GET", "/v1/things/t%201/shadows/main?reportedVersion=1"));
  std::string text = metrics.render(engine.stats());
  EXPECT_NE(text.find("shadowd_http_requests_in_flight 0\n"), std::string::npos) << text;
  EXPECT_NE(text.find("shadowd_http_requests_handed_on_total 1\n"), std::string::npos) << text;
  EXPECT_EQ(text.find("shadowd_http_requests_total{"), std::string::npos) << text;
  api::Api pool(engine, nullptr, metrics, logger);
  EXPECT_EQ(pool.handle(http_request("GET", "/v1/things/t%201/shadows/main?reportedVersion=1")).status, 200);
  text = metrics.render(engine.stats());
  EXPECT_NE(text.find(R"(shadowd_http_requests_total{route="/v1/things/{thing}/shadows/{name}",method="GET",status="200"} 1)"),
            std::string::npos) << text;
}

// A store that cannot read at once (as DynamoDB): the GET goes to the pool.
class NoReadAtOnce final : public ForwardingStore {
 public:
  using ForwardingStore::ForwardingStore;  // try_read: Store's default, nullopt
};

TEST_F(InlineAnswers, AGetTheStoreCannotReadAtOnceGoesToThePool) {
  NoReadAtOnce slow(*store);
  ds::Engine over_slow(slow);
  api::Api a(over_slow, nullptr, metrics, logger);
  EXPECT_FALSE(a.handle_inline(http_request("GET", "/v1/things/t%201/shadows/main")));
  EXPECT_EQ(a.handle(http_request("GET", "/v1/things/t%201/shadows/main")).status, 200);
}

}  // namespace
