// `shadowctl watch`: follows a live change stream (docs/streams.md) and prints each change as it
// happens, readable or as the CloudEvent on one JSON line. It reconnects after a dropped
// connection, an overflow or a server restart, sending the last id it saw (Last-Event-ID), so
// nothing is missed; events the server sends again after a reconnect are printed once.
#pragma once

#include <string>

namespace deviceshadow::cli {

struct WatchOptions {
  std::string server;  // http://host:port
  std::string token;
  std::string thing;  // empty: every shadow (GET /v1/events)
  std::string name;   // with thing: one shadow (default main)
  std::string match;  // RE2 over {thing}#{name}, every shadow only
  std::string filter; // a filter (docs/queries.md) the shadow must pass after the write
  bool json = false;
};

// Runs until interrupted, or a refusal (400, 401, 403: printed, exit status 1).
int watch(const WatchOptions& options);

}  // namespace deviceshadow::cli
