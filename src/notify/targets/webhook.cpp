// The webhook target (SPEC §13): an HTTP POST per event over kept-alive connections.
#include "deviceshadow/timestamp.hpp"
#include "notify/event.hpp"
#include "notify/target.hpp"

#include <curl/curl.h>

#include <mutex>
#include <vector>

namespace deviceshadow::notify {
namespace {

std::size_t keep_body(char* data, std::size_t size, std::size_t n, void* out) {
  auto* body = static_cast<std::string*>(out);
  if (body->size() < 512) body->append(data, std::min<std::size_t>(size * n, 512 - body->size()));  // for errors
  return size * n;
}

class Webhook final : public Target {
 public:
  explicit Webhook(WebhookTarget target) : target_(std::move(target)) {
    static std::once_flag initialized;
    std::call_once(initialized, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
    headers_ = curl_slist_append(headers_, "Content-Type: application/cloudevents+json");
    headers_ = curl_slist_append(headers_, "Expect:");  // no 100-continue round trip
    for (const auto& [name, value] : target_.headers) headers_ = curl_slist_append(headers_, (name + ": " + value).c_str());
  }

  ~Webhook() override {
    for (CURL* h : idle_) curl_easy_cleanup(h);
    curl_slist_free_all(headers_);
  }

  DeliveryResult deliver(const Delivery& d) override {
    CURL* h = acquire();
    curl_slist* signed_headers = nullptr;  // the fixed ones and this request's signature
    if (!target_.secret.empty()) {
      for (curl_slist* fixed = headers_; fixed; fixed = fixed->next) signed_headers = curl_slist_append(signed_headers, fixed->data);
      const std::int64_t t = now().unix_nanos() / 1'000'000'000;
      const std::string signature = "X-Shadow-Signature: " + webhook_signature(target_.secret, t, d.body);
      signed_headers = curl_slist_append(signed_headers, signature.c_str());
    }
    std::string response;
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, signed_headers ? signed_headers : headers_);
    curl_easy_setopt(h, CURLOPT_POSTFIELDS, d.body.data());
    curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(d.body.size()));
    curl_easy_setopt(h, CURLOPT_WRITEDATA, &response);
    const CURLcode rc = curl_easy_perform(h);
    long status = 0;
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
    curl_slist_free_all(signed_headers);
    DeliveryResult result;
    if (rc != CURLE_OK) {
      result = {DeliveryResult::Outcome::retry, std::string("webhook: ") + curl_easy_strerror(rc)};
      curl_easy_cleanup(h);  // the connection may be in any state
    } else {
      if (status < 200 || status >= 300) {
        const bool retry = status == 408 || status == 429 || status >= 500;
        result = {retry ? DeliveryResult::Outcome::retry : DeliveryResult::Outcome::reject,
                  "webhook: HTTP " + std::to_string(status) + (response.empty() ? "" : ": " + response)};
      }
      release(h);
    }
    return result;
  }

 private:
  CURL* acquire() {
    {
      std::lock_guard lock(mutex_);
      if (!idle_.empty()) {
        CURL* h = idle_.back();
        idle_.pop_back();
        return h;
      }
    }
    CURL* h = curl_easy_init();
    curl_easy_setopt(h, CURLOPT_URL, target_.url.c_str());
    curl_easy_setopt(h, CURLOPT_POST, 1L);
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, static_cast<long>(target_.timeout.count()));
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, static_cast<long>(target_.timeout.count()));
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_FOLLOWLOCATION, 0L);  // a 3xx is an answer, not a new target
    curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(h, CURLOPT_TCP_NODELAY, 1L);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, keep_body);
    return h;
  }

  void release(CURL* h) {
    std::lock_guard lock(mutex_);
    idle_.push_back(h);
  }

  const WebhookTarget target_;
  curl_slist* headers_ = nullptr;  // the fixed ones
  std::mutex mutex_;
  std::vector<CURL*> idle_;
};

}  // namespace

std::unique_ptr<Target> make_webhook_target(const WebhookTarget& target) { return std::make_unique<Webhook>(target); }

}  // namespace deviceshadow::notify
