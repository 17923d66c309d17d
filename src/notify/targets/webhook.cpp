// The webhook target (docs/notifications.md), and its libcurl client (targets/webhook.hpp): an
// HTTP POST per event, many at once on one libcurl multi handle, whose connection cache keeps
// connections alive between events. The multi handle is driven by socket events
// (curl_multi_socket_action on an epoll set of this target's own), so libcurl touches only the
// transfers whose sockets are ready instead of polling every one on each pass.
#include "notify/targets/webhook.hpp"

#include "deviceshadow/timestamp.hpp"
#include "notify/event.hpp"
#include "notify/targets/http1.hpp"

#include <curl/curl.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <memory>
#include <optional>
#include <stdexcept>
#include <system_error>
#include <unordered_map>
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

// Failures to connect or to answer in time are retried; answers as webhook_answer says.
DeliveryResult classify(CURLcode rc, long status, const std::string& response) {
  if (rc != CURLE_OK) return {DeliveryResult::Outcome::retry, std::string("webhook: ") + curl_easy_strerror(rc)};
  return webhook_answer(status, response);
}

class CurlWebhook final : public Target {
 public:
  explicit CurlWebhook(WebhookTarget target) : target_(std::move(target)) {
    static std::once_flag initialized;
    std::call_once(initialized, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
    multi_ = curl_multi_init();
    epoll_ = ::epoll_create1(EPOLL_CLOEXEC);
    wake_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (!multi_ || epoll_ < 0 || wake_ < 0) {
      const int error = multi_ ? errno : ENOMEM;  // of the call that failed (too many open files)
      for (const int fd : {epoll_, wake_}) {
        if (fd >= 0) ::close(fd);
      }
      if (multi_) curl_multi_cleanup(multi_);
      throw std::system_error(error, std::generic_category(), "webhook: cannot set up its event loop");
    }
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.fd = wake_;
    ::epoll_ctl(epoll_, EPOLL_CTL_ADD, wake_, &ev);
    curl_multi_setopt(multi_, CURLMOPT_SOCKETFUNCTION, &CurlWebhook::on_socket);
    curl_multi_setopt(multi_, CURLMOPT_SOCKETDATA, this);
    curl_multi_setopt(multi_, CURLMOPT_TIMERFUNCTION, &CurlWebhook::on_timer);
    curl_multi_setopt(multi_, CURLMOPT_TIMERDATA, this);
    headers_ = curl_slist_append(headers_, "Content-Type: application/cloudevents+json");
    headers_ = curl_slist_append(headers_, "Expect:");  // no 100-continue round trip
    for (const auto& [name, value] : target_.headers) headers_ = curl_slist_append(headers_, (name + ": " + value).c_str());
  }

  ~CurlWebhook() override {
    for (auto& transfer : in_flight_) {
      curl_multi_remove_handle(multi_, transfer->handle);
      curl_easy_cleanup(transfer->handle);
      curl_slist_free_all(transfer->signed_headers);
    }
    for (CURL* h : idle_) curl_easy_cleanup(h);
    curl_multi_cleanup(multi_);  // closes the cached connections (through close_socket)
    curl_slist_free_all(headers_);
    ::close(wake_);
    ::close(epoll_);
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

  std::optional<std::chrono::steady_clock::time_point> next_deadline() const override { return timer_; }

  void run(std::chrono::milliseconds timeout, const Done& done) override {
    if (!refused_.empty()) {
      for (auto& [tag, result] : std::exchange(refused_, {})) done(tag, std::move(result));
      return;
    }
    run_timer();
    if (report(done)) return;
    if (timer_) {
      const auto until_timer = std::chrono::ceil<std::chrono::milliseconds>(*timer_ - Clock::now());
      timeout = std::clamp(until_timer, std::chrono::milliseconds(0), timeout);
    }
    epoll_event events[16];
    const int n = ::epoll_wait(epoll_, events, 16, static_cast<int>(timeout.count()));
    for (int i = 0; i < n; ++i) {
      const int fd = events[i].data.fd;
      if (fd == wake_) {
        std::uint64_t count;
        [[maybe_unused]] const auto got = ::read(wake_, &count, sizeof count);
        continue;
      }
      auto it = sockets_.find(fd);
      if (it == sockets_.end()) continue;
      if (!it->second.wanted) {  // an idle connection stirred (closed, most likely): libcurl
        unwatch(it);             // finds out when it next takes it from its cache
        continue;
      }
      int bits = 0;
      if (events[i].events & (EPOLLIN | EPOLLHUP | EPOLLERR)) bits |= CURL_CSELECT_IN;
      if (events[i].events & EPOLLOUT) bits |= CURL_CSELECT_OUT;
      if (events[i].events & EPOLLERR) bits |= CURL_CSELECT_ERR;
      int running = 0;
      curl_multi_socket_action(multi_, fd, bits, &running);
    }
    run_timer();
    report(done);
  }

  int ready_fd() const override { return epoll_; }

  void wake() override {
    const std::uint64_t one = 1;
    [[maybe_unused]] const auto put = ::write(wake_, &one, sizeof one);
  }

 private:
  using Clock = std::chrono::steady_clock;

  // A socket libcurl uses, and what this target's epoll set watches on it. Sockets libcurl
  // opened through open_socket (its connections) stay in the set, watched for input only,
  // while they wait in libcurl's connection cache, which saves two epoll_ctl calls per
  // delivery; close_socket tells when they go. Any other socket leaves the set as soon as
  // libcurl lets it go, since it may be closed without a word.
  struct Socket {
    std::uint32_t watched = 0;  // the epoll events registered; 0: not in the set
    bool wanted = false;        // libcurl waits on it
    bool own = false;           // opened by open_socket
  };

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

  static int on_socket(CURL*, curl_socket_t fd, int what, void* self, void*) {
    auto& target = *static_cast<CurlWebhook*>(self);
    auto it = target.sockets_.try_emplace(fd).first;
    Socket& socket = it->second;
    if (what == CURL_POLL_REMOVE) {
      socket.wanted = false;
      if (!socket.own) {
        target.unwatch(it);
        target.sockets_.erase(it);
      } else if (socket.watched != EPOLLIN) {
        target.watch(fd, socket, EPOLLIN);
      }
      return 0;
    }
    socket.wanted = true;
    target.watch(fd, socket, (what & CURL_POLL_IN ? EPOLLIN : 0u) | (what & CURL_POLL_OUT ? EPOLLOUT : 0u));
    return 0;
  }

  static int on_timer(CURLM*, long ms, void* self) {
    auto& target = *static_cast<CurlWebhook*>(self);
    if (ms < 0) {
      target.timer_.reset();
    } else {
      target.timer_ = Clock::now() + std::chrono::milliseconds(ms);
    }
    return 0;
  }

  static curl_socket_t open_socket(void* self, curlsocktype, curl_sockaddr* address) {
    const int fd = ::socket(address->family, address->socktype | SOCK_CLOEXEC, address->protocol);
    if (fd >= 0) static_cast<CurlWebhook*>(self)->sockets_[fd].own = true;
    return fd >= 0 ? fd : CURL_SOCKET_BAD;
  }

  static int close_socket(void* self, curl_socket_t fd) {
    auto& target = *static_cast<CurlWebhook*>(self);
    if (auto it = target.sockets_.find(fd); it != target.sockets_.end()) {
      target.unwatch(it);
      target.sockets_.erase(it);
    }
    return ::close(fd);
  }

  void watch(int fd, Socket& socket, std::uint32_t events) {
    if (socket.watched == events) return;
    epoll_event ev{};
    ev.events = events;
    ev.data.fd = fd;
    if (::epoll_ctl(epoll_, socket.watched ? EPOLL_CTL_MOD : EPOLL_CTL_ADD, fd, &ev) == 0) socket.watched = events;
  }

  void unwatch(std::unordered_map<int, Socket>::iterator it) {
    if (it->second.watched) ::epoll_ctl(epoll_, EPOLL_CTL_DEL, it->first, nullptr);
    it->second.watched = 0;
  }

  // Lets libcurl do what was due at its timer: start added transfers, time out slow ones.
  void run_timer() {
    if (!timer_ || *timer_ > Clock::now()) return;
    timer_.reset();  // libcurl sets the next one
    int running = 0;
    curl_multi_socket_action(multi_, CURL_SOCKET_TIMEOUT, 0, &running);
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
    curl_easy_setopt(h, CURLOPT_OPENSOCKETFUNCTION, &CurlWebhook::open_socket);
    curl_easy_setopt(h, CURLOPT_OPENSOCKETDATA, this);
    curl_easy_setopt(h, CURLOPT_CLOSESOCKETFUNCTION, &CurlWebhook::close_socket);
    curl_easy_setopt(h, CURLOPT_CLOSESOCKETDATA, this);
    return h;
  }

  const WebhookTarget target_;
  CURLM* multi_ = nullptr;
  int epoll_ = -1;                  // the sockets libcurl waits on, and wake_
  int wake_ = -1;                   // an eventfd: wake() makes run() return
  std::unordered_map<int, Socket> sockets_;
  std::optional<Clock::time_point> timer_;  // when libcurl wants curl_multi_socket_action(TIMEOUT)
  curl_slist* headers_ = nullptr;  // the fixed ones
  std::vector<CURL*> idle_;
  std::vector<std::unique_ptr<Transfer>> in_flight_;
  std::vector<std::pair<std::uint64_t, DeliveryResult>> refused_;  // could not start; reported by run()
};

}  // namespace

DeliveryResult webhook_answer(long status, std::string_view body) {
  if (status >= 200 && status < 300) return {};
  const bool retry = status == 408 || status == 429 || status >= 500;
  return {retry ? DeliveryResult::Outcome::retry : DeliveryResult::Outcome::reject,
          "webhook: HTTP " + std::to_string(status) + (body.empty() ? "" : ": " + printable(body, Http1Response::kBodyKept))};
}

std::unique_ptr<Target> make_curl_webhook(const WebhookTarget& target) { return std::make_unique<CurlWebhook>(target); }

std::unique_ptr<Target> make_webhook_target(const WebhookTarget& target) {
  if (auto plain = make_plain_webhook(target)) return plain;
  return make_curl_webhook(target);
}

}  // namespace deviceshadow::notify
