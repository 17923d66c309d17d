#include "notify/targets/http1.hpp"

#include "deviceshadow/ascii.hpp"

#include <boost/beast/http/parser.hpp>

#include <algorithm>
#include <optional>
#include <utility>

namespace deviceshadow::notify {
namespace {

namespace http = boost::beast::http;
using boost::beast::error_code;

// Calls `f` with each comma-separated element of a header value, trimmed.
template <typename F>
void each_token(std::string_view value, F f) {
  while (!value.empty()) {
    const std::size_t comma = value.find(',');
    if (const std::string_view element = trim_spaces_and_tabs(value.substr(0, comma)); !element.empty()) f(element);  // "a, ,b": two
    value = comma == std::string_view::npos ? std::string_view() : value.substr(comma + 1);
  }
}

// A Beast body that keeps the first kBodyKept bytes (for error messages) and drops the rest,
// however long the body is.
struct KeptBody {
  using value_type = std::string;

  class reader {
   public:
    template <bool isRequest, class Fields>
    reader(http::header<isRequest, Fields>&, value_type& body) : body_(body) {}
    void init(const boost::optional<std::uint64_t>&, error_code& ec) { ec = {}; }
    std::size_t put(boost::asio::const_buffer buffer, error_code& ec) {
      if (body_.size() < Http1Response::kBodyKept) {
        body_.append(static_cast<const char*>(buffer.data()), std::min(buffer.size(), Http1Response::kBodyKept - body_.size()));
      }
      ec = {};
      return buffer.size();
    }
    void finish(error_code& ec) { ec = {}; }

   private:
    value_type& body_;
  };
};

using ResponseParser = http::response_parser<KeptBody>;

// The line of `bytes` that starts at `at` (past a line end), shown in an error message.
std::string line_at(std::string_view bytes, std::size_t at) {
  std::string_view rest = bytes.substr(std::min(at, bytes.size()));
  if (rest.starts_with("\r\n")) rest.remove_prefix(2);
  return printable(rest.substr(0, rest.find("\r\n")));
}

constexpr std::size_t kBareLf = std::string_view::npos;

// Where the head ends in `head` (its headers, after the status line and its CR LF): past its
// empty line; 0 while it has not come; kBareLf at a line feed without a CR before it, which
// Beast refuses once it has the whole head (RFC 9112 2.2 lets a recipient take it).
std::size_t head_end(std::string_view head) {
  for (std::size_t lf = head.find('\n'); lf != std::string_view::npos; lf = head.find('\n', lf + 1)) {
    if (lf == 0 || head[lf - 1] != '\r') return kBareLf;
    if (lf == 1 || (lf >= 3 && head[lf - 2] == '\n')) return lf + 1;  // CR LF CR LF, the first after the status line's
  }
  return 0;
}

}  // namespace

// Beast's parser of the answer being read (a new one after each interim answer) and the bytes
// of it that no put() took yet. The status line goes to the parser alone, once whole, and the
// rest of the head only once its empty line is there: given part of a head, Beast may refuse
// a bad line in it at once, but once it has had to wait it looks again only when the whole head
// has come. So an answer reads the same however it is split, and a peer that is no HTTP server
// is refused by its first line.
struct Http1Response::Parser {
  Parser() { next(); }
  void next() {
    parser.emplace();
    parser->header_limit(static_cast<std::uint32_t>(kHeadLimit));
    parser->body_limit(boost::none);  // the body is dropped past kBodyKept; the deadline bounds it
    parser->eager(true);
    status_line = 0;
    head_checked = false;
    wanting = false;
  }

  std::optional<ResponseParser> parser;
  std::string unparsed;         // what comes after the bytes the parser took
  std::size_t status_line = 0;  // its bytes, once the parser has it
  bool head_checked = false;
  bool wanting = false;  // the last put() needed more bytes than it was given
};

Http1Response::Http1Response() = default;
Http1Response::Http1Response(Http1Response&&) noexcept = default;
Http1Response& Http1Response::operator=(Http1Response&&) noexcept = default;
Http1Response::~Http1Response() = default;

std::string printable(std::string_view bytes, std::size_t limit) {
  bytes = bytes.substr(0, limit);
  bytes = bytes.substr(0, bytes.find_last_not_of(" \t\r\n") + 1);  // npos + 1: nothing left
  std::string out;
  for (std::size_t i = 0; i < bytes.size(); ++i) {
    const unsigned char c = bytes[i];
    if (c == '\r' || c == '\n' || c == '\t' || c == ' ') {  // a run with a line break or tab: one space
      const std::size_t end = std::min(bytes.find_first_not_of(" \t\r\n", i), bytes.size());
      const std::string_view run = bytes.substr(i, end - i);
      out += run.find_first_of("\t\r\n") == std::string_view::npos ? run : " ";
      i = end - 1;
    } else if (c >= 0x20 && c < 0x7f) {
      out += static_cast<char>(c);
    } else {
      constexpr char kHex[] = "0123456789abcdef";
      out += {'\\', 'x', kHex[c >> 4], kHex[c & 15]};
    }
  }
  return out;
}

Http1Response::Progress Http1Response::feed(std::string_view bytes) {
  if (progress_ != Progress::incomplete) {
    if (!bytes.empty()) extra_ = true;
    return progress_;
  }
  if (bytes.empty()) return progress_;
  started_ = true;
  if (!parser_) parser_ = std::make_unique<Parser>();
  std::string& unparsed = parser_->unparsed;
  if (unparsed.empty()) {  // as a rule the whole answer comes in one read: parsed where it lies
    const std::size_t taken = parse(bytes);
    if (progress_ == Progress::incomplete) unparsed.assign(bytes.substr(taken));
    if (progress_ == Progress::complete && taken < bytes.size()) extra_ = true;
  } else {
    unparsed.append(bytes);
    const std::size_t taken = parse(unparsed);
    if (progress_ == Progress::complete && taken < unparsed.size()) extra_ = true;
    unparsed.erase(0, taken);
  }
  if (progress_ != Progress::incomplete) parser_.reset();
  return progress_;
}

std::size_t Http1Response::parse(std::string_view bytes) {
  const auto head_over = [] { return "its head is over " + std::to_string(kHeadLimit) + " bytes"; };
  std::size_t taken = 0;
  while (progress_ == Progress::incomplete && taken < bytes.size()) {
    ResponseParser& p = *parser_->parser;
    const std::string_view rest = bytes.substr(taken);
    error_code ec;
    if (parser_->status_line == 0) {  // HTTP/1.x SSS reason
      const std::size_t end = rest.substr(0, kHeadLimit).find('\n');
      if (end == std::string_view::npos) {
        if (rest.size() >= kHeadLimit) fail(head_over());
        break;
      }
      const std::string_view line = rest.substr(0, end + 1);
      // Without a reason the space before it may be missing, as libcurl and most clients accept.
      const std::string patched = line.size() == 14 ? std::string(line.substr(0, 12)) + " \r\n" : std::string();
      const std::string_view given = patched.empty() ? line : patched;
      const std::size_t n = line.ends_with("\r\n") ? p.put(boost::asio::buffer(given.data(), given.size()), ec) : 0;
      status_ = n == given.size() && ec == http::error::need_more ? p.get().result_int() : 0;  // it waits for the headers
      if (status_ < 100) {
        status_ = 0;
        fail("not an HTTP/1.x status line: " + printable(line.substr(0, line.find_last_not_of("\r\n") + 1)));
        break;
      }
      taken += line.size();
      parser_->status_line = line.size();
      continue;
    }
    if (p.is_header_done()) {
      // Beast 1.81 asserts that it is given 5 bytes or more when it comes back to a first chunk
      // that is the last and whose end it has not seen (fixed upstream: boostorg/beast#2861);
      // fewer cannot complete it, so they wait. Past the first chunk (some body came) the next
      // chunk header starts with CR LF: "0" there is malformed, and Beast says so at once.
      if (parser_->wanting && rest.size() < 5 && rest.starts_with("0\r\n") && p.get().body().empty()) break;
    } else if (const auto end = head_end(rest.substr(0, kHeadLimit - parser_->status_line)); end == kBareLf) {
      fail("a line of its head does not end in CR LF");
      break;
    } else if (end == 0) {
      if (rest.size() >= kHeadLimit - parser_->status_line) fail(head_over());
      break;
    }
    // Whatever is there, eagerly; a chunk header or a trailer section longer than a head is refused.
    const std::size_t offer = std::min(rest.size(), kHeadLimit);
    const std::size_t n = p.put(boost::asio::buffer(rest.data(), offer), ec);
    taken += n;
    if (ec && ec != http::error::need_more) {
      fail(ec.message() + " at: " + line_at(rest, n));
      break;
    }
    if (!parser_->head_checked && p.is_header_done()) {
      parser_->head_checked = true;
      // Beast refuses most framing by both, but takes the length after a Transfer-Encoding
      // that does not end in chunked: an answer framed both ways is refused (RFC 9112 6.3).
      const auto& message = p.get();
      if (message.count(http::field::transfer_encoding) > 0 && message.count(http::field::content_length) > 0) {
        fail("both Transfer-Encoding and Content-Length");
        break;
      }
    }
    parser_->wanting = ec == http::error::need_more;
    if (p.is_done()) {
      done();
    } else if (parser_->wanting && offer == rest.size()) {
      break;
    } else if (parser_->wanting && n == 0) {
      fail("a chunk header or trailer section over " + std::to_string(kHeadLimit) + " bytes");
    }
  }
  return taken;
}

Http1Response::Progress Http1Response::end_of_stream() {
  if (progress_ != Progress::incomplete) return progress_;
  if (!started_) return fail("the connection closed without an answer");
  if (ResponseParser& p = *parser_->parser; parser_->status_line != 0 && p.is_header_done()) {
    error_code ec;
    p.put_eof(ec);  // the end of a body that runs until the close, else a partial message
    if (!ec && p.is_done()) {
      done();
      parser_.reset();
      return progress_;
    }
  }
  return fail("the connection closed in the middle of the answer");
}

Http1Response::Progress Http1Response::fail(std::string why) {
  error_ = "malformed answer: " + std::move(why);
  return progress_ = Progress::malformed;
}

Http1Response::Progress Http1Response::done() {
  ResponseParser& p = *parser_->parser;
  if (status_ < 200) {  // an interim answer: the real one follows
    if (status_ == 101) return fail("101 Switching Protocols to a POST");
    parser_->next();
    status_ = 0;
    return progress_;
  }
  // HTTP/1.0 closes unless it asks to keep alive, and so does a body that runs until the close
  // (Beast's keep_alive()); "close" wins in either version; Transfer-Encoding in HTTP/1.0 is
  // suspect framing: the connection ends after it (RFC 9112 6.1).
  auto& message = p.get();
  bool close = false;
  for (const auto& field : message) {
    if (field.name() == http::field::connection) {
      each_token(field.value(), [&](std::string_view option) { close = close || equals_ignoring_case(option, "close"); });
    }
  }
  keep_alive_ = p.keep_alive() && !close && !(message.version() == 10 && message.count(http::field::transfer_encoding) > 0);
  body_ = std::move(message.body());
  return progress_ = Progress::complete;
}

}  // namespace deviceshadow::notify
