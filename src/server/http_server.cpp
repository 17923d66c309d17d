// The only translation unit that includes Boost.Beast and Boost.Asio.
#include "server/http.hpp"

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include <atomic>
#include <mutex>
#include <optional>
#include <set>
#include <thread>

namespace deviceshadow::server {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

class Session;

struct HttpServer::Impl {
  HttpServerOptions options;
  Handler handler;
  ErrorResponder error_responder;
  asio::io_context io;
  asio::thread_pool workers;
  tcp::acceptor acceptor;
  asio::signal_set signals;
  std::atomic<bool> stopping{false};
  std::mutex sessions_mutex;
  std::set<std::weak_ptr<Session>, std::owner_less<std::weak_ptr<Session>>> sessions;

  Impl(HttpServerOptions o, Handler h, ErrorResponder e)
      : options(std::move(o)),
        handler(std::move(h)),
        error_responder(std::move(e)),
        io(static_cast<int>(options.io_threads)),
        workers(options.workers),
        acceptor(io),
        signals(io, SIGINT, SIGTERM) {}

  void accept();
  void begin_stop();
};

class Session : public std::enable_shared_from_this<Session> {
 public:
  Session(tcp::socket socket, HttpServer::Impl& server) : stream_(std::move(socket)), server_(server) {}

  void start() {
    asio::dispatch(stream_.get_executor(), [self = shared_from_this()] { self->read(false); });
  }

  // Closes the connection if it is waiting for a request; one being served finishes first.
  void close_if_idle() {
    asio::post(stream_.get_executor(), [self = shared_from_this()] {
      if (self->idle_) self->stream_.socket().close();
    });
  }

 private:
  void read(bool keep_alive_wait) {
    if (server_.stopping) return close();
    parser_.emplace();
    parser_->header_limit(static_cast<std::uint32_t>(server_.options.max_header_bytes));
    parser_->body_limit(server_.options.max_body_bytes);
    idle_ = true;
    stream_.expires_after(keep_alive_wait && buffer_.size() == 0 ? server_.options.idle_timeout
                                                                 : server_.options.read_timeout);
    // The first bytes of a request switch the clock to the (shorter) read timeout.
    http::async_read_header(stream_, buffer_, *parser_,
                            [self = shared_from_this()](beast::error_code ec, std::size_t) { self->on_header(ec); });
  }

  void on_header(beast::error_code ec) {
    if (ec) return on_error(ec);
    idle_ = false;
    stream_.expires_after(server_.options.read_timeout);
    http::async_read(stream_, buffer_, *parser_,
                     [self = shared_from_this()](beast::error_code ec, std::size_t) { self->on_read(ec); });
  }

  void on_read(beast::error_code ec) {
    if (ec) return on_error(ec);
    http::request<http::string_body> req = parser_->release();
    const bool keep_alive = req.keep_alive();
    const unsigned version = req.version();
    HttpRequest request;
    request.method = std::string(req.method_string());
    request.target = std::string(req.target());
    request.authorization = std::string(req[http::field::authorization]);
    request.body = std::move(req.body());
    stream_.expires_never();  // the handler may take its time; the client waits
    // The work guard keeps the I/O loop running (even while stopping) until the response is out.
    auto work = asio::make_work_guard(stream_.get_executor());
    asio::post(server_.workers, [self = shared_from_this(), request = std::move(request), keep_alive, version,
                                 work = std::move(work)]() mutable {
      HttpResponse response = self->server_.handler(request);
      asio::post(self->stream_.get_executor(), [self, response = std::move(response), keep_alive, version]() mutable {
        self->write(std::move(response), keep_alive, version);
      });
      work.reset();
    });
  }

  void on_error(beast::error_code ec) {
    if (ec == http::error::body_limit) return reject(413, "request body exceeds " + std::to_string(server_.options.max_body_bytes) + " bytes");
    if (ec == http::error::header_limit) return reject(431, "request headers too large");
    if (ec.category() == http::make_error_code(http::error::bad_target).category() &&
        ec != http::error::end_of_stream && ec != http::error::partial_message) {
      return reject(400, "malformed HTTP request: " + ec.message());
    }
    close();  // end of stream, timeout, reset, aborted
  }

  // Answers a request that could not be read, then closes the connection.
  void reject(int status, const std::string& message) {
    write(server_.error_responder(status, message), false, 11);
  }

  void write(HttpResponse response, bool keep_alive, unsigned version) {
    auto res = std::make_shared<http::response<http::string_body>>(static_cast<http::status>(response.status), version);
    res->set(http::field::server, "shadowd");
    res->set(http::field::content_type, response.content_type);
    for (auto& [name, value] : response.headers) res->set(name, value);
    res->body() = std::move(response.body);
    res->keep_alive(keep_alive && !server_.stopping);
    res->prepare_payload();
    stream_.expires_after(server_.options.read_timeout);
    http::async_write(stream_, *res, [self = shared_from_this(), res](beast::error_code ec, std::size_t) {
      if (ec || !res->keep_alive()) return self->close();
      self->read(true);
    });
  }

  void close() {
    beast::error_code ignored;
    stream_.socket().shutdown(tcp::socket::shutdown_send, ignored);
    stream_.socket().close(ignored);
  }

  beast::tcp_stream stream_;
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  HttpServer::Impl& server_;
  bool idle_ = true;
};

void HttpServer::Impl::accept() {
  acceptor.async_accept(asio::make_strand(io), [this](beast::error_code ec, tcp::socket socket) {
    if (ec) {
      if (!acceptor.is_open()) return;  // stopped
    } else {
      beast::error_code ignored;
      socket.set_option(tcp::no_delay(true), ignored);
      auto session = std::make_shared<Session>(std::move(socket), *this);
      {
        std::lock_guard lock(sessions_mutex);
        std::erase_if(sessions, [](const auto& w) { return w.expired(); });
        sessions.insert(session);
      }
      session->start();
    }
    accept();
  });
}

void HttpServer::Impl::begin_stop() {
  if (stopping.exchange(true)) return;
  asio::post(io, [this] {
    beast::error_code ignored;
    acceptor.close(ignored);
    signals.cancel(ignored);
    std::lock_guard lock(sessions_mutex);
    for (const auto& w : sessions) {
      if (auto s = w.lock()) s->close_if_idle();
    }
  });
}

HttpServer::HttpServer(HttpServerOptions options, Handler handler, ErrorResponder error_responder)
    : impl_(std::make_unique<Impl>(std::move(options), std::move(handler), std::move(error_responder))) {
  tcp::endpoint endpoint(asio::ip::make_address(impl_->options.host), impl_->options.port);
  impl_->acceptor.open(endpoint.protocol());
  impl_->acceptor.set_option(asio::socket_base::reuse_address(true));
  impl_->acceptor.bind(endpoint);
  impl_->acceptor.listen(asio::socket_base::max_listen_connections);
}

HttpServer::~HttpServer() {
  impl_->workers.join();
}

unsigned short HttpServer::port() const { return impl_->acceptor.local_endpoint().port(); }

void HttpServer::run() {
  impl_->signals.async_wait([this](beast::error_code ec, int) {
    if (!ec) impl_->begin_stop();
  });
  impl_->accept();
  std::vector<std::thread> threads;
  for (std::size_t i = 1; i < impl_->options.io_threads; ++i) threads.emplace_back([this] { impl_->io.run(); });
  impl_->io.run();
  for (auto& t : threads) t.join();
  impl_->workers.join();  // every handler has finished; their responses were written or dropped
}

void HttpServer::stop() { impl_->begin_stop(); }

}  // namespace deviceshadow::server
