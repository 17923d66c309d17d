// libFuzzer target over the webhook client's HTTP/1.x response reader (what a receiver may send
// back). Input: one byte choosing how the rest is split into pieces, and whether the peer
// closes after it; then the bytes as they arrive. Besides crashes, leaks and UB it traps when
// a split reads differently from the whole, or on broken invariants.
#include "notify/targets/http1.hpp"

#include <cstdint>
#include <string_view>

namespace notify = deviceshadow::notify;

namespace {

void check(bool ok) {
  if (!ok) __builtin_trap();
}

notify::Http1Response::Progress read(notify::Http1Response& r, std::string_view bytes, std::size_t piece, bool close) {
  auto progress = notify::Http1Response::Progress::incomplete;
  for (std::size_t at = 0; at < bytes.size(); at += piece) {
    const auto before = progress;
    progress = r.feed(bytes.substr(at, piece));
    check(before == notify::Http1Response::Progress::incomplete || progress == before);  // settled stays settled
  }
  return close ? r.end_of_stream() : progress;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 1) return 0;
  const std::size_t piece = 1 + (data[0] & 0x3f);
  const bool close = data[0] & 0x80;
  const std::string_view bytes(reinterpret_cast<const char*>(data + 1), size - 1);

  notify::Http1Response whole, split;
  const auto a = read(whole, bytes, bytes.size() + 1, close);
  const auto b = read(split, bytes, piece, close);
  check(a == b);
  check(whole.status() == split.status() && whole.reusable() == split.reusable() && whole.body() == split.body());
  check(whole.body().size() <= notify::Http1Response::kBodyKept);
  if (a == notify::Http1Response::Progress::complete) check(whole.status() >= 200 && whole.status() <= 999 && whole.error().empty());
  if (a == notify::Http1Response::Progress::malformed) {
    check(whole.error().rfind("malformed answer: ", 0) == 0);
    for (const char c : whole.error()) check(c >= 0x20 && c < 0x7f);
  }
  return 0;
}
