// Which requests the AWS IoT facade answers on the I/O thread (Facade::handle_inline):
// GetThingShadow when the store can read at once, as API v1 does its GETs.
#include "awsiot/facade.hpp"

#include "deviceshadow/engine.hpp"
#include "deviceshadow/memory_store.hpp"
#include "http/log.hpp"
#include "http/metrics.hpp"
#include "support/forwarding_store.hpp"
#include "support/http_request.hpp"

#include <gtest/gtest.h>

#include <string>

namespace ds = deviceshadow;
namespace http = deviceshadow::http;
namespace awsiot = deviceshadow::awsiot;

namespace {

class FacadeInline : public ::testing::Test {
 protected:
  FacadeInline() {
    for (const char* name : {"main", "lamp"}) {
      ds::UpdateRequest r;
      r.key = {"t 1", name};
      r.state["a"] = 1;
      engine.update(r);
    }
  }
  std::optional<http::HttpResponse> inline_answer(std::string method, std::string target, bool inline_reads = true) {
    awsiot::Facade f(engine, {}, metrics, logger, {.inline_reads = inline_reads});
    return f.handle_inline(http_request(std::move(method), std::move(target)));
  }
  std::unique_ptr<ds::StoreBackend> store = ds::make_memory_store();
  ds::Engine engine{*store};
  http::Metrics metrics;
  http::Logger logger{http::LogLevel::error};
};

TEST_F(FacadeInline, GetThingShadowIsAnsweredAsThePoolWouldAnswerIt) {
  awsiot::Facade pool(engine, {}, metrics, logger);
  for (const char* target : {"/things/t%201/shadow", "/things/t%201/shadow?name=lamp"}) {
    const std::optional<http::HttpResponse> now = inline_answer("GET", target);
    ASSERT_TRUE(now) << target;
    EXPECT_EQ(now->status, 200) << target;
    const std::string later = pool.handle(http_request("GET", target)).body;
    // The documents differ only in their `timestamp` (the time of the answer).
    EXPECT_EQ(now->body.substr(0, now->body.find("\"timestamp\"")), later.substr(0, later.find("\"timestamp\""))) << target;
  }
  const std::optional<http::HttpResponse> missing = inline_answer("GET", "/things/t%201/shadow?name=other");
  ASSERT_TRUE(missing);
  EXPECT_EQ(missing->status, 404);
}

TEST_F(FacadeInline, WhatWouldWaitGoesToThePool) {
  EXPECT_FALSE(inline_answer("POST", "/things/t%201/shadow"));
  EXPECT_FALSE(inline_answer("DELETE", "/things/t%201/shadow"));
  EXPECT_FALSE(inline_answer("GET", "/api/things/shadow/ListNamedShadowsForThing/t%201"));
  EXPECT_FALSE(inline_answer("GET", "/things/t%201/shadow", false));
  // A store that cannot read at once (as DynamoDB).
  ForwardingStore slow(*store);  // try_read: Store's default, nullopt
  ds::Engine over_slow(slow);
  awsiot::Facade f(over_slow, {}, metrics, logger);
  EXPECT_FALSE(f.handle_inline(http_request("GET", "/things/t%201/shadow")));
  EXPECT_EQ(f.handle(http_request("GET", "/things/t%201/shadow")).status, 200);
  const std::string text = metrics.render(engine.stats());
  EXPECT_NE(text.find("shadowd_http_requests_in_flight 0\n"), std::string::npos) << text;
  EXPECT_NE(text.find("shadowd_http_requests_handed_on_total 1\n"), std::string::npos) << text;
}

}  // namespace
