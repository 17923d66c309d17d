#include "aws/client.hpp"

#include "deviceshadow/backoff.hpp"

#include "aws/signed_post.hpp"
#include "deviceshadow/error.hpp"

#include <memory>
#include <mutex>
#include <optional>
#include <vector>

namespace deviceshadow::aws {

AwsError::AwsError(std::string type, std::string message, long status, std::string request_id, json::value body,
                   bool outcome_unknown)
    : std::runtime_error(type + ": " + message + (request_id.empty() ? "" : " (request " + request_id + ")")),
      type_(std::move(type)),
      status_(status),
      request_id_(std::move(request_id)),
      body_(std::move(body)),
      outcome_unknown_(outcome_unknown) {}

bool AwsError::throttled() const {
  return status_ == 429 || type_ == "ProvisionedThroughputExceededException" || type_ == "ThrottlingException" ||
         type_ == "RequestLimitExceeded" || type_ == "Throttling";
}

bool AwsError::retryable() const { return throttled() || status_ >= 500 || status_ == 0; }

// A pool of signed-POST connections (keep-alive handles), one per call in flight.
struct JsonClient::Impl {
  std::mutex mutex;
  std::vector<std::unique_ptr<SignedPost>> idle;
  Credentials credentials;

  std::unique_ptr<SignedPost> acquire(const ClientOptions& options) {
    {
      std::lock_guard lock(mutex);
      if (!idle.empty()) {
        std::unique_ptr<SignedPost> post = std::move(idle.back());
        idle.pop_back();
        return post;
      }
    }
    return std::make_unique<SignedPost>(
        SignedPostOptions{options.endpoint, options.region, options.service, options.request_timeout, options.connect_timeout});
  }
  void release(std::unique_ptr<SignedPost> post) {
    std::lock_guard lock(mutex);
    idle.push_back(std::move(post));
  }
};

JsonClient::JsonClient(ClientOptions options, Credentials credentials)
    : options_(std::move(options)), impl_(std::make_unique<Impl>()) {
  impl_->credentials = std::move(credentials);
}

JsonClient::~JsonClient() = default;

json::value JsonClient::call(std::string_view operation, const std::string& body, bool idempotent, int attempts) {
  const std::string target = options_.target_prefix + std::string(operation);
  const int max_attempts = attempts > 0 ? attempts : options_.max_attempts;
  for (int attempt = 1;; ++attempt) {
    std::unique_ptr<SignedPost> post = impl_->acquire(options_);
    const PostAnswer answer =
        post->post({{"Content-Type", "application/x-amz-json-1.0"}, {"X-Amz-Target", target}}, body, impl_->credentials);
    impl_->release(std::move(post));

    std::optional<AwsError> failure;
    if (!answer.transport_error.empty()) {
      failure.emplace("ConnectionError", answer.transport_error, 0, "", json::value(), answer.maybe_sent);
    } else {
      json::value parsed;
      try {
        parsed = answer.body.empty() ? json::value(json::object()) : parse_json(answer.body, 200);
      } catch (const Error&) {
        parsed = json::object();
      }
      if (answer.status == 200) return parsed;
      std::string type = "UnknownError";
      std::string message = "HTTP " + std::to_string(answer.status);
      if (parsed.is_object()) {
        if (const json::value* t = parsed.get_object().if_contains("__type"); t && t->is_string()) {
          std::string_view full = t->get_string();
          type = std::string(full.substr(full.find('#') == std::string_view::npos ? 0 : full.find('#') + 1));
        }
        for (const char* key : {"message", "Message"}) {
          if (const json::value* m = parsed.get_object().if_contains(key); m && m->is_string()) message = m->get_string();
        }
      }
      // A 5xx answer comes from past the point where the request may have been applied (by the
      // service, or behind a proxy's 502 or 504): its outcome is unknown.
      failure.emplace(type, message, answer.status, answer.request_id, std::move(parsed), answer.status >= 500);
    }
    bool retry = failure->retryable() && attempt < max_attempts && (idempotent || !failure->outcome_unknown());
    if (!retry) throw *failure;
    sleep_before_retry(attempt, options_.backoff_base, options_.backoff_max);
  }
}

}  // namespace deviceshadow::aws
