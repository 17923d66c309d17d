// The HTTP transport on its own: a handler that throws is answered 500 and the server goes on;
// a bodiless status is written without the body a handler gave it; HEAD gets the headers of the
// GET without its body; streamed responses send
// their headers first and chunks pushed later, bound what waits for a slow reader, notice a
// client that goes away and end on stop(); handlers a service says never block run on the I/O
// thread, the others on the pool, in request order either way.
#include "http/server.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <mutex>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

namespace srv = deviceshadow::http;

namespace {

// Sends one request on a new connection and returns everything the server answers until it
// closes the connection.
std::string exchange(unsigned short port, const std::string& request) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    close(fd);
    return "connect failed";
  }
  EXPECT_EQ(send(fd, request.data(), request.size(), 0), static_cast<ssize_t>(request.size()));
  std::string out;
  char buf[4096];
  for (ssize_t n; (n = recv(fd, buf, sizeof buf, 0)) > 0;) out.append(buf, static_cast<std::size_t>(n));
  close(fd);
  return out;
}

TEST(HttpServer, HandlerMistakesNeverEndTheServer) {
  srv::HttpServerOptions options;
  options.port = 0;
  options.workers = 2;
  srv::HttpServer server(
      options,
      [](const srv::HttpRequest& r) -> srv::HttpResponse {
        if (r.target == "/throw") throw std::runtime_error("handler bug");
        if (r.target == "/204") return {204, "application/json", "a body a 204 must not have", {}};
        return {200, "application/json", R"({"ok":true})", {}};
      },
      [](int status, const std::string& message) {
        return srv::HttpResponse{status, "application/json", R"({"error":")" + message + R"("})", {}};
      });
  std::thread runner([&] { server.run(); });
  const std::string thrown = exchange(server.port(), "GET /throw HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
  EXPECT_EQ(thrown.rfind("HTTP/1.1 500", 0), 0u) << thrown;
  EXPECT_NE(thrown.find(R"({"error":"internal error"})"), std::string::npos) << thrown;
  const std::string fine = exchange(server.port(), "GET /fine HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
  EXPECT_EQ(fine.rfind("HTTP/1.1 200", 0), 0u) << fine;
  const std::string empty = exchange(server.port(), "GET /204 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
  EXPECT_EQ(empty.rfind("HTTP/1.1 204", 0), 0u) << empty;
  EXPECT_EQ(empty.find("a body"), std::string::npos) << empty;
  server.stop();
  runner.join();
}

// /inline/… runs on the I/O thread, the rest on the pool; /…/throw throws.
class SplitService final : public srv::Service {
 public:
  std::mutex mutex;
  std::vector<std::pair<std::string, std::thread::id>> served;  // target, thread

  srv::HttpResponse handle(const srv::HttpRequest& r) override {
    {
      std::lock_guard lock(mutex);
      served.emplace_back(r.target, std::this_thread::get_id());
    }
    if (r.target.ends_with("/throw")) throw std::runtime_error("handler bug");
    return {200, "text/plain", r.target, {}};
  }
  srv::HttpResponse refuse(int status, const std::string& message) const override {
    return {status, "text/plain", message, {}};
  }
  std::optional<srv::HttpResponse> handle_inline(const srv::HttpRequest& r) override {
    if (r.target.starts_with("/inline/")) return handle(r);
    if (r.target.starts_with("/declined/")) {  // tried, then left to the pool
      std::lock_guard lock(mutex);
      tried.push_back(r.target);
    }
    return std::nullopt;
  }
  std::vector<std::string> tried;  // targets handle_inline declined after a try
};

TEST(HttpServer, HandlersThatNeverBlockRunOnTheIoThreadInRequestOrder) {
  srv::HttpServerOptions options;
  options.port = 0;
  options.workers = 2;
  SplitService service;
  srv::HttpServer server(options, [&service](std::string_view) -> srv::Service& { return service; });
  std::promise<std::thread::id> io_thread;  // run() serves I/O on its caller's thread (io_threads = 1)
  std::thread runner([&] {
    io_thread.set_value(std::this_thread::get_id());
    server.run();
  });
  const std::thread::id io = io_thread.get_future().get();
  // Pipelined on one connection, alternating: the answers come in request order.
  const std::string out = exchange(server.port(), "GET /pool/1 HTTP/1.1\r\nHost: x\r\n\r\n"
                                                  "GET /inline/2 HTTP/1.1\r\nHost: x\r\n\r\n"
                                                  "GET /inline/throw HTTP/1.1\r\nHost: x\r\n\r\n"
                                                  "GET /pool/3 HTTP/1.1\r\nHost: x\r\n\r\n"
                                                  "GET /declined/4 HTTP/1.1\r\nHost: x\r\n\r\n"
                                                  "GET /inline/5 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
  std::size_t at = 0;
  for (const char* body : {"/pool/1", "/inline/2", "internal error", "/pool/3", "/declined/4", "/inline/5"}) {
    const std::size_t found = out.find(body, at);
    ASSERT_NE(found, std::string::npos) << body << " in order in " << out;
    at = found;
  }
  EXPECT_NE(out.find("HTTP/1.1 500"), std::string::npos) << out;
  server.stop();
  runner.join();
  ASSERT_EQ(service.served.size(), 6u);  // each once
  EXPECT_EQ(service.tried, std::vector<std::string>{"/declined/4"});
  for (const auto& [target, thread] : service.served) {
    if (target.starts_with("/inline/")) {
      EXPECT_EQ(thread, io) << target;
    } else {
      EXPECT_NE(thread, io) << target;
    }
  }
}

TEST(HttpServer, TheTransportOwnsTheFramingHeaders) {
  srv::HttpServerOptions options;
  options.port = 0;
  options.workers = 2;
  srv::HttpServer server(
      options,
      [](const srv::HttpRequest&) {
        return srv::HttpResponse{200, "application/json", "four",
                                 {{"content-type", "text/plain"}, {"Connection", "close"}, {"Content-Length", "99"},
                                  {"X-A", "1"}, {"x-a", "2"}}};
      },
      [](int status, const std::string&) { return srv::HttpResponse{status, "application/json", "{}", {}}; });
  std::thread runner([&] { server.run(); });
  // HTTP/1.0 asking to keep the connection: kept (the second answer comes), said so, and the
  // service's Connection and Content-Length do not count.
  const std::string out = exchange(server.port(), "GET /a HTTP/1.0\r\nConnection: keep-alive\r\n\r\n"
                                                  "GET /b HTTP/1.0\r\n\r\n");
  const std::string first = out.substr(0, out.find("HTTP/1.0 200", 1));
  EXPECT_EQ(first,
            "HTTP/1.0 200 OK\r\nServer: shadowd\r\ncontent-type: text/plain\r\nx-a: 2\r\n"
            "Connection: keep-alive\r\nContent-Length: 4\r\n\r\nfour")
      << out;
  EXPECT_NE(out.find("HTTP/1.0 200", 1), std::string::npos) << out;
  server.stop();
  runner.join();
}

int connect_to(unsigned short port) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) ADD_FAILURE() << "connect failed";
  return fd;
}

// Reads from fd until `needle` has arrived or the connection closes; returns what came.
std::string read_until(int fd, const std::string& needle, std::string seen = {}) {
  char buf[4096];
  while (seen.find(needle) == std::string::npos) {
    ssize_t n = recv(fd, buf, sizeof buf, 0);
    if (n <= 0) break;
    seen.append(buf, static_cast<std::size_t>(n));
  }
  return seen;
}

template <class F>
bool eventually(F condition) {
  for (auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20); std::chrono::steady_clock::now() < deadline;) {
    if (condition()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return condition();
}

// A server whose /stream hands each stream to `streams` (a promise per test).
struct StreamServer {
  std::promise<std::shared_ptr<srv::ResponseStream>> opened;
  std::atomic<int> ended{0};
  std::size_t buffer = 1 << 20;
  std::unique_ptr<srv::HttpServer> server;
  std::thread runner;

  explicit StreamServer(std::size_t stream_buffer = 1 << 20) : buffer(stream_buffer) {
    srv::HttpServerOptions options;
    options.port = 0;
    options.workers = 2;
    options.read_timeout = std::chrono::milliseconds(2000);
    server = std::make_unique<srv::HttpServer>(
        options,
        [this](const srv::HttpRequest&) {
          srv::HttpResponse r{200, "text/event-stream", "", {{"Cache-Control", "no-cache"}}};
          r.stream_buffer = buffer;
          r.stream = [this](std::shared_ptr<srv::ResponseStream> stream) {
            stream->on_end([this] { ++ended; });
            opened.set_value(std::move(stream));
          };
          return r;
        },
        [](int status, const std::string&) { return srv::HttpResponse{status, "application/json", "{}", {}}; });
    runner = std::thread([this] { server->run(); });
  }
  ~StreamServer() {
    server->stop();
    runner.join();
  }
  // Connects and asks for the stream in HTTP/`version`; returns the socket.
  int request(std::string_view version) {
    int fd = connect_to(server->port());
    const std::string text = "GET /stream HTTP/" + std::string(version) + "\r\nHost: x\r\n\r\n";
    EXPECT_EQ(send(fd, text.data(), text.size(), 0), static_cast<ssize_t>(text.size()));
    return fd;
  }
};

TEST(HttpServer, HeadGetsTheHeadersOfTheGetAndNoBody) {
  srv::HttpServerOptions options;
  options.port = 0;
  options.workers = 2;
  srv::HttpServer server(
      options, [](const srv::HttpRequest&) { return srv::HttpResponse{200, "text/plain", "eleven byte", {}}; },
      [](int status, const std::string& message) { return srv::HttpResponse{status, "text/plain", message, {}}; });
  std::thread runner([&] { server.run(); });
  // Pipelined on one connection: the GET's answer must follow the HEAD's headers directly.
  const std::string both = exchange(server.port(), "HEAD /a HTTP/1.1\r\nHost: x\r\n\r\n"
                                                   "GET /a HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
  const std::size_t second = both.find("HTTP/1.1 200", 1);
  ASSERT_NE(second, std::string::npos) << both;
  const std::string head = both.substr(0, second);
  EXPECT_EQ(head.rfind("HTTP/1.1 200", 0), 0u) << both;
  EXPECT_NE(head.find("Content-Length: 11\r\n"), std::string::npos) << head;
  EXPECT_EQ(head.substr(head.size() - 4), "\r\n\r\n") << head;  // the headers, and nothing after them
  EXPECT_EQ(both.substr(second).find("eleven byte"), both.size() - second - 11) << both;
  server.stop();
  runner.join();
}

TEST(HttpServer, StreamsHeadersThenChunksPushedFromAnyThread) {
  StreamServer s;
  int fd = s.request("1.1");
  std::string got = read_until(fd, "\r\n\r\n");
  EXPECT_EQ(got.rfind("HTTP/1.1 200", 0), 0u) << got;
  EXPECT_NE(got.find("Transfer-Encoding: chunked"), std::string::npos) << got;
  EXPECT_NE(got.find("Content-Type: text/event-stream"), std::string::npos) << got;
  auto stream = s.opened.get_future().get();
  std::thread([stream] { EXPECT_EQ(stream->push("data: one\n\n"), srv::ResponseStream::Push::queued); }).join();
  got = read_until(fd, "data: one\n\n", got);
  EXPECT_NE(got.find("b\r\ndata: one\n\n\r\n"), std::string::npos) << got;
  stream->finish("data: last\n\n");
  EXPECT_EQ(stream->push("late"), srv::ResponseStream::Push::ended);
  got = read_until(fd, "0\r\n\r\n", got);
  EXPECT_NE(got.find("data: last\n\n\r\n0\r\n\r\n"), std::string::npos) << got;
  EXPECT_TRUE(eventually([&] { return s.ended == 1; }));
  EXPECT_TRUE(eventually([&] { return s.server->stats().open_streams == 0; }));
  close(fd);
}

// Pieces queued faster than they are written go out together (one chunk of many pieces, more
// than one gathering write takes), whole and in order; a buffer pushed several times, each time.
TEST(HttpServer, AStreamWritesManyQueuedPiecesWholeAndInOrder) {
  StreamServer s;
  int fd = s.request("1.1");
  std::string got = read_until(fd, "\r\n\r\n");
  const std::size_t body = got.find("\r\n\r\n") + 4;
  auto stream = s.opened.get_future().get();
  const srv::SharedBytes shared = std::make_shared<const std::string>("data: shared\n\n");
  std::string expected;
  for (int i = 0; i < 500; ++i) {
    const std::string piece = "data: " + std::to_string(i) + "\n\n";
    ASSERT_EQ(stream->push(piece), srv::ResponseStream::Push::queued);
    ASSERT_EQ(stream->push(shared), srv::ResponseStream::Push::queued);
    expected += piece + *shared;
  }
  stream->finish("data: last\n\n");
  expected += "data: last\n\n";
  got = read_until(fd, "\r\n0\r\n\r\n", got);
  // Undo the chunking: each chunk is its size in hex, CRLF, the bytes, CRLF.
  std::string bytes;
  std::size_t chunks = 0;
  for (std::size_t at = body;; ++chunks) {
    const std::size_t eol = got.find("\r\n", at);
    ASSERT_NE(eol, std::string::npos) << got.substr(at);
    const std::size_t size = std::stoul(got.substr(at, eol - at), nullptr, 16);
    if (size == 0) break;
    bytes += got.substr(eol + 2, size);
    ASSERT_EQ(got.substr(eol + 2 + size, 2), "\r\n");
    at = eol + 2 + size + 2;
  }
  EXPECT_EQ(bytes, expected);
  // 1,001 pushes from a loop that never waits, written by a strand that waits for the socket
  // each time: some go out together.
  EXPECT_LT(chunks, 1001u);
  close(fd);
}

// HTTP/1.0 has no chunks: the stream's bytes are the body as they are, and the connection's
// close ends it.
TEST(HttpServer, AStreamToAnHttp10ClientIsItsBytesUntilTheConnectionCloses) {
  StreamServer s;
  int fd = s.request("1.0");
  std::string got = read_until(fd, "\r\n\r\n");
  auto stream = s.opened.get_future().get();
  ASSERT_EQ(stream->push("data: a\n\n"), srv::ResponseStream::Push::queued);
  stream->finish("data: b\n\n");
  got = read_until(fd, "never sent", got);  // until the server closes
  EXPECT_EQ(got.rfind("HTTP/1.0 200", 0), 0u) << got;
  EXPECT_EQ(got.find("chunked"), std::string::npos) << got;
  EXPECT_EQ(got.substr(got.find("\r\n\r\n") + 4), "data: a\n\ndata: b\n\n");
  close(fd);
}

// Finishing with nothing queued and nothing last ends an HTTP/1.0 stream's body there.
TEST(HttpServer, AnHttp10StreamFinishedEmptyEndsItsBody) {
  StreamServer s;
  int fd = s.request("1.0");
  auto stream = s.opened.get_future().get();
  stream->finish({});
  const std::string got = read_until(fd, "never sent");  // until the server closes
  EXPECT_EQ(got.rfind("HTTP/1.0 200", 0), 0u) << got;
  EXPECT_TRUE(got.ends_with("\r\n\r\n")) << got;
  EXPECT_TRUE(eventually([&] { return s.ended == 1; }));
  close(fd);
}

// A piece larger than the bound goes when nothing waits; while it is being written, the bound
// holds for what comes after it, so the next message is not refused for its sake.
TEST(HttpServer, AStreamTakesMoreWhileAPieceLargerThanItsBoundIsWritten) {
  StreamServer s(64 << 10);
  int fd = s.request("1.1");
  auto stream = s.opened.get_future().get();
  // The client reads nothing: 64 MiB cannot all be in the kernel's buffers, so its write lasts.
  EXPECT_EQ(stream->push(std::string(64 << 20, 'x')), srv::ResponseStream::Push::queued);
  EXPECT_EQ(stream->push(std::string(16 << 10, 'y')), srv::ResponseStream::Push::queued);
  EXPECT_EQ(stream->push(std::string(48 << 10, 'z')), srv::ResponseStream::Push::queued);
  EXPECT_EQ(stream->push(std::string(1, '!')), srv::ResponseStream::Push::full);  // the bound, past the large one
  close(fd);
  EXPECT_TRUE(eventually([&] { return s.ended == 1 && stream->ended(); }));
}

TEST(HttpServer, AStreamBoundsWhatWaitsForASlowReader) {
  StreamServer s(64 << 10);
  int fd = s.request("1.1");
  auto stream = s.opened.get_future().get();
  // A piece larger than the bound is taken when nothing waits (else refused, as below).
  EXPECT_EQ(stream->push(std::string(65 << 10, 'x')), srv::ResponseStream::Push::queued);
  // The client reads nothing: the kernel's buffers fill, then the stream's bound.
  const std::string piece(16 << 10, 'y');
  bool full = eventually([&] { return stream->push(piece) == srv::ResponseStream::Push::full; });
  EXPECT_TRUE(full);
  EXPECT_FALSE(stream->ended());
  // The client reads again: what waited is written, and a producer waiting for room hears of it.
  std::atomic<bool> reading{true};
  std::thread reader([&] {
    char buf[1 << 16];
    while (reading) {
      if (recv(fd, buf, sizeof buf, MSG_DONTWAIT) <= 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  });
  EXPECT_TRUE(stream->wait_below(0, std::chrono::seconds(20)));
  reading = false;
  reader.join();
  close(fd);  // the client goes away: the stream ends and its producer hears of it
  EXPECT_TRUE(eventually([&] { return s.ended == 1 && stream->ended(); }));
  EXPECT_EQ(stream->push("more"), srv::ResponseStream::Push::ended);
}

TEST(HttpServer, StopEndsOpenStreams) {
  auto s = std::make_unique<StreamServer>();
  int fd = s->request("1.1");
  auto stream = s->opened.get_future().get();
  ASSERT_EQ(stream->push("data: a\n\n"), srv::ResponseStream::Push::queued);
  s->server->stop();
  std::string got = read_until(fd, "0\r\n\r\n");
  EXPECT_NE(got.find("data: a\n\n\r\n0\r\n\r\n"), std::string::npos) << got;  // ended cleanly
  s->runner.join();  // run() returns: nothing waits for the stream
  EXPECT_TRUE(stream->ended());
  EXPECT_EQ(s->ended, 1);
  s->runner = std::thread([] {});
  close(fd);
}

}  // namespace
