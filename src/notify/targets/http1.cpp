#include "notify/targets/http1.hpp"

#include "deviceshadow/ascii.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <utility>

namespace deviceshadow::notify {
namespace {

// Calls `f` with each comma-separated element of a header value, trimmed.
template <typename F>
void each_token(std::string_view value, F f) {
  while (!value.empty()) {
    const std::size_t comma = value.find(',');
    if (const std::string_view element = trim_spaces_and_tabs(value.substr(0, comma)); !element.empty()) f(element);  // "a, ,b": two
    value = comma == std::string_view::npos ? std::string_view() : value.substr(comma + 1);
  }
}

}  // namespace

std::string printable(std::string_view bytes, std::size_t limit) {
  std::string out;
  for (unsigned char c : bytes.substr(0, limit)) {
    if (c >= 0x20 && c < 0x7f) {
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
  if (!bytes.empty()) started_ = true;
  while (!bytes.empty() && progress_ == Progress::incomplete) {
    if (part_ == Part::length || part_ == Part::chunk_data || part_ == Part::until_close) {
      const std::size_t take = part_ == Part::until_close ? bytes.size() : static_cast<std::size_t>(std::min<std::uint64_t>(remaining_, bytes.size()));
      keep(bytes.substr(0, take));
      bytes.remove_prefix(take);
      if (part_ == Part::until_close || (remaining_ -= take) > 0) continue;
      if (part_ == Part::length) {
        progress_ = Progress::complete;
        part_ = Part::done;
      } else {
        part_ = Part::chunk_end;
      }
      continue;
    }
    const std::size_t newline = bytes.find('\n');
    const std::string_view piece = bytes.substr(0, newline);
    const bool in_head = part_ == Part::status_line || part_ == Part::header;
    if (in_head) head_bytes_ += piece.size() + (newline == std::string_view::npos ? 0 : 1);
    if (line_.size() + piece.size() > kHeadLimit || head_bytes_ > kHeadLimit) {
      return fail("its head is over " + std::to_string(kHeadLimit) + " bytes");
    }
    line_.append(piece);
    bytes.remove_prefix(piece.size());
    if (newline == std::string_view::npos) break;
    bytes.remove_prefix(1);
    if (!line_.empty() && line_.back() == '\r') line_.pop_back();
    const std::string text = std::exchange(line_, {});
    line(text);
  }
  if (progress_ == Progress::complete && !bytes.empty()) extra_ = true;
  return progress_;
}

Http1Response::Progress Http1Response::end_of_stream() {
  if (progress_ != Progress::incomplete) return progress_;
  if (part_ == Part::until_close) {
    progress_ = Progress::complete;
    part_ = Part::done;
    return progress_;
  }
  return fail(started_ ? "the connection closed in the middle of the answer" : "the connection closed without an answer");
}

Http1Response::Progress Http1Response::fail(std::string why) {
  error_ = "malformed answer: " + std::move(why);
  return progress_ = Progress::malformed;
}

Http1Response::Progress Http1Response::line(std::string_view text) {
  switch (part_) {
    case Part::status_line: {  // HTTP/1.x SSS reason
      int status = 0;
      if (text.size() < 12 || text.substr(0, 7) != "HTTP/1." || !std::isdigit(static_cast<unsigned char>(text[7])) || text[8] != ' ' ||
          std::from_chars(text.data() + 9, text.data() + 12, status).ptr != text.data() + 12 || (text.size() > 12 && text[12] != ' ') ||
          status < 100) {
        return fail("not an HTTP/1.x status line: " + printable(text));
      }
      status_ = status;
      http10_ = text[7] == '0';
      part_ = Part::header;
      return progress_;
    }
    case Part::header: {
      if (text.empty()) return end_of_head();
      const std::size_t colon = text.find(':');
      if (colon == 0 || colon == std::string_view::npos || text.front() == ' ' || text.front() == '\t') {
        return fail("not a header line: " + printable(text));
      }
      const std::string_view name = text.substr(0, colon), value = trim_spaces_and_tabs(text.substr(colon + 1));
      if (equals_ignoring_case(name, "Content-Length")) {
        std::uint64_t length = 0;
        const auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), length);
        if (value.empty() || ec != std::errc() || end != value.data() + value.size() || (has_length_ && length != remaining_)) {
          return fail("a bad Content-Length: " + printable(value));
        }
        has_length_ = true;
        remaining_ = length;
      } else if (equals_ignoring_case(name, "Transfer-Encoding")) {
        transfer_coded_ = true;
        each_token(value, [&](std::string_view coding) { chunked_ = equals_ignoring_case(coding, "chunked"); });  // the last one counts
      } else if (equals_ignoring_case(name, "Connection")) {
        each_token(value, [&](std::string_view option) {
          close_ = close_ || equals_ignoring_case(option, "close");
          keep_alive_asked_ = keep_alive_asked_ || equals_ignoring_case(option, "keep-alive");
        });
      }
      return progress_;
    }
    case Part::chunk_size: {  // hex size [; extensions]
      const std::string_view digits = trim_spaces_and_tabs(text.substr(0, text.find(';')));
      std::uint64_t size = 0;
      const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), size, 16);
      if (digits.empty() || ec != std::errc() || end != digits.data() + digits.size()) return fail("a bad chunk size");
      remaining_ = size;
      part_ = size == 0 ? Part::trailer : Part::chunk_data;
      return progress_;
    }
    case Part::chunk_end:
      if (!text.empty()) return fail("a chunk longer than its size");
      part_ = Part::chunk_size;
      return progress_;
    case Part::trailer:
      if (text.empty()) {
        progress_ = Progress::complete;
        part_ = Part::done;
      }
      return progress_;
    default:
      return progress_;  // not reached: the other parts are not line-based
  }
}

Http1Response::Progress Http1Response::end_of_head() {
  if (status_ < 200) {  // an interim answer: the real one follows
    if (status_ == 101) return fail("101 Switching Protocols to a POST");
    *this = Http1Response{};
    started_ = true;
    return progress_;
  }
  // HTTP/1.0 closes unless it asks to keep alive; "close" wins; framing by Transfer-Encoding in
  // HTTP/1.0 or beside a Content-Length is suspect: the connection ends after it (RFC 9112 6.3).
  keep_alive_ = !close_ && (!http10_ || keep_alive_asked_) && !(transfer_coded_ && (http10_ || has_length_));
  if (status_ == 204 || status_ == 304) {
    progress_ = Progress::complete;
    part_ = Part::done;
  } else if (transfer_coded_) {
    part_ = chunked_ ? Part::chunk_size : Part::until_close;
  } else if (has_length_) {
    part_ = remaining_ == 0 ? Part::done : Part::length;
    if (remaining_ == 0) progress_ = Progress::complete;
  } else {
    part_ = Part::until_close;
  }
  if (part_ == Part::until_close) keep_alive_ = false;
  return progress_;
}

void Http1Response::keep(std::string_view data) {
  if (body_.size() < kBodyKept) body_.append(data.substr(0, kBodyKept - body_.size()));
}

}  // namespace deviceshadow::notify
