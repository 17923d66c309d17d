// The webhook target (docs/notifications.md): an HTTP POST per event, many at once on one
// libcurl multi handle, whose connection cache keeps connections alive between events.
#include "deviceshadow/timestamp.hpp"
#include "notify/event.hpp"
#include "notify/target.hpp"

#include <curl/curl.h>

#include <memory>
#include <utility>
#include <mutex>
#include <vector>

namespace deviceshadow::notify {
namespace {

std::size_t keep_body(char* data, std::size_t size, std::size_t n, void* out) {
  auto* body = static_cast<std::string*>(out);
  if (body->size() < 512) body->append(data, std::min<std::size_t>(size * n, 512 - body->size()));  // for errors
  return size * n;
}

// 2xx is delivered; 408, 429, 5xx and failures to connect or to answer in time are retried;
// any other answer is final.
DeliveryResult classify(CURLcode rc, long status, const std::string& response) {
  if (rc != CURLE_OK) return {DeliveryResult::Outcome::retry, std::string("webhook: ") + curl_easy_strerror(rc)};
  if (status >= 200 && status < 300) return {};
  const bool retry = status == 408 || status == 429 || status >= 500;
  return {retry ? DeliveryResult::Outcome::retry : DeliveryResult::Outcome::reject,
          "webhook: HTTP " + std::to_string(status) + (response.empty() ? "" : ": " + response)};
}

class Webhook final : public Target {
 public:
  explicit Webhook(WebhookTarget target) : target_(std::move(target)) {
    static std::once_flag initialized;
    std::call_once(initialized, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
    multi_ = curl_multi_init();
    headers_ = curl_slist_append(headers_, "Content-Type: application/cloudevents+json");
    headers_ = curl_slist_append(headers_, "Expect:");  // no 100-continue round trip
    for (const auto& [name, value] : target_.headers) headers_ = curl_slist_append(headers_, (name + ": " + value).c_str());
  }

  ~Webhook() override {
    for (auto& transfer : in_flight_) {
      curl_multi_remove_handle(multi_, transfer->handle);
      curl_easy_cleanup(transfer->handle);
      curl_slist_free_all(transfer->signed_headers);
    }
    for (CURL* h : idle_) curl_easy_cleanup(h);
    curl_multi_cleanup(multi_);
    curl_slist_free_all(headers_);
  }

  void start(std::uint64_t tag, const Delivery& d) override {
    auto transfer = std::make_unique<Transfer>();
    transfer->tag = tag;
    transfer->handle = acquire();
    CURL* h = transfer->handle;
    if (!h) {
      refused_.emplace_back(tag, DeliveryResult{DeliveryResult::Outcome::retry, "webhook: out of memory"});
      return;
    }
    if (!target_.secret.empty()) {  // the fixed headers and this event's signature
      for (curl_slist* fixed = headers_; fixed; fixed = fixed->next) {
        transfer->signed_headers = curl_slist_append(transfer->signed_headers, fixed->data);
      }
      const std::int64_t t = now().unix_nanos() / 1'000'000'000;
      const std::string signature = "X-Shadow-Signature: " + webhook_signature(target_.secret, t, d.body);
      transfer->signed_headers = curl_slist_append(transfer->signed_headers, signature.c_str());
    }
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, transfer->signed_headers ? transfer->signed_headers : headers_);
    curl_easy_setopt(h, CURLOPT_POSTFIELDS, d.body.data());
    curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(d.body.size()));
    curl_easy_setopt(h, CURLOPT_WRITEDATA, &transfer->response);
    curl_easy_setopt(h, CURLOPT_PRIVATE, transfer.get());
    if (const CURLMcode rc = curl_multi_add_handle(multi_, h); rc != CURLM_OK) {
      curl_slist_free_all(transfer->signed_headers);
      curl_easy_cleanup(h);
      refused_.emplace_back(tag, DeliveryResult{DeliveryResult::Outcome::retry, std::string("webhook: ") + curl_multi_strerror(rc)});
      return;
    }
    in_flight_.push_back(std::move(transfer));
  }

  void run(std::chrono::milliseconds timeout, const Done& done) override {
    if (!refused_.empty()) {
      for (auto& [tag, result] : std::exchange(refused_, {})) done(tag, std::move(result));
      return;
    }
    int running = 0;
    curl_multi_perform(multi_, &running);
    if (!report(done)) {
      curl_multi_poll(multi_, nullptr, 0, static_cast<int>(timeout.count()), nullptr);
      curl_multi_perform(multi_, &running);
      report(done);
    }
  }

  void wake() override { curl_multi_wakeup(multi_); }

 private:
  struct Transfer {
    std::uint64_t tag = 0;
    CURL* handle = nullptr;
    curl_slist* signed_headers = nullptr;
    std::string response;
  };

  // Reports the finished transfers; returns whether there was one.
  bool report(const Done& done) {
    bool any = false;
    int left = 0;
    while (CURLMsg* message = curl_multi_info_read(multi_, &left)) {
      if (message->msg != CURLMSG_DONE) continue;
      CURL* h = message->easy_handle;
      const CURLcode rc = message->data.result;
      Transfer* transfer = nullptr;
      curl_easy_getinfo(h, CURLINFO_PRIVATE, &transfer);
      long status = 0;
      curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
      curl_multi_remove_handle(multi_, h);
      DeliveryResult result = classify(rc, status, transfer->response);
      if (rc == CURLE_OK) {
        idle_.push_back(h);
      } else {
        curl_easy_cleanup(h);  // the connection may be in any state
      }
      const std::uint64_t tag = transfer->tag;
      curl_slist_free_all(transfer->signed_headers);
      std::erase_if(in_flight_, [&](const auto& t) { return t.get() == transfer; });
      done(tag, std::move(result));
      any = true;
    }
    return any;
  }

  CURL* acquire() {
    if (!idle_.empty()) {
      CURL* h = idle_.back();
      idle_.pop_back();
      return h;
    }
    CURL* h = curl_easy_init();
    if (!h) return nullptr;
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

  const WebhookTarget target_;
  CURLM* multi_ = nullptr;
  curl_slist* headers_ = nullptr;  // the fixed ones
  std::vector<CURL*> idle_;
  std::vector<std::unique_ptr<Transfer>> in_flight_;
  std::vector<std::pair<std::uint64_t, DeliveryResult>> refused_;  // could not start; reported by run()
};

}  // namespace

std::unique_ptr<Target> make_webhook_target(const WebhookTarget& target) { return std::make_unique<Webhook>(target); }

}  // namespace deviceshadow::notify
