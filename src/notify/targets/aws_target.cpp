#include "notify/targets/aws_target.hpp"

#include "aws/credentials.hpp"

#include <algorithm>
#include <array>
#include <thread>

namespace deviceshadow::notify::aws_target {

struct BatchingTarget::Call {
  std::vector<std::string> strings;  // what the items' deliveries view
  std::vector<Item> items;
  std::vector<DeliveryResult> results;
  std::atomic<bool> over{false};
  std::thread thread;
};

BatchingTarget::BatchingTarget(std::size_t max_entries, std::size_t max_batch_bytes, std::size_t entry_overhead)
    : max_entries_(max_entries), max_batch_bytes_(max_batch_bytes), entry_overhead_(entry_overhead) {}

BatchingTarget::~BatchingTarget() { end_calls(); }  // the subclass's did already: send() is theirs

void BatchingTarget::run(std::chrono::milliseconds timeout, const Done& done) {
  if (!(call_ && call_->over) && (call_ || waiting_.empty() || abandoned_)) ready_.wait(timeout);
  ready_.drain();
  report(done);
  if (call_ || waiting_.empty() || abandoned_) return;
  std::size_t n = 0;
  std::size_t bytes = 0;
  while (n < waiting_.size() && n < max_entries_) {
    const std::size_t size = waiting_[n].delivery.body.size() + entry_overhead_;
    if (n > 0 && bytes + size > max_batch_bytes_) break;
    bytes += size;
    ++n;
  }
  auto call = std::make_unique<Call>();
  call->strings.reserve(5 * n);
  for (std::size_t i = 0; i < n; ++i) {
    const Delivery& d = waiting_[i].delivery;
    auto copy = [&](std::string_view v) { return std::string_view(call->strings.emplace_back(v)); };
    call->items.push_back({waiting_[i].tag, {copy(d.id), copy(d.type), copy(d.thing), copy(d.name), copy(d.body)}});
  }
  waiting_.erase(waiting_.begin(), waiting_.begin() + static_cast<std::ptrdiff_t>(n));
  try {
    call->thread = std::thread([this, c = call.get()] {
      try {
        c->results = send(c->items);
      } catch (const std::exception& e) {
        c->results = all(c->items.size(), {DeliveryResult::Outcome::retry, e.what()});
      }
      c->over = true;
      ready_.signal();
    });
  } catch (const std::system_error& e) {  // no thread for it now: tried again later
    for (const Item& item : call->items) done(item.tag, {DeliveryResult::Outcome::retry, e.what()});
    return;
  }
  call_ = std::move(call);
}

void BatchingTarget::report(const Done& done) {
  if (!call_ || !call_->over) return;
  call_->thread.join();
  std::unique_ptr<Call> call = std::move(call_);
  for (std::size_t i = 0; i < call->items.size(); ++i) {
    done(call->items[i].tag, i < call->results.size() ? std::move(call->results[i])
                                                      : DeliveryResult{DeliveryResult::Outcome::retry, "no result for the entry"});
  }
}

void BatchingTarget::abandon() {
  abandoned_ = true;
  wake();
}

void BatchingTarget::end_calls() {
  abandoned_ = true;
  if (call_ && call_->thread.joinable()) call_->thread.join();
  call_.reset();
}

std::optional<aws::Credentials> CredentialSource::get(std::string& error) {
  const auto now = std::chrono::steady_clock::now();
  if (!credentials_ || now - loaded_ >= kReload) {
    try {
      credentials_ = aws::load_credentials();
      loaded_ = now;
    } catch (const std::exception& e) {
      if (credentials_) return credentials_;  // the last ones, until a reload works
      error = std::string("no AWS credentials: ") + e.what();
      return std::nullopt;
    }
  }
  return credentials_;
}

void CredentialSource::failed(std::string_view error) {
  if (error.find("ExpiredToken") != std::string_view::npos || error.find("RequestExpired") != std::string_view::npos) {
    loaded_ = {};
  }
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
  static constexpr std::array<std::string_view, 15> kRetryable = {
      "Throttling", "ThrottlingException", "ThrottledException", "RequestThrottled", "RequestLimitExceeded",
      "TooManyRequestsException", "KmsThrottled", "KMSThrottlingException", "InternalError", "InternalFailure",
      "ServiceUnavailable", "RequestTimeout", "ExpiredToken", "ExpiredTokenException", "RequestExpired"};
  return std::find(kRetryable.begin(), kRetryable.end(), code) != kRetryable.end();
}

std::vector<DeliveryResult> all(std::size_t n, const DeliveryResult& result) { return std::vector<DeliveryResult>(n, result); }

}  // namespace deviceshadow::notify::aws_target
