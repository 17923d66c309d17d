#include "notify/target.hpp"

#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <optional>
#include <system_error>

namespace deviceshadow::notify {

ReadySignal::ReadySignal() : fd_(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) {
  if (fd_ < 0) throw std::system_error(errno, std::generic_category(), "cannot make an eventfd");
}

ReadySignal::~ReadySignal() { ::close(fd_); }

void ReadySignal::signal() {
  const std::uint64_t one = 1;
  [[maybe_unused]] const auto n = ::write(fd_, &one, sizeof one);
}

void ReadySignal::drain() {
  std::uint64_t count;
  [[maybe_unused]] const auto n = ::read(fd_, &count, sizeof count);
}

void ReadySignal::wait(std::chrono::milliseconds timeout) {
  if (timeout.count() <= 0) return;
  pollfd p{fd_, POLLIN, 0};
  ::poll(&p, 1, static_cast<int>(timeout.count()));
}

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
