// The AWS IoT Device Shadow REST API (docs/aws-iot.md), served beside API v1 on the same
// listener so that the AWS CLI (`aws iot-data …`), boto3 and the AWS SDKs work unchanged:
//   GET|POST|DELETE /things/{thing}/shadow[?name=]            GetThingShadow, UpdateThingShadow,
//                                                              DeleteThingShadow
//   GET /api/things/shadow/ListNamedShadowsForThing/{thing}   [?nextToken=&pageSize=]
// Documents, errors and version rules are AWS's; the engine underneath is the same as API v1's,
// so a write through either API is seen through the other.
#pragma once

#include "awsiot/sigv4_verifier.hpp"
#include "deviceshadow/engine.hpp"
#include "http/auth.hpp"
#include "http/server.hpp"
#include "http/log.hpp"
#include "http/metrics.hpp"

#include <span>
#include <string>
#include <string_view>

namespace deviceshadow::awsiot {

struct FacadeOptions {
  std::string classic_shadow = "main";  // the shadow AWS's classic (unnamed) shadow maps to
  bool acknowledge = false;             // acknowledge desired values that reported reaches
  // GetThingShadow answered on the I/O thread when the store can read at once, as API v1's GETs
  // (api::ApiOptions::inline_reads).
  bool inline_reads = true;
};

// Who may call the facade. With a verifier, every request must carry a valid SigV4 signature
// and gets its key's rights; else, with tokens, an API v1 bearer token; else it is open.
struct FacadeAuth {
  const SigV4Verifier* verifier = nullptr;
  const http::Authenticator* tokens = nullptr;
};

class Facade final : public http::Service {
 public:
  Facade(Engine& engine, FacadeAuth auth, http::Metrics& metrics, http::Logger& logger, FacadeOptions options = {});

  // Whether the request's path belongs to the facade (the rest is API v1's).
  static bool serves(std::string_view target) noexcept;
  // Never throws. Safe to call concurrently.
  http::HttpResponse handle(const http::HttpRequest& request) override;
  // GetThingShadow, when the store can read the shadow at once (FacadeOptions::inline_reads).
  std::optional<http::HttpResponse> handle_inline(const http::HttpRequest& request) override;
  // A refusal by the transport (an oversized body, …) in AWS's format, with `status` kept.
  http::HttpResponse refuse(int status, const std::string& message) const override;
  // The facade's routes, as api::Api::routes() lists API v1's.
  static std::span<const http::Route> routes() noexcept;

 private:
  struct Context;
  // Thrown by a handler called on the I/O thread (Context::must_not_wait) that would wait.
  struct WouldWait {};
  // handle(), or on the I/O thread handle_inline(): nullopt when a handler would wait.
  std::optional<http::HttpResponse> respond(const http::HttpRequest& request, bool must_not_wait);
  http::HttpResponse route(Context& ctx);
  http::HttpResponse get(Context& ctx);
  http::HttpResponse update(Context& ctx);
  http::HttpResponse remove(Context& ctx);
  http::HttpResponse list(Context& ctx);
  void authenticate(Context& ctx) const;
  void authorize(const Context& ctx, http::Action action, std::string_view thing) const;

  Engine& engine_;
  FacadeAuth auth_;
  http::Metrics& metrics_;
  http::Logger& logger_;
  FacadeOptions options_;
  mutable http::LogRateLimit refusal_log_;  // any client can send bad signatures
  mutable http::LogRateLimit failure_log_{10};  // "request failed" lines: a store down fails every request
};

}  // namespace deviceshadow::awsiot
