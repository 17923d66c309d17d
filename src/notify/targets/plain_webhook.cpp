// The webhook target for plain http:// (targets/webhook.hpp): each delivery is one exchange on a
// kept-alive connection, driven on non-blocking sockets from this target's epoll set. A request
// goes out in one sendmsg (head and body); the answer is read as it arrives (Http1Response).
// A connection whose answer was complete and kept alive waits for the next delivery; one the
// receiver closes meanwhile is dropped when it stirs, and a delivery that finds its reused
// connection dead before any answer byte goes again once on a new one. Host names are looked
// up on a thread of their own (Resolver).
#include "deviceshadow/ascii.hpp"
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
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <stdexcept>
#include <system_error>
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
  std::string authority;  // the Host header: host, and the port unless it is 80
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
  // Left to libcurl: credentials, an IPv6 zone, a host name to be converted to ASCII (IDN).
  if (curl_url_set(u, CURLUPART_URL, url.c_str(), 0) == CURLUE_OK && part(CURLUPART_SCHEME) == "http" && !part(CURLUPART_USER) &&
      !part(CURLUPART_PASSWORD) && !part(CURLUPART_ZONEID)) {
    const auto host = part(CURLUPART_HOST), port = part(CURLUPART_PORT, CURLU_DEFAULT_PORT), path = part(CURLUPART_PATH);
    if (host && port && path && std::ranges::all_of(*host, [](char c) { return static_cast<unsigned char>(c) < 0x80; })) {
      const auto query = part(CURLUPART_QUERY);
      endpoint = Endpoint{*host, *port, *host + (*port == "80" ? "" : ":" + *port), *path + (query ? "?" + *query : "")};
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
    if (equals_ignoring_case(header, own)) return true;
  }
  return false;
}

// A host's addresses. A literal address is known at once; a name is looked up on a thread of
// its own, so that a slow resolver holds up only the deliveries that wait for a new connection
// (within their timeouts), never run() or wake(). Addresses are kept a minute, or until every
// one of them failed.
class Resolver {
 public:
  Resolver(std::string host, std::string port) : port_(std::move(port)), lookup_(std::make_shared<Lookup>()) {
    host_ = host.size() > 2 && host.front() == '[' ? host.substr(1, host.size() - 2) : std::move(host);
    if (lookup_->event < 0) {
      throw std::system_error(lookup_->event_error, std::generic_category(), "webhook: cannot set up its resolver");
    }
    literal_ = resolve(host_, port_, AI_NUMERICHOST, addresses_).empty();
  }

  // Readable while a finished lookup waits to be collected.
  int fd() const { return lookup_->event; }

  // The addresses, or null while they are being looked up (a lookup is started if none runs).
  const std::vector<sockaddr_storage>* addresses() {
    if (literal_ || (!addresses_.empty() && Clock::now() - resolved_at_ < std::chrono::minutes(1))) return &addresses_;
    if (!looking_up_) {
      looking_up_ = true;
      auto look_up = [lookup = lookup_, host = host_, port = port_] {
        std::vector<sockaddr_storage> found;
        std::string error = resolve(host, port, 0, found);
        std::lock_guard lock(lookup->mutex);
        lookup->found = std::move(found);
        lookup->error = std::move(error);
        const std::uint64_t one = 1;
        [[maybe_unused]] const auto put = ::write(lookup->event, &one, sizeof one);
      };
      try {
        std::thread(look_up).detach();
      } catch (...) {
        look_up();  // no thread to be had: look it up here (its outcome is collected all the same)
      }
    }
    return nullptr;
  }

  // Takes the outcome of the lookup that finished (fd() was readable): empty, or why it failed.
  std::string collect() {
    std::uint64_t count;
    [[maybe_unused]] const auto got = ::read(lookup_->event, &count, sizeof count);
    std::lock_guard lock(lookup_->mutex);
    looking_up_ = false;
    addresses_ = std::move(lookup_->found);
    resolved_at_ = Clock::now();
    return std::move(lookup_->error);
  }

  // Every address failed: the next connection looks the name up again.
  void forget() {
    if (!literal_) addresses_.clear();
  }

 private:
  struct Lookup {  // shared with the lookup's thread, which may outlive the target
    std::mutex mutex;
    std::vector<sockaddr_storage> found;
    std::string error;
    int event = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    int event_error = event < 0 ? errno : 0;  // why there is no eventfd (too many open files)
    ~Lookup() { ::close(event); }
  };

  static std::string resolve(const std::string& host, const std::string& port, int flags, std::vector<sockaddr_storage>& out) {
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = flags;
    addrinfo* found = nullptr;
    if (const int rc = ::getaddrinfo(host.c_str(), port.c_str(), &hints, &found); rc != 0) return "cannot resolve " + host + ": " + ::gai_strerror(rc);
    for (addrinfo* a = found; a; a = a->ai_next) {
      sockaddr_storage address{};
      std::memcpy(&address, a->ai_addr, std::min<std::size_t>(a->ai_addrlen, sizeof address));
      out.push_back(address);
    }
    ::freeaddrinfo(found);
    return out.empty() ? "cannot resolve " + host + ": no address" : "";
  }

  std::string host_;  // without the brackets of an IPv6 address
  std::string port_;
  bool literal_ = false;
  bool looking_up_ = false;
  std::vector<sockaddr_storage> addresses_;
  Clock::time_point resolved_at_;
  std::shared_ptr<Lookup> lookup_;
};

class PlainWebhook final : public Target {
 public:
  PlainWebhook(WebhookTarget target, Endpoint endpoint)
      : target_(std::move(target)), endpoint_(std::move(endpoint)), resolver_(endpoint_.host, endpoint_.port) {
    epoll_ = ::epoll_create1(EPOLL_CLOEXEC);
    wake_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    bool ready = epoll_ >= 0 && wake_ >= 0;
    for (const int fd : {wake_, resolver_.fd()}) {
      epoll_event ev{};
      ev.events = EPOLLIN;
      ev.data.fd = fd;
      ready = ready && ::epoll_ctl(epoll_, EPOLL_CTL_ADD, fd, &ev) == 0;
    }
    if (!ready) {
      const int error = errno;  // of the call that failed (too many open files)
      for (const int fd : {epoll_, wake_}) {
        if (fd >= 0) ::close(fd);
      }
      throw std::system_error(error, std::generic_category(), "webhook: cannot set up its event loop");
    }
    // As libcurl writes it: Accept, and no header of the registration's whose value is empty.
    head_ = "POST " + endpoint_.target + " HTTP/1.1\r\nHost: " + endpoint_.authority +
            "\r\nAccept: */*\r\nContent-Type: application/cloudevents+json\r\n";
    for (const auto& [name, value] : target_.headers) {
      if (!value.empty()) head_ += name + ": " + value + "\r\n";
    }
    head_ += "Content-Length: ";
  }

  ~PlainWebhook() override {
    for (auto& [fd, exchange] : busy_) ::close(fd);
    for (const int fd : idle_) ::close(fd);
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
    if (idle_.empty()) return open(std::move(x));
    x->fd = idle_.back();
    x->watched = EPOLLIN;
    x->reused = true;
    idle_.pop_back();
    advance(std::move(x), 0);
  }

  std::optional<Clock::time_point> next_deadline() const override {
    std::optional<Clock::time_point> next;
    auto sooner = [&](Clock::time_point t) { next = next ? std::min(*next, t) : t; };
    for (const auto& [fd, x] : busy_) sooner(x->connecting ? std::min(x->deadline, x->attempt_deadline) : x->deadline);
    for (const auto& x : waiting_) sooner(x->deadline);
    return next;
  }

  void run(std::chrono::milliseconds timeout, const Done& done) override {
    if (!finished_.empty()) timeout = std::chrono::milliseconds(0);  // report them now
    if (const auto next = next_deadline()) {
      timeout = std::clamp(std::chrono::ceil<std::chrono::milliseconds>(*next - Clock::now()), std::chrono::milliseconds(0), timeout);
    }
    epoll_event events[32];
    const int n = ::epoll_wait(epoll_, events, 32, static_cast<int>(timeout.count()));
    for (int i = 0; i < n; ++i) {
      const int fd = events[i].data.fd;
      if (fd == wake_) {
        std::uint64_t count;
        [[maybe_unused]] const auto got = ::read(wake_, &count, sizeof count);
      } else if (fd == resolver_.fd()) {
        resolved(resolver_.collect());
      } else if (auto node = busy_.extract(fd)) {
        advance(std::move(node.mapped()), events[i].events);
      } else if (std::erase(idle_, fd)) {
        ::close(fd);  // an idle connection stirred: closed by the receiver, or an answer nobody asked for
      }
    }
    expire();
    for (auto& [tag, result] : std::exchange(finished_, {})) done(tag, std::move(result));
  }

  int ready_fd() const override { return epoll_; }

  void wake() override {
    const std::uint64_t one = 1;
    [[maybe_unused]] const auto put = ::write(wake_, &one, sizeof one);
  }

 private:
  static constexpr std::size_t kIdleMax = 64;  // kept-alive connections waiting for a delivery
  static constexpr int kReadsPerWake = 8;       // reads of one answer before run() looks at others

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
    Clock::time_point attempt_deadline;  // when connecting to this address gives way to the next
    Http1Response response;
  };

  // Gets x a new connection, once the host's addresses are known.
  void open(std::unique_ptr<Exchange> x) {
    const std::vector<sockaddr_storage>* addresses = resolver_.addresses();
    if (!addresses) return waiting_.push_back(std::move(x));
    x->addresses = *addresses;
    x->next_address = 0;
    connect(std::move(x), cannot_connect_);
  }

  // A lookup finished: the deliveries that waited for it connect, or fail with `error`.
  void resolved(const std::string& error) {
    for (auto& x : std::exchange(waiting_, {})) {
      if (error.empty()) {
        open(std::move(x));
      } else {
        fail(std::move(x), error);
      }
    }
  }

  // Connects x to its next address that takes a non-blocking connect; each address gets an
  // equal share of the time left. Fails x with `why` when none is left.
  void connect(std::unique_ptr<Exchange> x, std::string why) {
    while (x->next_address < x->addresses.size()) {
      const std::size_t left = x->addresses.size() - x->next_address;
      const sockaddr_storage& address = x->addresses[x->next_address++];
      const int fd = ::socket(address.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
      const socklen_t length = address.ss_family == AF_INET6 ? sizeof(sockaddr_in6) : sizeof(sockaddr_in);
      const int one = 1;
      if (fd >= 0 && ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one) == 0 &&
          (::connect(fd, reinterpret_cast<const sockaddr*>(&address), length) == 0 || errno == EINPROGRESS)) {
        x->fd = fd;
        x->watched = 0;
        x->connecting = true;  // a connect that completed at once shows as writable
        x->attempt_deadline = Clock::now() + (x->deadline - Clock::now()) / static_cast<int>(left);
        return advance(std::move(x), 0);
      }
      why = cannot_connect_ + ": " + std::strerror(errno);
      if (fd >= 0) ::close(fd);
    }
    resolver_.forget();
    fail(std::move(x), why);
  }

  // Moves x on as far as its socket allows (`events`: what epoll reported, 0 when starting),
  // then parks it until its socket is ready again, or reports it.
  void advance(std::unique_ptr<Exchange> x, std::uint32_t events) {
    if (x->connecting) {
      if (!(events & (EPOLLOUT | EPOLLERR | EPOLLHUP))) return park(std::move(x), EPOLLOUT);
      int error = 0;
      socklen_t length = sizeof error;
      if (::getsockopt(x->fd, SOL_SOCKET, SO_ERROR, &error, &length) != 0) error = errno;
      if (error != 0) {
        close(*x);
        return connect(std::move(x), cannot_connect_ + ": " + std::strerror(error));
      }
      x->connecting = false;
      x->addresses.clear();
    }
    const std::size_t total = x->head.size() + x->body.size();
    std::string send_error;
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
      if (n < 0) {
        send_error = std::strerror(errno);
        break;
      }
      x->sent += static_cast<std::size_t>(n);
    }
    // After a failed send the socket is read to its end (what the receiver answered before it
    // stopped reading counts) and never watched again; the send's error is the one reported.
    const bool dead = !send_error.empty();
    if (!dead && !(events & (EPOLLIN | EPOLLHUP | EPOLLERR))) return park(std::move(x), EPOLLIN);
    const std::uint32_t wait_for = x->sent < total ? EPOLLIN | EPOLLOUT : EPOLLIN;
    char buffer[16384];
    for (int reads = 0; reads < kReadsPerWake; ++reads) {
      const ssize_t n = ::recv(x->fd, buffer, sizeof buffer, MSG_DONTWAIT);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) && !dead) return park(std::move(x), wait_for);
      if (n < 0) return broken(std::move(x), dead ? send_error : std::strerror(errno));
      const auto progress = n == 0 ? x->response.end_of_stream() : x->response.feed({buffer, static_cast<std::size_t>(n)});
      if (progress == Http1Response::Progress::complete) return finish(std::move(x));
      if (progress == Http1Response::Progress::malformed) {
        return n == 0 ? broken(std::move(x), dead ? send_error : x->response.error()) : fail(std::move(x), x->response.error());
      }
      if (static_cast<std::size_t>(n) < sizeof buffer && !dead) return park(std::move(x), wait_for);
    }
    if (dead) return broken(std::move(x), send_error);
    park(std::move(x), wait_for);  // more to read: epoll is level-triggered
  }

  // The connection failed. One that carried an earlier exchange may have been closed by the
  // receiver before it saw this request: that goes again once on a new connection.
  void broken(std::unique_ptr<Exchange> x, const std::string& why) {
    if (!x->reused || x->response.started()) return fail(std::move(x), why);
    close(*x);
    x->reused = false;
    x->sent = 0;
    x->response = {};
    open(std::move(x));
  }

  void finish(std::unique_ptr<Exchange> x) {
    const bool sent = x->sent == x->head.size() + x->body.size();  // else the answer came early
    if (sent && x->response.reusable() && idle_.size() < kIdleMax && watch(*x, EPOLLIN)) {
      idle_.push_back(x->fd);
      x->fd = -1;
    }
    close(*x);
    finished_.emplace_back(x->tag, webhook_answer(x->response.status(), x->response.body()));
  }

  void fail(std::unique_ptr<Exchange> x, const std::string& why) {
    close(*x);
    finished_.emplace_back(x->tag, DeliveryResult{DeliveryResult::Outcome::retry, "webhook: " + why});
  }

  // Fails the exchanges whose time is up; one still connecting when its address's share of the
  // time is up tries the next address.
  void expire() {
    const auto now = Clock::now();
    const std::string timeout = "timeout: no answer within " + std::to_string(target_.timeout.count()) + " ms";
    std::vector<std::unique_ptr<Exchange>> due;  // taken out first: connecting again adds to busy_
    for (auto it = busy_.begin(); it != busy_.end();) {
      const Exchange& x = *it->second;
      const bool next_address = x.connecting && x.attempt_deadline <= now && x.next_address < x.addresses.size();
      if (x.deadline > now && !next_address) {
        ++it;
      } else {
        due.push_back(std::move(it->second));
        it = busy_.erase(it);
      }
    }
    for (auto& x : due) {
      close(*x);
      if (x->deadline > now) {
        connect(std::move(x), timeout);
      } else {
        fail(std::move(x), timeout);
      }
    }
    for (auto it = waiting_.begin(); it != waiting_.end();) {
      if ((*it)->deadline > now) {
        ++it;
        continue;
      }
      auto expired = std::move(*it);
      it = waiting_.erase(it);
      fail(std::move(expired), "timeout: " + endpoint_.host + " not resolved within " + std::to_string(target_.timeout.count()) + " ms");
    }
  }

  // Makes epoll watch `events` on x's socket.
  bool watch(Exchange& x, std::uint32_t events) {
    if (x.watched == events) return true;
    epoll_event ev{};
    ev.events = events;
    ev.data.fd = x.fd;
    if (::epoll_ctl(epoll_, x.watched ? EPOLL_CTL_MOD : EPOLL_CTL_ADD, x.fd, &ev) != 0) return false;
    x.watched = events;
    return true;
  }

  void park(std::unique_ptr<Exchange> x, std::uint32_t events) {
    if (!watch(*x, events)) return fail(std::move(x), std::string("cannot watch its connection: ") + std::strerror(errno));
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
  const std::string cannot_connect_ = "cannot connect to " + endpoint_.host + ":" + endpoint_.port;
  Resolver resolver_;
  std::string head_;  // the request head up to the Content-Length value
  int epoll_ = -1;
  int wake_ = -1;  // an eventfd: wake() makes run() return
  std::unordered_map<int, std::unique_ptr<Exchange>> busy_;  // by socket
  std::vector<std::unique_ptr<Exchange>> waiting_;           // for the host's addresses
  std::vector<int> idle_;  // kept-alive connections, watched for EPOLLIN
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
