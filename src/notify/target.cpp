#include "notify/target.hpp"

#include <optional>

namespace deviceshadow::notify {

DeliveryResult deliver_now(Target& target, const Delivery& delivery) {
  std::optional<DeliveryResult> outcome;
  target.start(0, delivery);
  while (!outcome) target.run(std::chrono::milliseconds(100), [&](std::uint64_t, DeliveryResult r) { outcome = std::move(r); });
  return *outcome;
}

}  // namespace deviceshadow::notify
