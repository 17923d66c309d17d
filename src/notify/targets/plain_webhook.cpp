// The webhook target for plain http:// (targets/webhook.hpp): each delivery is one exchange on a
// kept-alive connection, driven on non-blocking sockets from this target's epoll set. A request
// goes out in one sendmsg (head and body); the answer is read as it arrives (Http1Response).
// A connection whose answer was complete and kept alive waits for the next delivery; one the
// receiver closes meanwhile is dropped when it stirs, and a delivery that finds its reused
// connection dead before any answer byte goes again once on a new one. Host names are resolved
// when a connection opens (blocking this registration's sender, not the others').
#include "deviceshadow/timestamp.hpp"
#include "notify/event.hpp"
#include "notify/targets/http1.hpp"
#include "notify/targets/webhook.hpp"

#include <curl/curl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <stdexcept>
#include <unordered_map>
#include <utility>
#include <vector>

namespace deviceshadow::notify {
namespace {

using Clock = std::chrono::steady_clock;

// Where an http:// URL's requests go.
struct Endpoint {
  std::string host;     // as in the URL ("[::1]" for an IPv6 address)
  std::string port;     // "80" when the URL has none
  std::string authority;  // the Host header: host, and the port when the URL has one
  std::string target;   // path and query: the request target
};

// The endpoint of a plain http:// URL without credentials, or nothing.
std::optional<Endpoint> plain_endpoint(const std::string& url) {
  CURLU* u = curl_url();
  if (!u) return std::nullopt;
  std::optional<Endpoint> endpoint;
  auto part = [&](CURLUPart which, unsigned flags = 0) -> std::optional<std::string> {
    char* text = nullptr;
    if (curl_url_get(u, which, &text, flags) != CURLUE_OK) return std::nullopt;
    std::string value(text);
    curl_free(text);
    return value;
  };
  if (curl_url_set(u, CURLUPART_URL, url.c_str(), 0) == CURLUE_OK && part(CURLUPART_SCHEME) == "http" && !part(CURLUPART_USER) &&
      !part(CURLUPART_PASSWORD)) {
    const auto host = part(CURLUPART_HOST), port = part(CURLUPART_PORT, CURLU_DEFAULT_PORT), path = part(CURLUPART_PATH);
    if (host && port && path) {
      const auto explicit_port = part(CURLUPART_PORT), query = part(CURLUPART_QUERY);
      endpoint = Endpoint{*host, *port, *host + (explicit_port ? ":" + *explicit_port : ""), *path + (query ? "?" + *query : "")};
    }
  }
  curl_url_cleanup(u);
  return endpoint;
}

bool proxy_in_environment() {
  for (const char* name : {"http_proxy", "all_proxy", "ALL_PROXY"}) {
    if (const char* value = std::getenv(name); value && *value) return true;
  }
  return false;
}

bool written_by_the_client(std::string_view header) {
  for (std::string_view own : {"Host", "Content-Length", "Transfer-Encoding", "Connection", "Expect"}) {
    if (std::ranges::equal(header, own, [](char a, char b) { return std::tolower(static_cast<unsigned char>(a)) == std::tolower(static_cast<unsigned char>(b)); })) {
      return true;
    }
  }
  return false;
}

class PlainWebhook final : public Target {
 public:
  PlainWebhook(WebhookTarget target, Endpoint endpoint) : target_(std::move(target)), endpoint_(std::move(endpoint)) {
    epoll_ = ::epoll_create1(EPOLL_CLOEXEC);
    wake_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (epoll_ < 0 || wake_ < 0) throw std::runtime_error("webhook: cannot set up its event loop");
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.fd = wake_;
    ::epoll_ctl(epoll_, EPOLL_CTL_ADD, wake_, &ev);
    head_ = "POST " + endpoint_.target + " HTTP/1.1\r\nHost: " + endpoint_.authority + "\r\nContent-Type: application/cloudevents+json\r\n";
    for (const auto& [name, value] : target_.headers) head_ += name + ": " + value + "\r\n";
    head_ += "Content-Length: ";
  }

  ~PlainWebhook() override {
    for (auto& [fd, exchange] : busy_) ::close(fd);
    for (const Idle& idle : idle_) ::close(idle.fd);
    ::close(wake_);
    ::close(epoll_);
  }

  void start(std::uint64_t tag, const Delivery& d) override {
    auto x = std::make_unique<Exchange>();
    x->tag = tag;
    x->deadline = Clock::now() + target_.timeout;
    x->head = head_ + std::to_string(d.body.size()) + "\r\n";
    if (!target_.secret.empty()) {
      const std::int64_t t = now().unix_nanos() / 1'000'000'000;
      x->head += "X-Shadow-Signature: " + webhook_signature(target_.secret, t, d.body) + "\r\n";
    }
    x->head += "\r\n";
    x->body = d.body;
    if (!idle_.empty()) {
      x->fd = idle_.back().fd;
      x->watched = idle_.back().watched;
      x->reused = true;
      idle_.pop_back();
    } else if (std::string why; !connect(*x, why)) {
      return fail(std::move(x), why);
    }
    advance(std::move(x), 0);
  }

  void run(std::chrono::milliseconds timeout, const Done& done) override {
    if (finished_.empty()) {
      for (const auto& [fd, x] : busy_) {
        const auto left = std::chrono::ceil<std::chrono::milliseconds>(x->deadline - Clock::now());
        timeout = std::clamp(left, std::chrono::milliseconds(0), timeout);
      }
      epoll_event events[32];
      const int n = ::epoll_wait(epoll_, events, 32, static_cast<int>(timeout.count()));
      for (int i = 0; i < n; ++i) {
        const int fd = events[i].data.fd;
        if (fd == wake_) {
          std::uint64_t count;
          [[maybe_unused]] const auto got = ::read(wake_, &count, sizeof count);
        } else if (auto node = busy_.extract(fd)) {
          advance(std::move(node.mapped()), events[i].events);
        } else if (std::erase_if(idle_, [&](const Idle& idle) { return idle.fd == fd; })) {
          ::close(fd);  // an idle connection stirred: closed by the receiver, or an answer nobody asked for
        }
      }
      expire();
    }
    for (auto& [tag, result] : std::exchange(finished_, {})) done(tag, std::move(result));
  }

  void wake() override {
    const std::uint64_t one = 1;
    [[maybe_unused]] const auto put = ::write(wake_, &one, sizeof one);
  }

 private:
  static constexpr std::size_t kIdleMax = 64;  // kept-alive connections waiting for a delivery

  struct Exchange {
    std::uint64_t tag = 0;
    std::string head;
    std::string_view body;
    std::size_t sent = 0;  // bytes of head and body
    Clock::time_point deadline;
    int fd = -1;
    std::uint32_t watched = 0;  // the events epoll watches on fd; 0: not in the set
    bool connecting = false;
    bool reused = false;  // fd carried an earlier exchange
    std::vector<sockaddr_storage> addresses;  // the host's, while connecting
    std::size_t next_address = 0;
    Http1Response response;
  };

  struct Idle {
    int fd;
    std::uint32_t watched;
  };

  // Opens a connection for x: to the host's next address that accepts a non-blocking connect.
  bool connect(Exchange& x, std::string& why) {
    if (x.addresses.empty()) {
      addrinfo hints{};
      hints.ai_family = AF_UNSPEC;
      hints.ai_socktype = SOCK_STREAM;
      std::string host = endpoint_.host;
      if (host.size() > 2 && host.front() == '[') host = host.substr(1, host.size() - 2);
      addrinfo* found = nullptr;
      if (const int rc = ::getaddrinfo(host.c_str(), endpoint_.port.c_str(), &hints, &found); rc != 0) {
        why = "cannot resolve " + endpoint_.host + ": " + ::gai_strerror(rc);
        return false;
      }
      for (addrinfo* a = found; a; a = a->ai_next) {
        sockaddr_storage address{};
        std::memcpy(&address, a->ai_addr, std::min<std::size_t>(a->ai_addrlen, sizeof address));
        x.addresses.push_back(address);
      }
      ::freeaddrinfo(found);
      x.next_address = 0;
    }
    why = "cannot connect to " + endpoint_.host + ":" + endpoint_.port;
    while (x.next_address < x.addresses.size()) {
      const sockaddr_storage& address = x.addresses[x.next_address++];
      const int fd = ::socket(address.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
      if (fd < 0) {
        why += std::string(": ") + std::strerror(errno);
        continue;
      }
      const int one = 1;
      ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
      const socklen_t length = address.ss_family == AF_INET6 ? sizeof(sockaddr_in6) : sizeof(sockaddr_in);
      if (::connect(fd, reinterpret_cast<const sockaddr*>(&address), length) == 0 || errno == EINPROGRESS) {
        x.fd = fd;
        x.watched = 0;
        x.connecting = true;  // a connect that completed at once shows as writable
        return true;
      }
      why = "cannot connect to " + endpoint_.host + ":" + endpoint_.port + ": " + std::strerror(errno);
      ::close(fd);
    }
    return false;
  }

  // Moves x on as far as its socket allows (`events`: what epoll reported, 0 when starting),
  // then parks it until its socket is ready again, or reports it.
  void advance(std::unique_ptr<Exchange> x, std::uint32_t events) {
    if (x->connecting) {
      if (!(events & (EPOLLOUT | EPOLLERR | EPOLLHUP))) return park(std::move(x), EPOLLOUT);
      int error = 0;
      socklen_t length = sizeof error;
      if (::getsockopt(x->fd, SOL_SOCKET, SO_ERROR, &error, &length) != 0) error = errno;
      if (error != 0) {  // the next address, if any
        close(*x);
        std::string why;
        if (!connect(*x, why)) return fail(std::move(x), why + ": " + std::strerror(error));
        return advance(std::move(x), 0);
      }
      x->connecting = false;
      x->addresses.clear();
    }
    const std::size_t total = x->head.size() + x->body.size();
    while (x->sent < total) {
      iovec parts[2];
      std::size_t count = 0;
      if (x->sent < x->head.size()) parts[count++] = {x->head.data() + x->sent, x->head.size() - x->sent};
      const std::size_t body_sent = x->sent > x->head.size() ? x->sent - x->head.size() : 0;
      if (body_sent < x->body.size()) parts[count++] = {const_cast<char*>(x->body.data()) + body_sent, x->body.size() - body_sent};
      msghdr message{};
      message.msg_iov = parts;
      message.msg_iovlen = count;
      const ssize_t n = ::sendmsg(x->fd, &message, MSG_NOSIGNAL | MSG_DONTWAIT);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
        if (events & EPOLLIN) break;  // the receiver answers early (a 413, say): read it
        return park(std::move(x), EPOLLIN | EPOLLOUT);
      }
      if (n < 0) return broken(std::move(x), std::strerror(errno));
      x->sent += static_cast<std::size_t>(n);
    }
    if (!(events & (EPOLLIN | EPOLLHUP | EPOLLERR))) return park(std::move(x), EPOLLIN);
    char buffer[16384];
    for (;;) {
      const ssize_t n = ::recv(x->fd, buffer, sizeof buffer, MSG_DONTWAIT);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return park(std::move(x), x->sent < total ? EPOLLIN | EPOLLOUT : EPOLLIN);
      if (n < 0) return broken(std::move(x), std::strerror(errno));
      const auto progress = n == 0 ? x->response.end_of_stream() : x->response.feed({buffer, static_cast<std::size_t>(n)});
      if (progress == Http1Response::Progress::complete) return finish(std::move(x));
      if (progress == Http1Response::Progress::malformed) {
        return n == 0 ? broken(std::move(x), x->response.error()) : fail(std::move(x), x->response.error());
      }
      if (static_cast<std::size_t>(n) < sizeof buffer) return park(std::move(x), x->sent < total ? EPOLLIN | EPOLLOUT : EPOLLIN);
    }
  }

  // The connection failed. One that carried an earlier exchange may have been closed by the
  // receiver before it saw this request: that goes again once on a new connection.
  void broken(std::unique_ptr<Exchange> x, const std::string& why) {
    if (!x->reused || x->response.started()) return fail(std::move(x), why);
    close(*x);
    x->reused = false;
    x->sent = 0;
    x->response = {};
    if (std::string failed; !connect(*x, failed)) return fail(std::move(x), failed);
    advance(std::move(x), 0);
  }

  void finish(std::unique_ptr<Exchange> x) {
    const bool sent = x->sent == x->head.size() + x->body.size();  // else the answer came early
    if (sent && x->response.reusable() && idle_.size() < kIdleMax) {
      idle_.push_back({x->fd, x->watched});
      x->fd = -1;
    }
    close(*x);
    finished_.emplace_back(x->tag, webhook_answer(x->response.status(), x->response.body()));
  }

  void fail(std::unique_ptr<Exchange> x, const std::string& why) {
    close(*x);
    finished_.emplace_back(x->tag, DeliveryResult{DeliveryResult::Outcome::retry, "webhook: " + why});
  }

  // Fails the exchanges whose time is up.
  void expire() {
    const auto now = Clock::now();
    for (auto it = busy_.begin(); it != busy_.end();) {
      if (it->second->deadline > now) {
        ++it;
        continue;
      }
      auto x = std::move(it->second);
      it = busy_.erase(it);
      fail(std::move(x), "timeout: no answer within " + std::to_string(target_.timeout.count()) + " ms");
    }
  }

  void park(std::unique_ptr<Exchange> x, std::uint32_t events) {
    if (x->watched != events) {
      epoll_event ev{};
      ev.events = events;
      ev.data.fd = x->fd;
      if (::epoll_ctl(epoll_, x->watched ? EPOLL_CTL_MOD : EPOLL_CTL_ADD, x->fd, &ev) != 0) {
        return fail(std::move(x), std::string("cannot watch its connection: ") + std::strerror(errno));
      }
      x->watched = events;
    }
    const int fd = x->fd;
    busy_.emplace(fd, std::move(x));
  }

  static void close(Exchange& x) {
    if (x.fd >= 0) ::close(x.fd);  // also leaves the epoll set
    x.fd = -1;
    x.watched = 0;
  }

  const WebhookTarget target_;
  const Endpoint endpoint_;
  std::string head_;  // the request head up to the Content-Length value
  int epoll_ = -1;
  int wake_ = -1;  // an eventfd: wake() makes run() return
  std::unordered_map<int, std::unique_ptr<Exchange>> busy_;  // by socket
  std::vector<Idle> idle_;
  std::vector<std::pair<std::uint64_t, DeliveryResult>> finished_;  // reported by the next run()
};

}  // namespace

std::unique_ptr<Target> make_plain_webhook(const WebhookTarget& target) {
  if (proxy_in_environment() || std::ranges::any_of(target.headers, [](const auto& h) { return written_by_the_client(h.first); })) {
    return nullptr;
  }
  auto endpoint = plain_endpoint(target.url);
  if (!endpoint) return nullptr;
  return std::make_unique<PlainWebhook>(target, std::move(*endpoint));
}

}  // namespace deviceshadow::notify
