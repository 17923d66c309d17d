// The REST API v1 (routes: the README's "REST API v1"): routing, request parsing, authorization,
// rendering. Independent of the HTTP transport; every failure becomes the JSON error body
// {"error":{"code","message",…}} (docs/semantics.md, "Errors and limits").
#pragma once

#include "deviceshadow/engine.hpp"
#include "http/auth.hpp"
#include "http/server.hpp"
#include "http/log.hpp"
#include "http/metrics.hpp"
#include "query/search.hpp"

#include <memory>
#include <span>
#include <string_view>

namespace deviceshadow::notify {
class Dispatcher;
}
namespace deviceshadow::query {
class CursorKey;
}
namespace deviceshadow::live {
class Hub;
}
namespace deviceshadow::jobs {
class JobRunner;
}

namespace deviceshadow::api {

using http::Action;
using http::Authenticator;
using http::HttpRequest;
using http::HttpResponse;
using http::Logger;
using http::LogLevel;
using http::LogRateLimit;
using http::Metrics;
using http::Role;
using http::Route;
using http::Token;

struct ApiOptions {
  bool private_readyz = false;  // /readyz needs a token when tokens are on (/healthz never does)
  // Fleet queries (queries.cpp): their budget, and the key sealing their cursors (nullptr: one
  // random key per process, so that cursors do not survive a restart).
  query::QueryOptions queries;
  std::shared_ptr<const query::CursorKey> cursor_key;
  // Serves the live change streams (docs/streams.md, src/api/streams.cpp); nullptr: they answer
  // 400 invalid_request with `streams_off` (why they are off, and how to turn them on).
  live::Hub* streams = nullptr;
  std::string streams_off = "live change streams are off";
  // Runs the bulk jobs (docs/jobs.md, src/api/jobs.cpp); nullptr: /v1/jobs answers 400 saying
  // the store does not keep them (a backend without a JobStore).
  jobs::JobRunner* jobs = nullptr;
  // GETs of one shadow are answered on the I/O thread that read them whenever the store can read
  // the record without waiting (Store::try_read: SQLite with an idle reader, memory), skipping
  // two thread hops; the others go to the worker pool. false: every GET goes to the pool (for a
  // database on a disk slow enough that a read would hold up the other connections).
  bool inline_reads = true;
};

class Api final : public http::Service {
 public:
  // auth == nullptr: the server is open (no token file). dispatcher == nullptr: no
  // notification endpoints.
  Api(Engine& engine, const Authenticator* auth, Metrics& metrics, Logger& logger,
      notify::Dispatcher* dispatcher = nullptr, ApiOptions options = {});

  // Never throws. Safe to call concurrently.
  HttpResponse handle(const HttpRequest& request) override;
  // The response for a request the transport refused (oversized, malformed, shed).
  HttpResponse refuse(int status, const std::string& message) const override;
  // /healthz and /v1/openapi.json, which touch no store, and the GETs of one shadow the store
  // can read at once (ApiOptions::inline_reads) are answered on the I/O thread.
  std::optional<HttpResponse> handle_inline(const HttpRequest& request) override;
  // Every route the API serves. Routing takes each route's methods from here, and a test
  // checks that docs/openapi.yaml documents exactly these.
  static std::span<const Route> routes() noexcept;

 private:
  struct Context;
  // Thrown by a handler called on the I/O thread (Context::must_not_wait) that would wait.
  struct WouldWait {};
  // handle(), or on the I/O thread handle_inline(): nullopt when a handler would wait.
  std::optional<HttpResponse> respond(const HttpRequest& request, bool must_not_wait);
  HttpResponse route(Context& ctx);
  HttpResponse get_shadow(Context& ctx);
  HttpResponse update(Context& ctx, Section section);
  HttpResponse remove(Context& ctx, std::optional<Section> section);
  HttpResponse list_shadows(Context& ctx);
  HttpResponse list_things(Context& ctx);
  // History and time travel (history.cpp).
  HttpResponse history(Context& ctx);
  HttpResponse get_shadow_as_of(Context& ctx);
  HttpResponse history_bounds(Context& ctx);
  HttpResponse diff(Context& ctx);
  HttpResponse batch_get(Context& ctx);
  HttpResponse batch_update(Context& ctx);
  HttpResponse registrations(Context& ctx);
  HttpResponse search(Context& ctx);  // queries.cpp
  HttpResponse count(Context& ctx);   // queries.cpp
  HttpResponse aggregate(Context& ctx);  // queries.cpp
  HttpResponse index(Context& ctx);      // queries.cpp: the declared indexes (admin)
  HttpResponse events(Context& ctx);  // streams.cpp
  HttpResponse jobs(Context& ctx);    // jobs.cpp
  void authorize(Context& ctx, Action action, std::string_view thing) const;
  // The key that seals cursors (ApiOptions::cursor_key, or one random per process).
  const query::CursorKey& cursor_key() const;

  Engine& engine_;
  const Authenticator* auth_;
  Metrics& metrics_;
  Logger& logger_;
  LogRateLimit failure_log_{10};  // "request failed" lines: a store down fails every request
  notify::Dispatcher* dispatcher_;
  ApiOptions options_;
};

}  // namespace deviceshadow::api
