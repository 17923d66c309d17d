// The SQS target (docs/notifications.md): SendMessageBatch over the AWS JSON protocol, up to
// ten of the deliveries started together per call, with message attributes thing, name and
// type; on a FIFO queue (URL ending ".fifo") the group is the shadow and the deduplication id
// the event id.
#include "aws/signed_post.hpp"
#include "deviceshadow/error.hpp"
#include "deviceshadow/json.hpp"
#include "notify/target.hpp"
#include "notify/targets/aws_target.hpp"

#include <atomic>
#include <chrono>

namespace deviceshadow::notify {
namespace {

using Outcome = DeliveryResult::Outcome;
using aws_target::BatchingTarget;
using aws_target::kAttributeAllowance;

constexpr std::size_t kDefaultMaxMessage = 256 * 1024;
constexpr auto kAttributeRefresh = std::chrono::minutes(1);  // after a failed GetQueueAttributes

// "us-east-1" from https://sqs.us-east-1.amazonaws.com/… or https://us-east-1.queue.amazonaws.com/…
std::string region_of_queue(const std::string& queue_url) {
  std::string host = aws::origin_of(queue_url);
  host = host.substr(host.find("://") + 3);
  if (host.size() < 14 || host.substr(host.size() - 14) != ".amazonaws.com") return "";
  if (host.rfind("sqs.", 0) == 0) return host.substr(4, host.find('.', 4) - 4);
  if (std::size_t q = host.find(".queue."); q != std::string::npos) return host.substr(0, q);
  return "";
}

std::string endpoint_for(const SqsTarget& t, const std::string& region) {
  if (!t.endpoint.empty()) return t.endpoint;
  if (!region_of_queue(t.queue_url).empty()) return "https://sqs." + region + ".amazonaws.com";
  return aws::origin_of(t.queue_url);  // an emulator's queue URL names the emulator
}

bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

std::string string_of(const json::object& o, std::string_view key) {
  const json::value* v = o.if_contains(key);
  return v && v->is_string() ? std::string(v->get_string()) : std::string();
}

void append_attribute(std::string& out, std::string_view name, std::string_view value) {
  append_json_string(out, name);
  out += R"(:{"DataType":"String","StringValue":)";
  append_json_string(out, value);
  out += '}';
}

class Sqs final : public BatchingTarget {
 public:
  explicit Sqs(const SqsTarget& target)
      : BatchingTarget(10, kDefaultMaxMessage, kAttributeAllowance),
        queue_url_(target.queue_url),
        fifo_(ends_with(target.queue_url, ".fifo")),
        http_([&] {
          const std::string region = aws_target::resolve_region(target.region, region_of_queue(target.queue_url));
          aws::SignedPostOptions o{endpoint_for(target, region), region, "sqs"};
          o.abort = abandoned();
          return o;
        }()) {}

  ~Sqs() override { end_calls(); }

  // The queue's MaximumMessageSize (256 KiB until it is known: the first call reads it) less
  // room for the attributes.
  std::size_t max_event_bytes() const override { return event_bytes(max_message_.load()); }

 private:
  static std::size_t event_bytes(std::size_t max_message) {
    const std::size_t max = max_message ? max_message : kDefaultMaxMessage;
    return max > 2 * kAttributeAllowance ? max - kAttributeAllowance : max / 2;
  }

  std::vector<DeliveryResult> send(std::span<const Item> batch) override {
    std::string error;
    std::optional<aws::Credentials> credentials = credentials_.get(error);
    if (!credentials) return aws_target::all(batch.size(), {Outcome::retry, "sqs: " + error});
    const auto now = std::chrono::steady_clock::now();
    if (!max_message_ && now >= next_attribute_read_) {
      next_attribute_read_ = now + kAttributeRefresh;
      max_message_ = read_max_message_size(*credentials).value_or(0);
    }
    // Built before the queue's limit was known and larger than it: built anew and sent again.
    std::vector<DeliveryResult> results(batch.size());
    std::vector<std::size_t> sent;  // the indexes in the call
    const std::size_t fits = event_bytes(max_message_);
    for (std::size_t i = 0; i < batch.size(); ++i) {
      if (batch[i].delivery.body.size() <= fits) {
        sent.push_back(i);
      } else {
        results[i] = {Outcome::rebuild, "sqs: the event was built larger than the queue's MaximumMessageSize allows"};
      }
    }
    if (sent.empty()) return results;

    std::string body = R"({"QueueUrl":)";
    append_json_string(body, queue_url_);
    body += R"(,"Entries":[)";
    for (std::size_t i = 0; i < batch.size(); ++i) {
      if (batch[i].delivery.body.size() > fits) continue;
      const Delivery& d = batch[i].delivery;
      body += body.back() == '[' ? R"({"Id":")" : R"(,{"Id":")";
      body += std::to_string(i);
      body += R"(","MessageBody":)";
      append_json_string(body, d.body);
      body += R"(,"MessageAttributes":{)";
      append_attribute(body, "thing", d.thing);
      body += ',';
      append_attribute(body, "name", d.name);
      body += ',';
      append_attribute(body, "type", d.type);
      body += '}';
      if (fifo_) {
        body += R"(,"MessageGroupId":)";
        append_json_string(body, aws_target::fifo_id(std::string(d.thing) + '#' + std::string(d.name)));
        body += R"(,"MessageDeduplicationId":)";
        append_json_string(body, aws_target::fifo_id(d.id));
      }
      body += '}';
    }
    body += "]}";

    const aws::PostAnswer answer = call("SendMessageBatch", std::move(body), *credentials);
    auto each_sent = [&](const DeliveryResult& result) {
      for (std::size_t i : sent) results[i] = result;
      return results;
    };
    if (std::optional<DeliveryResult> failed = call_failure(answer)) {
      credentials_.failed(failed->error);
      return each_sent(*failed);
    }

    // Entries named in neither list have no known outcome: retried.
    each_sent({Outcome::retry, "sqs: SendMessageBatch did not report the entry"});
    try {
      const json::object response = parse_json(answer.body).as_object();
      auto entries = [&](std::string_view key) -> const json::array* {
        const json::value* v = response.if_contains(key);
        return v && v->is_array() ? &v->get_array() : nullptr;
      };
      auto index = [&](const json::object& entry) -> std::optional<std::size_t> {
        const std::string id = string_of(entry, "Id");
        if (id.empty() || id.size() > 2 || id.find_first_not_of("0123456789") != std::string::npos) return std::nullopt;
        std::size_t i = std::stoul(id);
        return i < batch.size() ? std::optional(i) : std::nullopt;
      };
      if (const json::array* ok = entries("Successful")) {
        for (const json::value& e : *ok) {
          if (auto i = e.is_object() ? index(e.get_object()) : std::nullopt) results[*i] = {};
        }
      }
      if (const json::array* failed = entries("Failed")) {
        for (const json::value& e : *failed) {
          if (!e.is_object()) continue;
          const json::object& entry = e.get_object();
          const auto i = index(entry);
          if (!i) continue;
          const std::string code = string_of(entry, "Code");
          const json::value* sender = entry.if_contains("SenderFault");
          const bool sender_fault = sender && sender->is_bool() && sender->get_bool();
          const bool retry = !sender_fault || aws_target::retryable_error_code(code);
          results[*i] = {retry ? Outcome::retry : Outcome::reject, "sqs: " + code + ": " + string_of(entry, "Message")};
        }
      }
    } catch (const std::exception& e) {
      return each_sent({Outcome::retry, std::string("sqs: unreadable answer: ") + e.what()});
    }
    return results;
  }

  aws::PostAnswer call(std::string_view operation, std::string body, const aws::Credentials& credentials) const {
    return http_.post({{"Content-Type", "application/x-amz-json-1.0"},
                       {"X-Amz-Target", "AmazonSQS." + std::string(operation)}},
                      std::move(body), credentials);
  }

  // The outcome of a call that failed as a whole, or nullopt for a 200 answer. Connection
  // failures, throttling and 5xx are retried; any other error (no such queue, access denied,
  // a malformed request) is final.
  static std::optional<DeliveryResult> call_failure(const aws::PostAnswer& answer) {
    if (!answer.transport_error.empty()) return DeliveryResult{Outcome::retry, "sqs: " + answer.transport_error};
    if (answer.status == 200) return std::nullopt;
    std::string code;
    std::string message;
    try {
      const json::value parsed = parse_json(answer.body);
      if (parsed.is_object()) {
        const std::string type = string_of(parsed.get_object(), "__type");
        code = type.substr(type.find('#') == std::string::npos ? 0 : type.find('#') + 1);
        message = string_of(parsed.get_object(), "message");
        if (message.empty()) message = string_of(parsed.get_object(), "Message");
      }
    } catch (const std::exception&) {
      message = answer.body.substr(0, 200);
    }
    if (code.empty()) code = answer.query_error.substr(0, answer.query_error.find(';'));
    const bool retry = answer.status == 429 || answer.status >= 500 || aws_target::retryable_error_code(code);
    return DeliveryResult{retry ? Outcome::retry : Outcome::reject,
                          "sqs: HTTP " + std::to_string(answer.status) + (code.empty() ? "" : " " + code) +
                              (message.empty() ? "" : ": " + message)};
  }

  std::optional<std::size_t> read_max_message_size(const aws::Credentials& credentials) const {
    std::string body = R"({"QueueUrl":)";
    append_json_string(body, queue_url_);
    body += R"(,"AttributeNames":["MaximumMessageSize"]})";
    const aws::PostAnswer answer = call("GetQueueAttributes", std::move(body), credentials);
    if (call_failure(answer)) return std::nullopt;
    try {
      const json::value parsed = parse_json(answer.body);
      const json::value* attributes = parsed.is_object() ? parsed.get_object().if_contains("Attributes") : nullptr;
      if (!attributes || !attributes->is_object()) return std::nullopt;
      const std::string size = string_of(attributes->get_object(), "MaximumMessageSize");
      const unsigned long bytes = std::stoul(size);
      if (bytes == 0) return std::nullopt;
      return bytes;
    } catch (const std::exception&) {
      return std::nullopt;
    }
  }

  const std::string queue_url_;
  const bool fifo_;
  mutable aws_target::CredentialSource credentials_;
  mutable aws::SignedPost http_;
  std::atomic<std::size_t> max_message_{0};  // the queue's MaximumMessageSize; 0 until read
  std::chrono::steady_clock::time_point next_attribute_read_{};  // by the call's thread
};

}  // namespace

std::unique_ptr<Target> make_sqs_target(const SqsTarget& target) { return std::make_unique<Sqs>(target); }

}  // namespace deviceshadow::notify
