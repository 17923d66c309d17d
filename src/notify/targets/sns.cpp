// The SNS target (docs/notifications.md): Publish for one event, PublishBatch for up to ten of
// the deliveries started together, over the query protocol (form-encoded requests, XML
// answers), with message attributes thing, name and type; on a FIFO topic (ARN ending ".fifo")
// the group is the shadow and the deduplication id the event id.
#include "aws/signed_post.hpp"
#include "notify/target.hpp"
#include "notify/targets/aws_target.hpp"

#include <pugixml.hpp>

namespace deviceshadow::notify {
namespace {

using Outcome = DeliveryResult::Outcome;
using aws_target::BatchingTarget;
using aws_target::kAttributeAllowance;

constexpr std::size_t kMaxMessage = 256 * 1024;  // a message, and a whole batch

// The ARN's region: arn:aws:sns:REGION:ACCOUNT:NAME.
std::string region_of_topic(const std::string& arn) {
  std::size_t start = 0;
  for (int field = 0; field < 3; ++field) {
    start = arn.find(':', start);
    if (start == std::string::npos) return "";
    ++start;
  }
  return arn.substr(start, arn.find(':', start) - start);
}

// application/x-www-form-urlencoded as AWS signs it: RFC 3986 unreserved characters stay.
void append_form(std::string& out, std::string_view name, std::string_view value) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  auto encode = [&](std::string_view s) {
    for (unsigned char c : s) {
      if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
        out += static_cast<char>(c);
      } else {
        out += '%';
        out += kHex[c >> 4];
        out += kHex[c & 15];
      }
    }
  };
  if (!out.empty()) out += '&';
  encode(name);
  out += '=';
  encode(value);
}

class Sns final : public BatchingTarget {
 public:
  explicit Sns(const SnsTarget& target)
      : BatchingTarget(10, kMaxMessage, kAttributeAllowance),
        topic_arn_(target.topic_arn),
        fifo_(topic_arn_.size() >= 5 && topic_arn_.substr(topic_arn_.size() - 5) == ".fifo"),
        http_([&] {
          const std::string region = aws_target::resolve_region(target.region, region_of_topic(target.topic_arn));
          aws::SignedPostOptions o{
              target.endpoint.empty() ? "https://sns." + region + ".amazonaws.com" : target.endpoint, region, "sns"};
          o.abort = abandoned();
          return o;
        }()) {}

  ~Sns() override { end_calls(); }

  std::size_t max_event_bytes() const override { return kMaxMessage - kAttributeAllowance; }

 private:
  std::vector<DeliveryResult> send(std::span<const Item> batch) override {
    std::string error;
    std::optional<aws::Credentials> credentials = credentials_.get(error);
    if (!credentials) return aws_target::all(batch.size(), {Outcome::retry, "sns: " + error});

    const bool single = batch.size() == 1;
    std::string form;
    append_form(form, "Action", single ? "Publish" : "PublishBatch");
    append_form(form, "Version", "2010-03-31");
    append_form(form, "TopicArn", topic_arn_);
    for (std::size_t i = 0; i < batch.size(); ++i) {
      const Delivery& d = batch[i].delivery;
      const std::string prefix = single ? "" : "PublishBatchRequestEntries.member." + std::to_string(i + 1) + ".";
      if (!single) append_form(form, prefix + "Id", std::to_string(i));
      append_form(form, prefix + "Message", d.body);
      int n = 0;
      for (const auto& [name, value] : {std::pair{"thing", d.thing}, {"name", d.name}, {"type", d.type}}) {
        const std::string entry = prefix + "MessageAttributes.entry." + std::to_string(++n) + ".";
        append_form(form, entry + "Name", name);
        append_form(form, entry + "Value.DataType", "String");
        append_form(form, entry + "Value.StringValue", value);
      }
      if (fifo_) {
        append_form(form, prefix + "MessageGroupId", aws_target::fifo_id(std::string(d.thing) + '#' + std::string(d.name)));
        append_form(form, prefix + "MessageDeduplicationId", aws_target::fifo_id(d.id));
      }
    }
    const aws::PostAnswer answer =
        http_.post({{"Content-Type", "application/x-www-form-urlencoded; charset=utf-8"}}, std::move(form), *credentials);
    if (!answer.transport_error.empty()) return aws_target::all(batch.size(), {Outcome::retry, "sns: " + answer.transport_error});

    pugi::xml_document xml;
    const bool readable = xml.load_buffer(answer.body.data(), answer.body.size());
    if (answer.status != 200) {
      const DeliveryResult failure = call_failure(answer.status, xml);
      credentials_.failed(failure.error);
      return aws_target::all(batch.size(), failure);
    }
    if (!readable) return aws_target::all(batch.size(), {Outcome::retry, "sns: unreadable answer"});
    if (single) {
      if (xml.child("PublishResponse").child("PublishResult").child("MessageId")) return {DeliveryResult{}};
      return {DeliveryResult{Outcome::retry, "sns: Publish answered without a MessageId"}};
    }
    // Entries named in neither list have no known outcome: retried.
    std::vector<DeliveryResult> results =
        aws_target::all(batch.size(), {Outcome::retry, "sns: PublishBatch did not report the entry"});
    const pugi::xml_node result = xml.child("PublishBatchResponse").child("PublishBatchResult");
    auto index = [&](const pugi::xml_node& member) -> std::optional<std::size_t> {
      const std::string id = member.child_value("Id");
      if (id.empty() || id.size() > 2 || id.find_first_not_of("0123456789") != std::string::npos) return std::nullopt;
      const std::size_t i = std::stoul(id);
      return i < batch.size() ? std::optional(i) : std::nullopt;
    };
    for (const pugi::xml_node& member : result.child("Successful").children("member")) {
      if (auto i = index(member)) results[*i] = {};
    }
    for (const pugi::xml_node& member : result.child("Failed").children("member")) {
      const auto i = index(member);
      if (!i) continue;
      const std::string code = member.child_value("Code");
      const bool sender_fault = std::string_view(member.child_value("SenderFault")) == "true";
      const bool retry = !sender_fault || aws_target::retryable_error_code(code);
      results[*i] = {retry ? Outcome::retry : Outcome::reject, "sns: " + code + ": " + member.child_value("Message")};
    }
    return results;
  }

  // Throttling and 5xx are retried; any other error (no such topic, access denied, a
  // malformed request) is final.
  static DeliveryResult call_failure(long status, const pugi::xml_document& xml) {
    const pugi::xml_node error = xml.child("ErrorResponse").child("Error");
    const std::string code = error.child_value("Code");
    const std::string message = error.child_value("Message");
    const bool retry = status == 429 || status >= 500 || aws_target::retryable_error_code(code);
    return {retry ? Outcome::retry : Outcome::reject,
            "sns: HTTP " + std::to_string(status) + (code.empty() ? "" : " " + code) +
                (message.empty() ? "" : ": " + message)};
  }

  const std::string topic_arn_;
  const bool fifo_;
  aws_target::CredentialSource credentials_;
  aws::SignedPost http_;
};

}  // namespace

std::unique_ptr<Target> make_sns_target(const SnsTarget& target) { return std::make_unique<Sns>(target); }

}  // namespace deviceshadow::notify
