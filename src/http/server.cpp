// The only translation unit that includes Boost.Asio and Beast's server side (the webhook
// client's http1.cpp includes Beast's response parser alone).
#include "http/server.hpp"

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include <pthread.h>

#include <array>
#include <charconv>
#include <condition_variable>
#include <csignal>
#include <cstdio>
#include <list>
#include <mutex>
#include <optional>
#include <span>
#include <thread>

namespace deviceshadow::http {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace bhttp = beast::http;
using tcp = asio::ip::tcp;

namespace {

// Reports a failure no handler reports: to `logger`, or as a plain line on stderr without one or
// when logging itself fails (out of memory). Never throws.
void report_failure(Logger* logger, const char* what, const std::exception& e) noexcept {
  try {
    if (logger) return logger->log(LogLevel::error, what, {{"error", e.what()}});
  } catch (...) {
  }
  std::fprintf(stderr, "shadowd: %s: %s\n", what, e.what());
}

// Room in a connection's read buffer beyond the header limit: one read's worth of body bytes.
// A chunk-size line with its extensions, or a trailer section, must fit in the buffer, so this
// also bounds them (the parser needs each whole before it can go on).
constexpr std::size_t kReadSlack = 8 << 10;
constexpr auto kAcceptBackoff = std::chrono::milliseconds(100);
constexpr auto kStopGrace = std::chrono::seconds(2);  // for a body still arriving when the server stops
// Responses this small are never shed: refusing them would save nothing.
constexpr std::size_t kNeverShedBytes = 16 << 10;

// The whole answer to a connection over max_connections.
const std::string& overloaded_response() {
  static const std::string response = [] {
    const std::string body = R"({"error":{"code":"unavailable","message":"too many open connections; retry in a moment"}})";
    return "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nConnection: close\r\n"
           "Retry-After: 1\r\nContent-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
  }();
  return response;
}

// Why a request's framing is ambiguous under RFC 9112 §6, or empty when it is not. Beast
// already refuses a chunked Transfer-Encoding beside Content-Length and differing
// Content-Length values; what it lets through is a Transfer-Encoding that does not end in
// chunked (it would then read the body as the next request) and repeated Content-Length.
std::string ambiguous_framing(const bhttp::request_parser<bhttp::string_body>::value_type& header) {
  auto [te_begin, te_end] = header.equal_range(bhttp::field::transfer_encoding);
  auto [cl_begin, cl_end] = header.equal_range(bhttp::field::content_length);
  const auto te_count = std::distance(te_begin, te_end);
  const auto cl_count = std::distance(cl_begin, cl_end);
  if (te_count > 0 && cl_count > 0) return "Transfer-Encoding and Content-Length together";
  if (te_count > 1) return "repeated Transfer-Encoding";
  if (te_count == 1) {
    bhttp::token_list codings(te_begin->value());
    auto first = codings.begin();
    if (first == codings.end() || !beast::iequals(*first, "chunked") || ++first != codings.end()) {
      return "unsupported Transfer-Encoding (only \"chunked\" is accepted)";
    }
  }
  if (cl_count > 1 || (cl_count == 1 && cl_begin->value().find(',') != beast::string_view::npos)) {
    return "repeated Content-Length";
  }
  return {};
}

// Renders a response's status line and headers into `out` as Beast's serializer would: Server,
// Content-Type, the response's own headers (a later one replaces an earlier one of the same
// name; Server and the framing headers are the transport's), Connection when it departs from the
// version's default, Content-Length (of the body a GET would get, also for HEAD) unless
// `bodiless`.
void render_head(const HttpResponse& response, unsigned version, bool keep_alive, bool bodiless, std::string& out) {
  const auto reason = bhttp::obsolete_reason(static_cast<bhttp::status>(response.status));
  out.assign(version == 10 ? "HTTP/1.0 " : "HTTP/1.1 ");
  char number[24];
  auto digits = [&number](auto n) { return std::string_view(number, std::to_chars(number, number + sizeof number, n).ptr); };
  out.append(digits(response.status));
  out += ' ';
  out.append(reason.data(), reason.size());
  out += "\r\nServer: shadowd\r\n";
  auto field = [&out](std::string_view name, std::string_view value) {
    out.append(name);
    out += ": ";
    out.append(value);
    out += "\r\n";
  };
  auto replaced = [&response](std::size_t i) {  // by a later header of the same name
    for (std::size_t j = i + 1; j < response.headers.size(); ++j) {
      if (beast::iequals(response.headers[j].first, response.headers[i].first)) return true;
    }
    return false;
  };
  bool own_type = false;
  for (const auto& [name, value] : response.headers) own_type = own_type || beast::iequals(name, "Content-Type");
  if (!own_type) field("Content-Type", response.content_type);
  for (std::size_t i = 0; i < response.headers.size(); ++i) {
    const auto& [name, value] = response.headers[i];
    if (beast::iequals(name, "Content-Length") || beast::iequals(name, "Transfer-Encoding") ||
        beast::iequals(name, "Connection") || beast::iequals(name, "Server") || replaced(i)) {
      continue;
    }
    field(name, value);
  }
  if (version == 10 && keep_alive) field("Connection", "keep-alive");
  if (version != 10 && !keep_alive) field("Connection", "close");
  if (!bodiless) field("Content-Length", digits(response.body.size()));
  out += "\r\n";
}

const sigset_t& shutdown_signals() {
  static const sigset_t set = [] {
    sigset_t s;
    ::sigemptyset(&s);
    ::sigaddset(&s, SIGINT);
    ::sigaddset(&s, SIGTERM);
    // The terminal went away; unless SIGHUP was ignored when the process started (nohup).
    struct sigaction hup {};
    if (::sigaction(SIGHUP, nullptr, &hup) == 0 && hup.sa_handler != SIG_IGN) ::sigaddset(&s, SIGHUP);
    return s;
  }();
  return set;
}

}  // namespace

class Session;

// The stream of a streamed response (ResponseStream): the bytes pushed wait here until the
// session's strand writes them. Producers hold it by shared_ptr, the session too; it holds
// the session weakly, so a producer never keeps a connection alive.
class StreamState final : public ResponseStream {
 public:
  // The session holds the queue (flushing_) until it has sent the headers.
  StreamState(std::weak_ptr<Session> session, std::size_t limit) : session_(std::move(session)), limit_(limit) {}

  using ResponseStream::push;
  Push push(SharedBytes bytes) override {
    std::unique_lock lock(mutex_);
    if (ended_ || finishing_) return Push::ended;
    // A piece larger than the bound goes when nothing waits, and does not count against the
    // bound while it waits: the bound holds for the others.
    const std::size_t waiting = queued_bytes_ + writing_;
    if (waiting > 0 && waiting - large_queued_ - large_writing_ + bytes->size() > limit_) return Push::full;
    queue(std::move(bytes));
    return schedule(lock) ? Push::queued : Push::ended;
  }

  void finish(std::string_view last) override {
    auto bytes = std::make_shared<const std::string>(last);
    std::unique_lock lock(mutex_);
    if (ended_ || finishing_) return;
    finishing_ = true;
    queue(std::move(bytes));
    room_.notify_all();  // a producer in wait_below() learns at once that the stream ends
    schedule(lock);
  }

  bool ended() const override {
    std::lock_guard lock(mutex_);
    return ended_ || finishing_;
  }

  bool wait_below(std::size_t bytes, std::chrono::milliseconds timeout) override {
    std::unique_lock lock(mutex_);
    room_.wait_for(lock, timeout, [&] { return ended_ || finishing_ || queued_bytes_ + writing_ <= bytes; });
    return !ended_ && !finishing_ && queued_bytes_ + writing_ <= bytes;
  }

  void on_end(std::function<void()> callback) override {
    {
      std::lock_guard lock(mutex_);
      if (!ended_) return on_end_.push_back(std::move(callback));
    }
    callback();
  }

  // What the session writes next: the pieces taken from the queue, their size, and whether they
  // are the stream's last.
  struct Taken {
    std::vector<SharedBytes> pieces;
    std::size_t bytes = 0;
    bool last = false;
  };
  // For the session, on its strand: moves the queue into `out`, whose pieces must be empty (their
  // vector becomes the queue's).
  void take(Taken& out) {
    std::lock_guard lock(mutex_);
    out.pieces.swap(queued_);
    out.bytes = writing_ = queued_bytes_;
    large_writing_ = large_queued_;
    queued_bytes_ = large_queued_ = 0;
    out.last = finishing_;
    if (out.bytes == 0) flushing_ = false;
  }
  void written() {
    {
      std::lock_guard lock(mutex_);
      writing_ = large_writing_ = 0;
    }
    room_.notify_all();
  }
  // Marks the stream ended and runs the callbacks; true the first time.
  bool end() {
    std::vector<std::function<void()>> callbacks;
    {
      std::lock_guard lock(mutex_);
      if (ended_) return false;
      ended_ = true;
      queued_.clear();
      queued_bytes_ = large_queued_ = 0;
      callbacks.swap(on_end_);
    }
    room_.notify_all();
    for (auto& callback : callbacks) callback();
    return true;
  }

 private:
  // Has the session write the queue unless it is already at it; false when the session is gone.
  bool schedule(std::unique_lock<std::mutex>& lock);
  void queue(SharedBytes bytes) {
    if (bytes->empty()) return;
    queued_bytes_ += bytes->size();
    if (bytes->size() > limit_) large_queued_ += bytes->size();
    queued_.push_back(std::move(bytes));
  }

  std::weak_ptr<Session> session_;
  const std::size_t limit_;
  mutable std::mutex mutex_;
  std::condition_variable room_;
  std::vector<SharedBytes> queued_;
  std::size_t queued_bytes_ = 0;
  std::size_t writing_ = 0;  // bytes of the write in progress
  // Of queued_bytes_ and writing_, those of pieces larger than limit_ (one at a time).
  std::size_t large_queued_ = 0;
  std::size_t large_writing_ = 0;
  bool flushing_ = true;     // the session's strand has the queue
  bool finishing_ = false;
  bool ended_ = false;
  std::vector<std::function<void()>> on_end_;
};

// The handler pool: an io_context run by threads of its own, not asio's thread_pool, whose
// constructor waits forever for the threads it started when one cannot start (here the start
// fails), and whose threads end the process when a handler throws (here, out of memory while
// answering, the handler's request is lost and the thread goes on).
class WorkerPool {
 public:
  WorkerPool(std::size_t threads, Logger* logger)
      : logger_(logger), context_(static_cast<int>(threads)), work_(asio::make_work_guard(context_)) {
    threads_.reserve(threads);  // so that only a thread's start can fail below
    try {
      for (std::size_t i = 0; i < threads; ++i) threads_.emplace_back([this] { run(); });
    } catch (const std::system_error& e) {
      context_.stop();
      for (std::thread& t : threads_) t.join();
      throw std::runtime_error("cannot start " + std::to_string(threads) + " worker threads: " + e.what());
    }
  }
  ~WorkerPool() { join(); }
  WorkerPool(const WorkerPool&) = delete;
  WorkerPool& operator=(const WorkerPool&) = delete;

  asio::io_context::executor_type get_executor() noexcept { return context_.get_executor(); }
  // Returns once every handler posted has run. Not concurrently with itself.
  void join() {
    work_.reset();
    for (std::thread& t : threads_) {
      if (t.joinable()) t.join();
    }
  }

 private:
  void run() {
    for (;;) {
      try {
        context_.run();  // returns once join() let go and no handler is left
        return;
      } catch (const std::exception& e) {
        report_failure(logger_, "a request was dropped", e);
      }
    }
  }

  Logger* logger_;
  asio::io_context context_;
  asio::executor_work_guard<asio::io_context::executor_type> work_;
  std::vector<std::thread> threads_;
};

struct HttpServer::Impl {
  HttpServerOptions options;
  Router router;
  HttpStats stats;
  // Every open session, for shutdown; a session removes its own entry when destroyed (O(1)).
  // Declared before the contexts, so a session a context still holds at its end can remove it.
  std::mutex sessions_mutex;
  std::list<std::weak_ptr<Session>> sessions;
  asio::io_context io;
  WorkerPool workers;
  tcp::acceptor acceptor;
  asio::steady_timer accept_backoff;
  asio::signal_set signals;
  std::atomic<bool> stopping{false};

  Impl(HttpServerOptions o, Router r)
      : options(std::move(o)),
        router(std::move(r)),
        io(static_cast<int>(options.io_threads)),
        workers(options.workers, options.logger),
        acceptor(io),
        accept_backoff(io),
        signals(io, SIGINT, SIGTERM) {
    if (::sigismember(&shutdown_signals(), SIGHUP) == 1) signals.add(SIGHUP);
  }

  void accept();
  void admit(tcp::socket socket);
  void begin_stop();
  void run_io();
};

class Session : public std::enable_shared_from_this<Session> {
 public:
  Session(tcp::socket socket, HttpServer::Impl& server)
      : stream_(std::move(socket)), buffer_(server.options.max_header_bytes + kReadSlack), server_(server) {
    on_chunk_header_ = [this](std::uint64_t size, beast::string_view extensions, beast::error_code& ec) {
      count_chunk(size, extensions, ec);
    };
  }

  ~Session() {
    if (streamed_ && streamed_->end()) --server_.stats.open_streams;
    if (!listed_) return;  // admitting it failed (out of memory) before it was listed
    std::lock_guard lock(server_.sessions_mutex);
    server_.sessions.erase(entry_);
    --server_.stats.open_connections;
  }

  void start(std::list<std::weak_ptr<Session>>::iterator entry) {
    entry_ = entry;
    listed_ = true;
    asio::dispatch(stream_.get_executor(), [self = shared_from_this()] { self->read_request(); });
  }

  // Closes the connection if it is waiting for a request, and finishes a streamed response; a
  // request being served finishes first, and one whose body is still arriving has at most
  // kStopGrace more to arrive (a stalled client must not hold the stop for its read timeout).
  void close_if_idle() {
    asio::post(stream_.get_executor(), [self = shared_from_this()] {
      if (self->idle_) self->stream_.socket().close();
      if (self->reading_body_) {  // (the stream's own timeout cannot be shortened while it reads)
        auto grace = std::make_shared<asio::steady_timer>(self->stream_.get_executor(), kStopGrace);
        grace->async_wait([self, grace](beast::error_code ec) {
          if (!ec && self->reading_body_) self->stream_.socket().close();
        });
      }
      if (self->streamed_) self->streamed_->finish({});
    });
  }

  // Writes what the streamed response queued, then goes on while there is more (on the strand):
  // its pieces as they are, in one gathering write (one chunk on HTTP/1.1; asio sends up to 16
  // buffers a system call).
  void flush_stream() {
    streamed_->take(taken_);
    if (taken_.bytes == 0 && !taken_.last) return;  // the queue was drained; a push schedules again
    if (taken_.last) arm_finish_timer();
    gather_.clear();
    if (chunked_ && taken_.bytes > 0) {
      chunk_header_.resize(20);
      chunk_header_.resize(static_cast<std::size_t>(std::snprintf(chunk_header_.data(), 20, "%zx\r\n", taken_.bytes)));
      gather_.push_back(asio::buffer(chunk_header_));
    }
    for (const SharedBytes& piece : taken_.pieces) gather_.push_back(asio::buffer(*piece));
    static constexpr std::string_view kChunkEnd = "\r\n", kLastChunk = "\r\n0\r\n\r\n";
    if (chunked_) {
      const std::string_view end = taken_.last ? (taken_.bytes > 0 ? kLastChunk : kLastChunk.substr(2)) : kChunkEnd;
      gather_.push_back(asio::buffer(end.data(), end.size()));
    }
    const std::span<const asio::const_buffer> buffers(gather_);  // not a copy of the vector
    asio::async_write(stream_, buffers, [self = shared_from_this()](beast::error_code ec, std::size_t) {
      self->release_stream_buffers();
      self->streamed_->written();
      if (ec || self->taken_.last) return self->end_stream();
      self->flush_stream();
    });
  }

  // The pieces written go (outside the stream's lock); the vectors are kept for the next write,
  // unless a burst grew them (an idle stream holds next to nothing).
  void release_stream_buffers() {
    constexpr std::size_t kKept = 64;
    taken_.pieces.clear();
    if (taken_.pieces.capacity() > kKept) std::vector<SharedBytes>().swap(taken_.pieces);
    if (gather_.capacity() > kKept + 2) std::vector<asio::const_buffer>().swap(gather_);
  }

 private:
  // Between keep-alive requests: wait up to the idle timeout for the next request's first
  // bytes, then give the whole request the read timeout.
  void await_next_request() {
    if (server_.stopping) return close();
    if (buffer_.size() > 0) return read_request();  // pipelined: already here
    idle_ = true;
    stream_.expires_after(server_.options.idle_timeout);
    stream_.async_read_some(buffer_.prepare(kReadSlack), [self = shared_from_this()](beast::error_code ec, std::size_t n) {
      if (ec) return self->close();
      self->buffer_.commit(n);
      self->read_request();
    });
  }

  void read_request() {
    if (server_.stopping && buffer_.size() == 0) return close();
    parser_.emplace();
    parser_->header_limit(static_cast<std::uint32_t>(server_.options.max_header_bytes));
    parser_->body_limit(server_.options.max_body_bytes);
    parser_->on_chunk_header(on_chunk_header_);
    chunked_bytes_ = 0;
    idle_ = true;
    stream_.expires_after(server_.options.read_timeout);
    bhttp::async_read_header(stream_, buffer_, *parser_,
                            [self = shared_from_this()](beast::error_code ec, std::size_t) { self->on_header(ec); });
  }

  // Chunk-size lines and extensions count against the body limit with the chunks themselves,
  // so a body of endless tiny chunks or long extensions ends like an oversized one.
  void count_chunk(std::uint64_t size, beast::string_view extensions, beast::error_code& ec) {
    chunked_bytes_ += size + extensions.size() + 20;  // 20: the size's hex digits and CRLFs, at most
    if (chunked_bytes_ > server_.options.max_body_bytes) ec = bhttp::error::body_limit;
  }

  // The service of the request being read, by its target: "" when the request line was not
  // read. The line may have been read even when the headers were not (Beast checks a
  // Content-Length over the body limit while it reads them).
  void choose_service() {
    const auto target = parser_->get().target();
    service_ = &server_.router(std::string_view(target.data(), target.size()));
  }

  void on_header(beast::error_code ec) {
    if (ec) return on_error(ec);
    idle_ = false;
    choose_service();
    if (std::string why = ambiguous_framing(parser_->get()); !why.empty()) {
      return reject(400, "malformed HTTP request: " + why);
    }
    reading_body_ = true;
    bhttp::async_read(stream_, buffer_, *parser_,
                     [self = shared_from_this()](beast::error_code ec, std::size_t) { self->on_read(ec); });
  }

  void on_read(beast::error_code ec) {
    reading_body_ = false;
    if (ec) return on_error(ec);
    bhttp::request<bhttp::string_body> req = parser_->release();
    const bool keep_alive = req.keep_alive();
    const unsigned version = req.version();
    const bool head = req.method() == bhttp::verb::head;
    HttpRequest request;
    request.method = std::string(req.method_string());
    request.target = std::string(req.target());
    request.authorization = std::string(req[bhttp::field::authorization]);
    request.body = std::move(req.body());
    request.headers.reserve(static_cast<std::size_t>(std::distance(req.begin(), req.end())));
    for (const auto& field : req) request.headers.emplace_back(field.name_string(), field.value());
    if (std::optional<HttpResponse> now = answer_inline(*service_, request)) return write(std::move(*now), keep_alive, version, head);
    stream_.expires_never();  // the handler may take its time; the client waits
    // The work guard keeps the I/O loop running (even while stopping) until the response is out.
    auto work = asio::make_work_guard(stream_.get_executor());
    asio::post(server_.workers.get_executor(), [self = shared_from_this(), request = std::move(request), keep_alive,
                                                version, head, work = std::move(work)]() mutable {
      HttpResponse response = answer(*self->service_, request);
      asio::post(self->stream_.get_executor(), [self, response = std::move(response), keep_alive, version, head]() mutable {
        self->write(std::move(response), keep_alive, version, head);
      });
      work.reset();
    });
  }

  // The service's response; a 500 if the handler broke its promise not to throw.
  static HttpResponse answer(Service& service, const HttpRequest& request) {
    try {
      return service.handle(request);
    } catch (const std::exception&) {
      return service.refuse(500, "internal error");
    }
  }
  static std::optional<HttpResponse> answer_inline(Service& service, const HttpRequest& request) {
    try {
      return service.handle_inline(request);
    } catch (const std::exception&) {
      return service.refuse(500, "internal error");
    }
  }

  void on_error(beast::error_code ec) {
    const auto& limits = server_.options;
    choose_service();
    if (ec == bhttp::error::body_limit) return reject(413, "request body exceeds " + std::to_string(limits.max_body_bytes) + " bytes");
    if (ec == bhttp::error::header_limit) return reject(431, "request headers too large");
    if (ec == bhttp::error::buffer_overflow) {
      return reject(400, "malformed HTTP request: a chunk-size line or the trailer exceeds " +
                             std::to_string(limits.max_header_bytes) + " bytes");
    }
    if (ec.category() == bhttp::make_error_code(bhttp::error::bad_target).category() &&
        ec != bhttp::error::end_of_stream && ec != bhttp::error::partial_message) {
      return reject(400, "malformed HTTP request: " + ec.message());
    }
    close();  // end of stream, timeout, reset, aborted
  }

  // Answers a request that could not be read, then closes the connection.
  void reject(int status, const std::string& message) {
    ++server_.stats.rejected_requests;
    write(service_->refuse(status, message), false, 11);
  }

  // Sends the status and headers of a streamed response, then hands its stream to the producer
  // on a worker. The connection closes when the stream ends.
  void start_stream(HttpResponse response, unsigned version) {
    auto res = std::make_shared<bhttp::response<bhttp::empty_body>>(static_cast<bhttp::status>(response.status), version);
    res->set(bhttp::field::server, "shadowd");
    res->set(bhttp::field::content_type, response.content_type);
    for (auto& [name, value] : response.headers) res->set(name, value);
    res->keep_alive(false);
    chunked_ = version >= 11;
    if (chunked_) res->chunked(true);
    auto serializer = std::make_shared<bhttp::response_serializer<bhttp::empty_body>>(*res);
    streamed_ = std::make_shared<StreamState>(weak_from_this(), response.stream_buffer);
    // A stream's client sends nothing more: the read buffer goes (an idle stream stays small).
    buffer_.consume(buffer_.size());
    buffer_.shrink_to_fit();
    ++server_.stats.open_streams;
    idle_ = false;
    stream_.expires_after(server_.options.read_timeout);
    bhttp::async_write_header(stream_, *serializer, [self = shared_from_this(), res, serializer,
                                                     producer = std::move(response.stream)](beast::error_code ec, std::size_t) mutable {
      if (ec) return self->end_stream();
      self->stream_.expires_never();  // a stream lasts; the finish timer bounds its end
      self->watch_client();
      if (self->server_.stopping) self->streamed_->finish({});
      self->flush_stream();
      asio::post(self->server_.workers.get_executor(),
                 [stream = self->streamed_, producer = std::move(producer), stream_logger = self->server_.options.logger]() mutable {
        try {
          producer(stream);
        } catch (const std::exception& e) {  // producers must not throw; if one does, the stream ends
          report_failure(stream_logger, "a stream failed", e);
          stream->finish({});
        }
        producer = nullptr;  // its resources go now, on this worker
      });
    });
  }

  // Reads while a response streams: a client sends nothing then, so any completion means it went
  // away (or broke the protocol); either way the stream ends.
  void watch_client() {
    stream_.socket().async_read_some(buffer_.prepare(512), [self = shared_from_this()](beast::error_code, std::size_t) {
      self->end_stream();
    });
  }

  // A finishing stream whose client does not take its last bytes is cut after the read timeout.
  void arm_finish_timer() {
    if (finish_timer_) return;
    finish_timer_.emplace(stream_.get_executor());
    finish_timer_->expires_after(server_.options.read_timeout);
    finish_timer_->async_wait([self = shared_from_this()](beast::error_code ec) {
      if (!ec) self->close();
    });
  }

  void end_stream() {
    if (streamed_->end()) --server_.stats.open_streams;
    if (finish_timer_) finish_timer_->cancel();
    close();
  }

  // `head`: the answer to a HEAD request, sent with the headers (Content-Length included) that
  // the same GET would get, and no body (RFC 9110 §9.3.2).
  void write(HttpResponse response, bool keep_alive, unsigned version, bool head = false) {
    if (response.stream) return start_stream(std::move(response), version);
    HttpStats& stats = server_.stats;
    std::size_t bytes = response.body.size();
    std::uint64_t waiting = stats.response_bytes_in_flight.load(std::memory_order_relaxed);
    if (response.sheddable && bytes > kNeverShedBytes && waiting > 0 &&
        waiting + bytes > server_.options.max_response_bytes_in_flight) {
      ++stats.shed_responses;
      response = service_->refuse(503, "too many response bytes are waiting for slow clients; retry in a moment");
      response.headers.emplace_back("Retry-After", "1");
      bytes = response.body.size();
    }
    stats.response_bytes_in_flight += bytes;
    // 1xx, 204 and 304 have no body (RFC 9110 §6.4.1).
    const bool bodiless = response.status < 200 || response.status == 204 || response.status == 304;
    if (bodiless) response.body.clear();
    const bool keep = keep_alive && !server_.stopping;
    render_head(response, version, keep, bodiless, head_);
    if (head) response.body.clear();
    body_ = std::move(response.body);
    // Headers and body leave in one gathering write (one sendmsg when the socket takes them).
    const std::array<asio::const_buffer, 2> buffers{asio::buffer(head_), asio::buffer(body_)};
    stream_.expires_after(server_.options.read_timeout);
    asio::async_write(stream_, buffers, [self = shared_from_this(), bytes, keep](beast::error_code ec, std::size_t) {
      self->server_.stats.response_bytes_in_flight -= bytes;
      self->release_response_buffers();
      if (ec || !keep) return self->close();
      self->await_next_request();
    });
  }

  // The body goes at once (an idle connection holds none); the head's string is kept for the
  // next response, to spare an allocation, unless unusual headers grew it.
  void release_response_buffers() {
    std::string().swap(body_);
    if (head_.capacity() > (4 << 10)) std::string().swap(head_);
  }

  void close() {
    beast::error_code ignored;
    stream_.socket().shutdown(tcp::socket::shutdown_send, ignored);
    stream_.socket().close(ignored);
  }

  beast::tcp_stream stream_;
  std::string head_;  // the status line and headers of the response being written
  std::string body_;  // its body
  beast::flat_buffer buffer_;  // bounded: max_header_bytes + kReadSlack
  std::optional<bhttp::request_parser<bhttp::string_body>> parser_;
  std::function<void(std::uint64_t, beast::string_view, beast::error_code&)> on_chunk_header_;
  std::uint64_t chunked_bytes_ = 0;
  HttpServer::Impl& server_;
  Service* service_ = nullptr;  // of the request being read or answered: it renders the refusals
  std::list<std::weak_ptr<Session>>::iterator entry_;
  bool listed_ = false;  // entry_ is set, and counted in open_connections
  bool idle_ = true;
  bool reading_body_ = false;  // between a request's header and the end of its body
  std::shared_ptr<StreamState> streamed_;  // of a streamed response
  StreamState::Taken taken_;               // being written (flush_stream)
  std::string chunk_header_;
  std::vector<asio::const_buffer> gather_;
  bool chunked_ = false;                   // its body is sent in chunks (HTTP/1.1)
  std::optional<asio::steady_timer> finish_timer_;

  friend class StreamState;
};

bool StreamState::schedule(std::unique_lock<std::mutex>& lock) {
  if (flushing_) return true;
  std::shared_ptr<Session> session = session_.lock();
  if (!session) return false;
  flushing_ = true;
  lock.unlock();
  asio::post(session->stream_.get_executor(), [session] { session->flush_stream(); });
  return true;
}

void HttpServer::Impl::accept() {
  // A connection's handlers run one at a time: on its strand, or trivially with one I/O thread
  // (a strand would cost a lock and a shared_ptr copy per handler there).
  const asio::any_io_executor executor =
      options.io_threads > 1 ? asio::any_io_executor(asio::make_strand(io)) : asio::any_io_executor(io.get_executor());
  acceptor.async_accept(executor, [this](beast::error_code ec, tcp::socket socket) {
    if (!acceptor.is_open()) return;  // stopped
    if (ec) {
      // Out of descriptors (or another transient failure): the pending connection stays in
      // the backlog; retrying at once would spin, so wait a little.
      ++stats.accept_failures;
      accept_backoff.expires_after(kAcceptBackoff);
      accept_backoff.async_wait([this](beast::error_code wait_ec) {
        if (!wait_ec) accept();
      });
      return;
    }
    admit(std::move(socket));
    accept();
  });
}

void HttpServer::Impl::admit(tcp::socket socket) {
  beast::error_code ignored;
  if (stats.open_connections.load() >= options.max_connections) {
    ++stats.rejected_connections;
    socket.non_blocking(true, ignored);
    socket.write_some(asio::buffer(overloaded_response()), ignored);  // best effort: never waits
    socket.shutdown(tcp::socket::shutdown_both, ignored);
    socket.close(ignored);
    return;
  }
  socket.set_option(tcp::no_delay(true), ignored);
  auto session = std::make_shared<Session>(std::move(socket), *this);
  std::list<std::weak_ptr<Session>>::iterator entry;
  {
    std::lock_guard lock(sessions_mutex);
    entry = sessions.insert(sessions.end(), session);
    ++stats.open_connections;
  }
  session->start(entry);
}

void HttpServer::Impl::begin_stop() {
  if (stopping.exchange(true)) return;
  asio::post(io, [this] {
    beast::error_code ignored;
    acceptor.close(ignored);
    accept_backoff.cancel();
    signals.cancel(ignored);
    std::vector<std::shared_ptr<Session>> open;  // released after the lock: ~Session takes it
    {
      std::lock_guard lock(sessions_mutex);
      for (const auto& w : sessions) {
        if (auto s = w.lock()) open.push_back(std::move(s));
      }
    }
    for (const auto& s : open) s->close_if_idle();
  });
}

// Runs the I/O loop until it is out of work. An exception thrown by a completion handler (for
// example std::bad_alloc) ends only the connection it came from: its session is released
// with the handler, and the loop goes on serving the others.
void HttpServer::Impl::run_io() {
  for (;;) {
    try {
      io.run();
      return;
    } catch (const std::exception& e) {
      report_failure(options.logger, "a connection failed", e);
    }
  }
}

HttpServer::HttpServer(HttpServerOptions options, Handler handler, ErrorResponder error_responder)
    : HttpServer(std::move(options), Router()) {
  only_service_ = std::make_unique<FunctionService>(std::move(handler), std::move(error_responder));
  impl_->router = [service = only_service_.get()](std::string_view) -> Service& { return *service; };
}

HttpServer::HttpServer(HttpServerOptions options, Router router)
    : impl_(std::make_unique<Impl>(std::move(options), std::move(router))) {
  tcp::endpoint endpoint(asio::ip::make_address(impl_->options.host), impl_->options.port);
  beast::error_code ec;
  impl_->acceptor.open(endpoint.protocol(), ec);
  if (!ec) impl_->acceptor.set_option(asio::socket_base::reuse_address(true), ec);
  if (!ec) impl_->acceptor.bind(endpoint, ec);
  if (!ec) impl_->acceptor.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) {
    const std::string& host = impl_->options.host;
    throw std::runtime_error("cannot listen on " + (host.find(':') != std::string::npos ? "[" + host + "]" : host) + ":" +
                             std::to_string(impl_->options.port) + ": " + ec.message());
  }
}

HttpServer::~HttpServer() {
  impl_->workers.join();
}

unsigned short HttpServer::port() const { return impl_->acceptor.local_endpoint().port(); }

const HttpStats& HttpServer::stats() const { return impl_->stats; }

void block_shutdown_signals() { ::pthread_sigmask(SIG_BLOCK, &shutdown_signals(), nullptr); }

void HttpServer::run() {
  // Two ways in: a thread that leaves the signals unblocked takes them asynchronously (the
  // signal set); while every thread blocks them they wait for this sigwait.
  impl_->signals.async_wait([this](beast::error_code ec, int) {
    if (!ec) impl_->begin_stop();
  });
  // The waiter starts with the signals blocked (a thread inherits its creator's mask), so that
  // the SIGTERM sent to end it below stays pending for its sigwait even when the server stops
  // before the waiter has run at all.
  sigset_t previous;
  ::pthread_sigmask(SIG_BLOCK, &shutdown_signals(), &previous);
  std::thread waiter([this] {
    int signal = 0;
    ::sigwait(&shutdown_signals(), &signal);
    impl_->begin_stop();  // a no-op when the server stopped already and woke this thread
  });
  ::pthread_sigmask(SIG_SETMASK, &previous, nullptr);
  impl_->accept();
  std::vector<std::thread> threads;
  threads.reserve(impl_->options.io_threads);
  std::exception_ptr failed;
  try {
    for (std::size_t i = 1; i < impl_->options.io_threads; ++i) threads.emplace_back([this] { impl_->run_io(); });
  } catch (const std::system_error& e) {  // stops as after a signal, and fails once every thread ended
    failed = std::make_exception_ptr(std::runtime_error("cannot start " + std::to_string(impl_->options.io_threads) +
                                                        " I/O threads: " + e.what()));
    impl_->begin_stop();
  }
  impl_->run_io();
  for (auto& t : threads) t.join();
  ::pthread_kill(waiter.native_handle(), SIGTERM);  // ends its sigwait, unless a signal did
  waiter.join();
  impl_->workers.join();  // every handler has finished; their responses were written or dropped
  if (failed) std::rethrow_exception(failed);
}

void HttpServer::stop() { impl_->begin_stop(); }

}  // namespace deviceshadow::http
