// What the SQS and SNS targets share: deliveries started together go out as one batch call,
// made by the sender's thread inside run(); credentials from the standard AWS chain; the FIFO
// group and deduplication ids.
#pragma once

#include "aws/sigv4.hpp"
#include "notify/target.hpp"

#include <atomic>
#include <chrono>
#include <cstddef>
#include <deque>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace deviceshadow::notify::aws_target {

// Bytes of a message counted for its attributes besides the event: the thing (at most 512
// bytes), name, type and their names.
inline constexpr std::size_t kAttributeAllowance = 1024;

// Batches the deliveries waiting when run() is called: up to `max_entries` per call and
// `max_batch_bytes` of bodies (each counted with `entry_overhead` for its attributes), at
// least one. One call at a time, made on a thread of its own that lives as long as the call
// (copies of the deliveries go with it), so that run() never waits on the network; ready_fd()
// tells when it is over. Subclasses call end_calls() first in their destructors.
class BatchingTarget : public Target {
 public:
  struct Item {
    std::uint64_t tag;
    Delivery delivery;
  };

  void start(std::uint64_t tag, const Delivery& delivery) final { waiting_.push_back({tag, delivery}); }
  void run(std::chrono::milliseconds timeout, const Done& done) final;
  int ready_fd() const final { return ready_.fd(); }
  bool busy() const final { return call_ != nullptr; }
  void wake() final { ready_.signal(); }
  // Also aborts the call in progress (SignedPostOptions::abort is abandoned()).
  void abandon() final;

 protected:
  BatchingTarget(std::size_t max_entries, std::size_t max_batch_bytes, std::size_t entry_overhead);
  ~BatchingTarget() override;
  // Sends one batch and waits for the answer; returns one result per item, in order. Called
  // on the call's thread, one call at a time.
  virtual std::vector<DeliveryResult> send(std::span<const Item> batch) = 0;
  // Set by abandon(): the subclass's HTTP calls give up when it is (SignedPostOptions::abort).
  const std::atomic<bool>* abandoned() const noexcept { return &abandoned_; }
  // Aborts the call in progress and waits for its thread to end.
  void end_calls();

 private:
  struct Call;
  void report(const Done& done);  // the results of a call that is over

  const std::size_t max_entries_;
  const std::size_t max_batch_bytes_;
  const std::size_t entry_overhead_;
  std::deque<Item> waiting_;
  std::unique_ptr<Call> call_;  // the call in progress or not reported yet
  ReadySignal ready_;           // a call is over, or wake()
  std::atomic<bool> abandoned_{false};
};

// The AWS credentials, loaded on first use and again every kReload (temporary credentials in a
// file that something renews); while none are found, each call tries again (a credentials file
// may appear) and returns nullopt with `error` set. A reload that fails keeps the last ones.
class CredentialSource {
 public:
  static constexpr std::chrono::minutes kReload{5};
  std::optional<aws::Credentials> get(std::string& error);
  // A call failed with `error`: one refused for expired credentials has them read again at the
  // next get().
  void failed(std::string_view error);

 private:
  std::optional<aws::Credentials> credentials_;
  std::chrono::steady_clock::time_point loaded_;
};

// The region to sign for: `configured`, else `from_resource` (parsed from the queue URL or
// topic ARN), else the AWS environment's, else us-east-1.
std::string resolve_region(const std::string& configured, const std::string& from_resource);

// Ids for FIFO queues and topics, which accept at most 128 characters from printable ASCII
// without the space: the value itself when it fits, else its SHA-256 in hex (so that a shadow
// always maps to the same group and a redelivery to the same deduplication id).
std::string fifo_id(std::string_view value);

// Throttling, server-side and expired-credential error codes that a later attempt may pass
// (credentials are reloaded, CredentialSource::kReload).
bool retryable_error_code(std::string_view code);

// A failed call's result for every item of a batch.
std::vector<DeliveryResult> all(std::size_t n, const DeliveryResult& result);

}  // namespace deviceshadow::notify::aws_target
