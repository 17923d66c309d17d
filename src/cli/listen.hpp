// `shadowctl listen`: a webhook receiver for trying notifications in a terminal. It accepts a
// POST of a CloudEvent (any path), checks its X-Shadow-Signature when a secret is given, and
// prints the event: a readable summary, or the event as received on one JSON line.
#pragma once

#include <boost/json/fwd.hpp>

#include <cstdint>
#include <string>

namespace deviceshadow::cli {

// A signature whose timestamp is further than this from the receiver's clock is refused.
inline constexpr std::int64_t kSignatureToleranceSeconds = 300;

struct ListenOptions {
  std::string host = "127.0.0.1";
  unsigned short port = 0;  // 0: any free port (printed at start)
  std::string secret;       // empty: events are accepted unsigned
  bool json = false;        // one compact JSON line per event instead of a summary
};

// Serves until SIGINT or SIGTERM; returns the exit status (1 when it cannot listen).
int listen(const ListenOptions& options);

// A CloudEvent of a shadow write for people (`listen` and `watch`): one line for a write of one
// change in one section; else a head line and one line per change ("reported update /temp 20 ->
// 21"). Each line ends with '\n'; values that devices wrote are cut and made safe for a terminal.
//   2026-11-23T12:00:00.123Z updated My House#main reported v7: update /temp 20 -> 21 (clientToken abc)
std::string describe_event(const boost::json::object& event);

}  // namespace deviceshadow::cli
