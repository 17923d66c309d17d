// Where events go: a Target delivers CloudEvents to one registration's destination. One file
// per type under targets/.
#pragma once

#include "notify/registration.hpp"

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
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
    rebuild,  // built larger than the destination takes (learnt since): build it again and send it, not an attempt
  };
  Outcome outcome = Outcome::delivered;
  std::string error;  // why it failed, for the dead letter's lastError and the logs
};

// Delivery is asynchronous, so that a few threads keep many registrations' deliveries in
// flight: start() begins one and returns at once; run() drives those in progress and reports
// each outcome exactly once. start() and run() are called from one thread at a time; wake()
// from any thread. The dispatcher calls run() with a zero timeout, when ready_fd() polls
// readable and at least every DispatcherOptions::poll while deliveries are in flight: then it
// must not wait on the network.
class Target {
 public:
  using Done = std::function<void(std::uint64_t tag, DeliveryResult result)>;
  virtual ~Target() = default;
  // Begins delivering; the delivery's strings must stay valid until its outcome is reported.
  virtual void start(std::uint64_t tag, const Delivery& delivery) = 0;
  // Waits up to `timeout` (less when wake() is called) for deliveries to finish, and reports
  // the finished ones through `done`.
  virtual void run(std::chrono::milliseconds timeout, const Done& done) = 0;
  // A descriptor that polls readable when run() has work: an outcome to report, I/O to go on
  // with, a wake(); run() consumes what made it readable. -1: none (run() is then called only
  // every `poll` while deliveries are in flight, and when the dispatcher has work for it).
  virtual int ready_fd() const { return -1; }
  // The next moment run() has something to do without its descriptor becoming ready (a
  // delivery's time limit, a retry of a connection): the dispatcher runs it then, if sooner
  // than `poll`. nullopt: none.
  virtual std::optional<std::chrono::steady_clock::time_point> next_deadline() const { return std::nullopt; }
  // Whether it still works on something it was given (a call being abandoned): a stopping
  // worker keeps calling run() until it is not.
  virtual bool busy() const { return false; }
  // Makes a run() in progress return early.
  virtual void wake() = 0;
  // The worker is stopping: a run() in progress returns as soon as it can, abandoning what is in
  // flight (never waiting on the network), and no start() follows. Outcomes not reported are
  // delivered again by the registration's next worker. Called from any thread.
  virtual void abandon() { wake(); }
  // The largest event the destination accepts; a larger one is sent truncated. Called by the
  // thread that calls start() (a target may ask its destination once, blocking).
  virtual std::size_t max_event_bytes() const { return SIZE_MAX; }
};

// An eventfd for a target's ready_fd(): readable from signal() until drain(). Throws
// std::system_error when no descriptor is left.
class ReadySignal {
 public:
  ReadySignal();
  ~ReadySignal();
  ReadySignal(const ReadySignal&) = delete;
  ReadySignal& operator=(const ReadySignal&) = delete;
  int fd() const { return fd_; }
  void signal();
  void drain();
  // Waits until it is readable, at most `timeout`.
  void wait(std::chrono::milliseconds timeout);

 private:
  int fd_;
};

// Delivers one event and waits for its outcome, at most `limit` (for tests and tools).
DeliveryResult deliver_now(Target& target, const Delivery& delivery,
                           std::chrono::milliseconds limit = std::chrono::seconds(60));

// Webhook: POST with Content-Type application/cloudevents+json, the registration's headers,
// X-Shadow-Signature when it has a secret; keep-alive connections. 2xx is delivered; 408, 429,
// 5xx, a connection failure or the timeout is retried; any other status is rejected.
std::unique_ptr<Target> make_webhook_target(const WebhookTarget& target);

// SQS: SendMessageBatch (AWS JSON protocol) of up to ten deliveries started together, with
// String message attributes thing, name and type; on a FIFO queue (URL ending ".fifo")
// MessageGroupId "{thing}#{name}" and MessageDeduplicationId the event id, each replaced by its
// SHA-256 in hex when longer than 128 characters or holding a space or non-ASCII character.
// Entries the queue refuses are reported one by one (a sender fault is rejected, other
// failures are retried); connection failures, throttling and 5xx are retried, any other error
// of the whole call is rejected. Events are truncated beyond the queue's MaximumMessageSize
// (read once; 256 KiB until known) less 1 KiB for the attributes.
std::unique_ptr<Target> make_sqs_target(const SqsTarget& target);

// SNS: Publish, or PublishBatch for several deliveries started together (query protocol),
// with the same attributes and FIFO ids as SQS on a topic whose ARN ends ".fifo"; the same
// outcomes; events over 255 KiB are truncated.
std::unique_ptr<Target> make_sns_target(const SnsTarget& target);

// MQTT: PUBLISH to the topic made from the template ({thing}, {name}, {section}: "reported",
// "desired" or "both", {type}: "updated" or "deleted"; '/', '+', '#', '%' and NUL in a name are
// percent-encoded) over one connection per broker and credentials, shared by the targets that
// use it and reconnected with backoff (1 s doubling to 30 s). QoS 1 is delivered on PUBACK,
// QoS 0 once written; no answer within 10 s, or no connection, is retried.
std::unique_ptr<Target> make_mqtt_target(const MqttTarget& target);

}  // namespace deviceshadow::notify
