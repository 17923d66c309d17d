// Where events go: a Target delivers CloudEvents to one registration's destination. One file
// per type under targets/. Targets are safe for concurrent use: the dispatcher delivers the
// events of different shadows at once.
#pragma once

#include "notify/registration.hpp"

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

namespace deviceshadow::notify {

// One event to deliver.
struct Delivery {
  std::string_view id;    // the CloudEvent's id (receivers deduplicate by it)
  std::string_view type;  // the CloudEvent's type
  std::string_view thing;
  std::string_view name;
  std::string_view body;  // the CloudEvent, JSON
};

struct DeliveryResult {
  enum class Outcome {
    delivered,
    retry,   // a failure that may pass: try again later (until maxAttempts)
    reject,  // the destination refused the event for good: dead-letter it now
  };
  Outcome outcome = Outcome::delivered;
  std::string error;  // why it failed, for the dead letter's lastError and the logs
};

class Target {
 public:
  virtual ~Target() = default;
  // Delivers one event; blocks until the destination answered or the target's timeout passed.
  virtual DeliveryResult deliver(const Delivery& delivery) = 0;
  // The largest event the destination accepts; a larger one is sent truncated (SPEC §13).
  virtual std::size_t max_event_bytes() const { return SIZE_MAX; }
};

// Webhook: POST with Content-Type application/cloudevents+json, the registration's headers,
// X-Shadow-Signature when it has a secret; keep-alive connections. 2xx is delivered; 408, 429,
// 5xx, a connection failure or the timeout is retried; any other status is rejected.
std::unique_ptr<Target> make_webhook_target(const WebhookTarget& target);

}  // namespace deviceshadow::notify
