#include "notify/target.hpp"

#include <optional>

namespace deviceshadow::notify {

DeliveryResult deliver_now(Target& target, const Delivery& delivery, std::chrono::milliseconds limit) {
  std::optional<DeliveryResult> outcome;
  target.start(0, delivery);
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (!outcome && std::chrono::steady_clock::now() < deadline) {
    target.run(std::chrono::milliseconds(100), [&](std::uint64_t, DeliveryResult r) { outcome = std::move(r); });
  }
  return outcome.value_or(DeliveryResult{DeliveryResult::Outcome::retry, "no outcome in time"});
}

}  // namespace deviceshadow::notify
