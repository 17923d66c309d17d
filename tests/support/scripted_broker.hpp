// An MQTT 3.1.1 broker on loopback whose acknowledgements a test scripts, for what a real broker
// cannot be made to do on cue (hold back every PUBACK while the connection stays up).
#pragma once

#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

// An MQTT 3.1.1 broker for one client at a time: it answers CONNECT and PINGREQ, records each
// PUBLISH and acknowledges QoS 1 ones, in order, as far as allow_acks() lets it.
// drop_connection() closes the current connection; the next one is accepted.
class ScriptedBroker {
 public:
  ScriptedBroker() {
    listener_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t length = sizeof address;
    if (::bind(listener_, reinterpret_cast<sockaddr*>(&address), length) != 0 || ::listen(listener_, 4) != 0 ||
        ::getsockname(listener_, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
      ADD_FAILURE() << "cannot listen on loopback";
    }
    port_ = ntohs(address.sin_port);
    thread_ = std::thread([this] { serve(); });
  }
  ~ScriptedBroker() {
    {
      std::lock_guard lock(mutex_);
      stopping_ = true;
    }
    ::shutdown(listener_, SHUT_RDWR);
    drop_connection();
    thread_.join();
    ::close(listener_);
  }

  std::string url() const { return "mqtt://127.0.0.1:" + std::to_string(port_); }
  // Lets the broker acknowledge publishes until `n` have been acknowledged in all.
  void allow_acks(std::size_t n) {
    std::lock_guard lock(mutex_);
    acks_allowed_ = n;
  }
  void drop_connection() {
    std::lock_guard lock(mutex_);
    if (connection_ >= 0) ::shutdown(connection_, SHUT_RDWR);
  }
  std::size_t connects() {
    std::lock_guard lock(mutex_);
    return connects_;
  }
  std::vector<std::string> payloads() {
    std::lock_guard lock(mutex_);
    return payloads_;
  }
  std::size_t acknowledged() {
    std::lock_guard lock(mutex_);
    return acked_;
  }

 private:
  void serve() {
    for (;;) {
      const int c = ::accept(listener_, nullptr, nullptr);
      if (c < 0) return;
      {
        std::lock_guard lock(mutex_);
        if (stopping_) {
          ::close(c);
          return;
        }
        connection_ = c;
      }
      converse(c);
      std::lock_guard lock(mutex_);
      connection_ = -1;
      ::close(c);
      pending_acks_.clear();  // a client sends again what it has not seen acknowledged
    }
  }

  // One connection, until it ends: reads packets, answers them and sends the acks allowed.
  void converse(int c) {
    timeval tick{0, 10'000};
    ::setsockopt(c, SOL_SOCKET, SO_RCVTIMEO, &tick, sizeof tick);
    std::string in;
    for (;;) {
      send_allowed_acks(c);
      char buffer[65536];
      const ssize_t n = ::recv(c, buffer, sizeof buffer, 0);
      if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) return;
      if (n > 0) in.append(buffer, static_cast<std::size_t>(n));
      for (std::size_t header = 0, whole; (whole = whole_packet(in, header)) > 0;) {
        const auto type = static_cast<unsigned char>(in[0]);
        const std::string body = in.substr(header, whole - header);
        in.erase(0, whole);
        if ((type >> 4) == 1) {  // CONNECT → CONNACK, accepted
          send(c, std::string("\x20\x02\x00\x00", 4));
          std::lock_guard lock(mutex_);
          ++connects_;
        } else if ((type >> 4) == 3) {  // PUBLISH
          const int qos = (type >> 1) & 3;
          const std::size_t topic_length = (static_cast<unsigned char>(body[0]) << 8) | static_cast<unsigned char>(body[1]);
          const std::size_t id_at = 2 + topic_length;
          std::lock_guard lock(mutex_);
          payloads_.push_back(body.substr(id_at + (qos > 0 ? 2 : 0)));
          if (qos > 0) pending_acks_.push_back(body.substr(id_at, 2));
        } else if ((type >> 4) == 12) {  // PINGREQ → PINGRESP
          send(c, std::string("\xd0\x00", 2));
        } else if ((type >> 4) == 14) {  // DISCONNECT
          return;
        }
      }
    }
  }

  // The size of the packet in front of `in`, fixed header included (`header` set to its size),
  // or 0 while it is not all there.
  static std::size_t whole_packet(const std::string& in, std::size_t& header) {
    std::size_t length = 0;
    for (std::size_t i = 1; i < in.size() && i <= 4; ++i) {
      const auto byte = static_cast<unsigned char>(in[i]);
      length |= static_cast<std::size_t>(byte & 127) << (7 * (i - 1));
      if (!(byte & 128)) {
        header = i + 1;
        return in.size() >= header + length ? header + length : 0;
      }
    }
    return 0;
  }

  void send_allowed_acks(int c) {
    std::string out;
    {
      std::lock_guard lock(mutex_);
      while (!pending_acks_.empty() && acked_ < acks_allowed_) {
        out += std::string("\x40\x02", 2) + pending_acks_.front();
        pending_acks_.erase(pending_acks_.begin());
        ++acked_;
      }
    }
    if (!out.empty()) send(c, out);
  }

  static void send(int c, const std::string& bytes) {
    for (std::size_t sent = 0; sent < bytes.size();) {
      const ssize_t n = ::send(c, bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL);
      if (n <= 0) return;
      sent += static_cast<std::size_t>(n);
    }
  }

  int listener_ = -1;
  int port_ = 0;
  std::thread thread_;
  std::mutex mutex_;  // guards what follows
  bool stopping_ = false;
  int connection_ = -1;
  std::size_t connects_ = 0;
  std::size_t acks_allowed_ = 0;
  std::size_t acked_ = 0;
  std::vector<std::string> pending_acks_;  // packet ids of publishes read and not acknowledged, in order
  std::vector<std::string> payloads_;
};
