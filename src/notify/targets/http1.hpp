// An HTTP/1.x response read incrementally from a connection (RFC 9112): the status, whether the
// connection may carry another request, and the start of the body (for error messages). Used
// by the plain-HTTP webhook client (plain_webhook.cpp). Boost.Beast's response parser reads it;
// only http1.cpp includes Beast.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

namespace deviceshadow::notify {

// At most `limit` bytes of what a peer sent, for an error message: a run of white space with a
// line break or tab as one space (none at the end), other bytes outside printable ASCII as \xNN,
// so that no log line or JSON string carries them raw.
std::string printable(std::string_view bytes, std::size_t limit = 64);

class Http1Response {
 public:
  enum class Progress { incomplete, complete, malformed };
  static constexpr std::size_t kBodyKept = 512;    // bytes of the body kept
  static constexpr std::size_t kHeadLimit = 65536;  // bytes of status line and headers accepted

  Http1Response();
  Http1Response(Http1Response&&) noexcept;
  Http1Response& operator=(Http1Response&&) noexcept;
  ~Http1Response();

  // Consumes bytes as they arrive. Once complete, any further byte (an answer nobody asked
  // for) makes the connection unusable; once malformed, error() says why.
  Progress feed(std::string_view bytes);
  // The peer closed the connection: completes a body that runs until the close.
  Progress end_of_stream();

  int status() const { return status_; }
  bool reusable() const { return progress_ == Progress::complete && keep_alive_ && !extra_; }
  const std::string& body() const { return body_; }  // its first kBodyKept bytes, once complete
  const std::string& error() const { return error_; }
  bool started() const { return started_; }  // a byte of it has arrived

 private:
  // Boost.Beast's response parser and the bytes it has not taken yet; only http1.cpp knows it.
  struct Parser;
  Progress fail(std::string why);
  std::size_t parse(std::string_view bytes);  // returns how many bytes were taken
  Progress done();  // the parser has read a whole answer: an interim one or the final one

  std::unique_ptr<Parser> parser_;  // made by the first byte
  Progress progress_ = Progress::incomplete;
  int status_ = 0;
  bool keep_alive_ = false;  // decided when complete
  bool extra_ = false;
  bool started_ = false;
  std::string body_;
  std::string error_;
};

}  // namespace deviceshadow::notify
