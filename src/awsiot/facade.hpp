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
#include "server/auth.hpp"
#include "server/http.hpp"
#include "server/log.hpp"
#include "server/metrics.hpp"

#include <span>
#include <string>
#include <string_view>

namespace deviceshadow::awsiot {

struct FacadeOptions {
  std::string classic_shadow = "main";  // the shadow AWS's classic (unnamed) shadow maps to
  bool acknowledge = false;             // acknowledge desired values that reported reaches
};

// Who may call the facade. With a verifier, every request must carry a valid SigV4 signature
// and gets its key's rights; else, with tokens, an API v1 bearer token; else it is open.
struct FacadeAuth {
  const SigV4Verifier* verifier = nullptr;
  const server::Authenticator* tokens = nullptr;
};

class Facade {
 public:
  Facade(Engine& engine, FacadeAuth auth, server::Metrics& metrics, server::Logger& logger, FacadeOptions options = {});

  // Whether the request's path belongs to the facade (the rest is API v1's).
  static bool serves(std::string_view target) noexcept;
  // Never throws. Safe to call concurrently.
  server::HttpResponse handle(const server::HttpRequest& request);
  // The facade's routes, as server::Api::routes() lists API v1's.
  static std::span<const server::Route> routes() noexcept;

 private:
  struct Context;
  server::HttpResponse route(Context& ctx);
  server::HttpResponse get(Context& ctx);
  server::HttpResponse update(Context& ctx);
  server::HttpResponse remove(Context& ctx);
  server::HttpResponse list(Context& ctx);
  void authenticate(Context& ctx) const;
  void authorize(const Context& ctx, server::Action action, std::string_view thing) const;

  Engine& engine_;
  FacadeAuth auth_;
  server::Metrics& metrics_;
  server::Logger& logger_;
  FacadeOptions options_;
};

}  // namespace deviceshadow::awsiot
