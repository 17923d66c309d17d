// An HTTP/1.x response read incrementally from a connection (RFC 9112): the status, whether the
// connection may carry another request, and the start of the body (for error messages). Used
// by the plain-HTTP webhook client (plain_webhook.cpp).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace deviceshadow::notify {

// At most `limit` bytes of what a peer sent, for an error message: bytes outside printable
// ASCII as \xNN, so that no log line or JSON string carries them raw.
std::string printable(std::string_view bytes, std::size_t limit = 64);

class Http1Response {
 public:
  enum class Progress { incomplete, complete, malformed };
  static constexpr std::size_t kBodyKept = 512;    // bytes of the body kept
  static constexpr std::size_t kHeadLimit = 65536;  // bytes of status line and headers accepted

  // Consumes bytes as they arrive. Once complete, any further byte (an answer nobody asked
  // for) makes the connection unusable; once malformed, error() says why.
  Progress feed(std::string_view bytes);
  // The peer closed the connection: completes a body that runs until the close.
  Progress end_of_stream();

  int status() const { return status_; }
  bool reusable() const { return progress_ == Progress::complete && keep_alive_ && !extra_; }
  const std::string& body() const { return body_; }  // its first kBodyKept bytes
  const std::string& error() const { return error_; }
  bool started() const { return started_; }  // a byte of it has arrived

 private:
  enum class Part { status_line, header, length, chunk_size, chunk_data, chunk_end, trailer, until_close, done };
  Progress fail(std::string why);
  Progress line(std::string_view text);  // one line of the head, a chunk size or a trailer
  Progress end_of_head();
  void keep(std::string_view data);

  Progress progress_ = Progress::incomplete;
  Part part_ = Part::status_line;
  std::string line_;            // the line being read
  std::size_t head_bytes_ = 0;  // of this response's head so far
  int status_ = 0;
  bool http10_ = false;
  bool close_ = false;             // Connection: close
  bool keep_alive_asked_ = false;  // Connection: keep-alive
  bool keep_alive_ = false;        // decided at the end of the head
  bool transfer_coded_ = false;  // a Transfer-Encoding header came
  bool chunked_ = false;         // ... ending in chunked
  bool extra_ = false;
  bool started_ = false;
  bool has_length_ = false;
  std::uint64_t remaining_ = 0;  // of the body (length) or the chunk
  std::string body_;
  std::string error_;
};

}  // namespace deviceshadow::notify
