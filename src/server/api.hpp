// The REST API v1 (routes: the README's "REST API v1"): routing, request parsing, authorization,
// rendering. Independent of the HTTP transport; every failure becomes the JSON error body
// {"error":{"code","message",…}} (docs/semantics.md, "Errors and limits").
#pragma once

#include "deviceshadow/engine.hpp"
#include "server/auth.hpp"
#include "server/http.hpp"
#include "server/log.hpp"
#include "server/metrics.hpp"

#include <span>
#include <string_view>

namespace deviceshadow::notify {
class Dispatcher;
}

namespace deviceshadow::server {

class Api {
 public:
  // auth == nullptr: the server is open (no token file). dispatcher == nullptr: no
  // notification endpoints.
  Api(Engine& engine, const Authenticator* auth, Metrics& metrics, Logger& logger,
      notify::Dispatcher* dispatcher = nullptr);

  // Never throws. Safe to call concurrently.
  HttpResponse handle(const HttpRequest& request);
  // The response for a request the transport could not read (oversized, malformed).
  HttpResponse transport_error(int status, const std::string& message) const;
  // Every route the API serves. Routing takes each route's methods from here, and a test
  // checks that docs/openapi.yaml documents exactly these.
  static std::span<const Route> routes() noexcept;

 private:
  struct Context;
  HttpResponse route(Context& ctx);
  HttpResponse get_shadow(Context& ctx);
  HttpResponse update(Context& ctx, Section section);
  HttpResponse remove(Context& ctx, std::optional<Section> section);
  HttpResponse list_shadows(Context& ctx);
  HttpResponse list_things(Context& ctx);
  HttpResponse history(Context& ctx);
  HttpResponse batch_get(Context& ctx);
  HttpResponse batch_update(Context& ctx);
  HttpResponse registrations(Context& ctx);
  void authorize(Context& ctx, Action action, std::string_view thing) const;

  Engine& engine_;
  const Authenticator* auth_;
  Metrics& metrics_;
  Logger& logger_;
  notify::Dispatcher* dispatcher_;
};

}  // namespace deviceshadow::server
