#include "notify/targets/aws_target.hpp"

#include "aws/credentials.hpp"

#include <algorithm>
#include <array>

namespace deviceshadow::notify::aws_target {

void BatchingTarget::run(std::chrono::milliseconds timeout, const Done& done) {
  if (waiting_.empty() || abandoned_) {
    std::unique_lock lock(mutex_);
    cv_.wait_for(lock, timeout, [&] { return woken_; });
    woken_ = false;
    return;
  }
  std::size_t n = 0;
  std::size_t bytes = 0;
  while (n < waiting_.size() && n < max_entries_) {
    const std::size_t size = waiting_[n].delivery.body.size() + entry_overhead_;
    if (n > 0 && bytes + size > max_batch_bytes_) break;
    bytes += size;
    ++n;
  }
  std::vector<Item> batch(waiting_.begin(), waiting_.begin() + static_cast<std::ptrdiff_t>(n));
  waiting_.erase(waiting_.begin(), waiting_.begin() + static_cast<std::ptrdiff_t>(n));
  std::vector<DeliveryResult> results = send(batch);
  for (std::size_t i = 0; i < batch.size(); ++i) {
    done(batch[i].tag, i < results.size() ? std::move(results[i])
                                          : DeliveryResult{DeliveryResult::Outcome::retry, "no result for the entry"});
  }
}

void BatchingTarget::abandon() {
  abandoned_ = true;
  wake();
}

void BatchingTarget::wake() {
  std::lock_guard lock(mutex_);
  woken_ = true;
  cv_.notify_all();
}

std::optional<aws::Credentials> CredentialSource::get(std::string& error) {
  if (!credentials_) {
    try {
      credentials_ = aws::load_credentials();
    } catch (const std::exception& e) {
      error = std::string("no AWS credentials: ") + e.what();
      return std::nullopt;
    }
  }
  return credentials_;
}

std::string resolve_region(const std::string& configured, const std::string& from_resource) {
  if (!configured.empty()) return configured;
  if (!from_resource.empty()) return from_resource;
  if (std::optional<std::string> region = aws::load_region()) return *region;
  return "us-east-1";
}

std::string fifo_id(std::string_view value) {
  const bool fits = !value.empty() && value.size() <= 128 &&
                    std::all_of(value.begin(), value.end(), [](char c) { return c > ' ' && c < 0x7f; });
  return fits ? std::string(value) : aws::hex_sha256(value);
}

bool retryable_error_code(std::string_view code) {
  static constexpr std::array<std::string_view, 12> kRetryable = {
      "Throttling", "ThrottlingException", "ThrottledException", "RequestThrottled", "RequestLimitExceeded",
      "TooManyRequestsException", "KmsThrottled", "KMSThrottlingException", "InternalError", "InternalFailure",
      "ServiceUnavailable", "RequestTimeout"};
  return std::find(kRetryable.begin(), kRetryable.end(), code) != kRetryable.end();
}

std::vector<DeliveryResult> all(std::size_t n, const DeliveryResult& result) { return std::vector<DeliveryResult>(n, result); }

}  // namespace deviceshadow::notify::aws_target
