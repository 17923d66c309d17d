// shadowd, the composition root: parses the options (shadowd/options.hpp), opens the store and
// wires the engine, notifications, API v1, the AWS IoT facade and the MQTT bridge onto one HTTP
// listener, then serves until SIGINT/SIGTERM. Nothing includes this file. Options and
// subcommands: docs/cli.md.
#include "aws/sigv4.hpp"
#include "deviceshadow/dynamodb_store.hpp"
#include "deviceshadow/engine.hpp"
#include "deviceshadow/error.hpp"
#include "deviceshadow/memory_store.hpp"
#include "deviceshadow/sqlite_store.hpp"
#include "deviceshadow/prometheus.hpp"
#include "notify/dispatcher.hpp"
#include "notify/stream/history_writer.hpp"
#include "notify/stream/service.hpp"
#include "api/api.hpp"
#include "awsiot/facade.hpp"
#include "console/console.hpp"
#include "awsiot/mqtt_bridge.hpp"
#include "http/auth.hpp"
#include "http/server.hpp"
#include "http/log.hpp"
#include "http/metrics.hpp"
#include "query/cursor.hpp"
#include "jobs/runner.hpp"
#include "query/index.hpp"
#include "live/hub.hpp"
#include "shadowd/options.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <condition_variable>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <map>
#include <mutex>
#include <span>
#include <thread>

namespace ds = deviceshadow;
namespace srv = deviceshadow::http;
namespace notify = deviceshadow::notify;
namespace awsiot = deviceshadow::awsiot;

namespace {

using Settings = deviceshadow::shadowd::Options;
using deviceshadow::shadowd::parse_duration;

ds::DynamoDbOptions dynamodb_options(const Settings& s, std::string table) {
  ds::DynamoDbOptions o;
  o.table = std::move(table);
  o.endpoint = s.dynamodb_endpoint;
  o.region = s.region;
  o.layout = s.layout == "combined" ? ds::DynamoDbLayout::combined : ds::DynamoDbLayout::separate;
  o.request_timeout = std::chrono::milliseconds(s.dynamodb_timeout_ms);
  return o;
}

std::unique_ptr<ds::StoreBackend> open_store(const Settings& s, const ds::shadowd::StoreSpec& spec) {
  switch (spec.kind) {
    case ds::shadowd::StoreKind::memory:
      return ds::make_memory_store();
    case ds::shadowd::StoreKind::dynamodb:
      return ds::open_dynamodb_store(dynamodb_options(s, spec.location));
    case ds::shadowd::StoreKind::sqlite:
      break;
  }
  ds::SqliteOptions o;
  o.path = spec.location;
  o.durable = s.durability == "full";
  o.min_free_bytes = s.min_free_bytes;
  return ds::open_sqlite_store(o);
}

// Whether the store is a SQLite database in a file (not ":memory:").
bool in_a_file(const ds::shadowd::StoreSpec& spec) {
  return spec.kind == ds::shadowd::StoreKind::sqlite && spec.location != ":memory:";
}

// The file of the key sealing fleet-query cursors: --cursor-key-file, else cursor.key beside a
// SQLite database (so that cursors survive a restart), else none (a random key per process).
std::string cursor_key_file(const Settings& s, const ds::shadowd::StoreSpec& spec) {
  if (!s.cursor_key_file.empty()) return s.cursor_key_file;
  if (!in_a_file(spec)) return {};
  return (std::filesystem::path(spec.location).parent_path() / "cursor.key").string();
}

// One shadowd per SQLite database: while a shadowd has the database open it holds the database
// file itself locked (flock, which SQLite's own fcntl locks do not see), so the lock follows the
// file under any name (a symbolic or hard link, a bind mount), and the kernel releases it when
// that process ends, however it ends. A second shadowd on the file is refused at start: what a
// shadowd keeps in memory (index declarations, live streams, cached records, the jobs it runs)
// assumes that it alone writes the database. Destroy it only after SQLite has closed the file:
// closing a descriptor of a file drops every fcntl lock the process holds on it.
class DatabaseLock {
 public:
  explicit DatabaseLock(const std::string& database) {
    std::error_code error;
    // Absolute first: a bare file name ("shadows.db") has no parent to create.
    std::filesystem::path file = std::filesystem::absolute(database, error);
    if (!error) file = std::filesystem::weakly_canonical(file, error);
    if (!error) std::filesystem::create_directories(file.parent_path(), error);  // the store would next
    if (error) throw std::runtime_error("cannot create the directory of " + database + ": " + error.message());
    // An empty file is a new database to SQLite; 0644 is SQLite's own mode for a new one.
    fd_ = ::open(file.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd_ < 0) throw std::runtime_error("cannot open the database " + database + ": " + std::strerror(errno));
    if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
      const int reason = errno;
      ::close(fd_);
      if (reason != EWOULDBLOCK) throw std::runtime_error("cannot lock " + database + ": " + std::strerror(reason));
      throw std::runtime_error("another shadowd has " + database +
                               " open (under this or another name): one shadowd serves a SQLite database; stop "
                               "that one first, or run several on one DynamoDB table");
    }
    struct stat st{};
    links_ = ::fstat(fd_, &st) == 0 ? st.st_nlink : 1;
  }
  ~DatabaseLock() { ::close(fd_); }
  // Names the file has (hard links): SQLite keeps its write-ahead log beside the name it opened.
  nlink_t links() const noexcept { return links_; }
  DatabaseLock(const DatabaseLock&) = delete;
  DatabaseLock& operator=(const DatabaseLock&) = delete;

 private:
  int fd_;
  nlink_t links_ = 1;
};

// Descriptors this process holds now; 0 when /proc does not say.
std::size_t open_descriptors() {
  std::error_code error;
  std::size_t n = 0;
  for (std::filesystem::directory_iterator it("/proc/self/fd", error), end; !error && it != end; it.increment(error)) {
    ++n;
  }
  return n > 0 ? n - 1 : 0;  // the listing's own
}

// Raises the soft open-file limit to the hard one and returns it; connections, the database
// and outgoing requests all take descriptors.
std::size_t raise_open_file_limit() {
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0) return 1024;
  if (limit.rlim_cur < limit.rlim_max) {
    rlimit raised = limit;
    raised.rlim_cur = limit.rlim_max;
    if (setrlimit(RLIMIT_NOFILE, &raised) == 0) limit = raised;
  }
  return limit.rlim_cur == RLIM_INFINITY ? SIZE_MAX : static_cast<std::size_t>(limit.rlim_cur);
}

// How often, in seconds, a shadowd on DynamoDB reads the registrations that others may have put.
constexpr int kRegistrationRefresh = 5;

void render_stream_metrics(notify::stream::StreamService& stream, std::string& out) {
  const notify::stream::StreamCounters& c = stream.counters();
  auto metric = [&](const char* type, const char* name, const char* help, std::uint64_t v) {
    ds::prometheus::append_metric(out, type, name, help, v);
  };
  metric("counter", "shadowd_stream_records_total", "Stream records read and done with.", c.records.load());
  metric("counter", "shadowd_stream_trimmed_total",
         "Times stream records were trimmed away before this shadowd read them (their events are lost).", c.trimmed.load());
  metric("counter", "shadowd_stream_expired_iterators_total", "Shard iterators renewed after expiring.",
         c.expired_iterators.load());
  metric("counter", "shadowd_stream_throttled_total", "Stream reads refused for throttling or a failure worth retrying.",
         c.throttled.load());
  metric("counter", "shadowd_stream_writes_total",
         "Writes read from the stream (with --history stream, each one's history event written).", stream.feed().end());
  metric("counter", "shadowd_stream_unreadable_total",
         "Stream records whose change-feed event cannot be read, passed over (their writes are not notified).",
         stream.feed().unreadable());
  metric("gauge", "shadowd_stream_shards", "Stream shards this shadowd holds leases on and reads.", stream.shards());
  metric("gauge", "shadowd_stream_feed_entries", "Writes read from the stream and not yet delivered to every registration.",
         stream.feed().size());
}

int serve(const Settings& s) {
  srv::LogLevel level = s.log_level == "debug" ? srv::LogLevel::debug
                        : s.log_level == "warn" ? srv::LogLevel::warn
                        : s.log_level == "error" ? srv::LogLevel::error
                                                 : srv::LogLevel::info;
  srv::Logger logger(level, s.log_format == "json");

  srv::HttpServerOptions http;
  const ds::shadowd::ListenAddress listen = ds::shadowd::parse_listen(s.listen);
  http.host = listen.host;
  http.port = listen.port;
  http.io_threads = s.io_threads;
  http.workers = s.workers;
  http.max_body_bytes = s.max_body_bytes;
  http.read_timeout = std::chrono::milliseconds(s.read_timeout_ms);
  http.idle_timeout = std::chrono::milliseconds(s.idle_timeout_ms);
  http.max_response_bytes_in_flight = s.max_response_bytes_in_flight;
  http.logger = &logger;
  const std::size_t open_files = raise_open_file_limit();  // before the store and targets open theirs

  ds::EngineOptions options;
  options.document.limits = {s.max_body_bytes, s.max_state_bytes, s.max_depth, s.max_batch_items};
  options.document.timestamp_keys = ds::TimestampKeys(s.timestamp_keys);
  options.history = s.history == "true";
  const bool history_from_stream = s.history == "stream";
  options.history_from_stream = history_from_stream;
  options.history_retention = parse_duration(s.history_retention);
  options.history_image_every = s.history_image_every;
  options.tombstone_retention = parse_duration(s.tombstone_retention);
  options.max_attempts = s.max_attempts;
  options.cache_entries = s.cache_entries;
  options.max_page_bytes = s.max_page_bytes;
  const ds::shadowd::StoreSpec store_spec = ds::shadowd::parse_store(s.store);
  const bool on_dynamodb = store_spec.kind == ds::shadowd::StoreKind::dynamodb;
  const auto purge_every = parse_duration(s.purge_interval);

  std::optional<srv::Authenticator> auth;
  if (!s.tokens.empty()) {
    auth = srv::Authenticator::load(s.tokens);
    logger.log(srv::LogLevel::info, "authentication on", {{"tokens", std::to_string(auth->size())}});
  } else {
    logger.log(srv::LogLevel::warn,
               "NO TOKEN FILE: the server is OPEN, anyone who can reach it may read and write every shadow. "
               "Use --tokens FILE in production.");
  }

  std::optional<awsiot::SigV4Verifier> verifier;
  if (!s.aws_credentials.empty()) {
    verifier.emplace(awsiot::CredentialsTable::load(s.aws_credentials));
    logger.log(srv::LogLevel::info, "AWS signatures required on the AWS IoT API",
               {{"keys", std::to_string(verifier->credentials().size())}});
  }

  std::optional<DatabaseLock> database_lock;  // released after the store closes
  if (in_a_file(store_spec)) database_lock.emplace(store_spec.location);
  if (database_lock && database_lock->links() > 1) {
    logger.log(srv::LogLevel::warn,
               "the database file has other names (hard links); SQLite keeps its write-ahead log beside the name "
               "it was opened by, so always open it by this one",
               {{"database", store_spec.location}, {"names", std::to_string(database_lock->links())}});
  }
  std::unique_ptr<ds::StoreBackend> backend = open_store(s, store_spec);
  // From here SIGINT/SIGTERM wait for the server's run() (until now they end the process).
  srv::block_shutdown_signals();
  srv::Metrics metrics;
  srv::MeteredStore metered(*backend, metrics);
  // One backend, two halves: the engine keeps shadows in the Store; notifications and the MQTT
  // bridge's claims keep their state in the DeliveryStore.
  ds::Store& store = metered;
  ds::DeliveryStore& delivery = metered;
  ds::Engine engine(store, options);
  // Declared indexes (docs/queries.md, "Indexes"), kept in each write's transaction. Processes
  // sharing a DynamoDB table read each other's declarations every 2 s, and a new field's build
  // waits until every process writes by it (a refresh, and a write's time limit).
  ds::query::IndexKeeperOptions index_options;
  if (on_dynamodb) index_options = {.refresh = std::chrono::seconds(2), .grace = std::chrono::seconds(15)};
  index_options.on_build_error = [&logger](const std::string& error) {
    logger.log(srv::LogLevel::error, "the index build failed; it tries again every second", {{"error", error}});
  };
  auto indexes = std::make_unique<ds::query::IndexKeeper>(store, options.document.timestamp_keys, index_options);
  engine.set_indexer(indexes.get());
  // Error lines of one kind (an event dead-lettered, a delivery's outcome not stored, …) come
  // at most 10 a second: a receiver or store that is down fails every event.
  std::mutex notify_log_mutex;
  std::map<std::string, srv::LogRateLimit, std::less<>> notify_log_limits;
  auto notify_log = [&](bool error, std::string_view message, std::vector<std::pair<std::string, std::string>> fields) {
    if (error) {
      std::uint64_t suppressed = 0;
      {
        std::lock_guard lock(notify_log_mutex);
        auto limit = notify_log_limits.find(message);
        if (limit == notify_log_limits.end()) limit = notify_log_limits.try_emplace(std::string(message), 10).first;
        if (!limit->second.admit(suppressed)) return;
      }
      if (suppressed > 0) fields.emplace_back("suppressed", std::to_string(suppressed));
    }
    std::vector<srv::Logger::Field> f(fields.begin(), fields.end());
    logger.log(error ? srv::LogLevel::error : srv::LogLevel::info, message, f);
  };
  // On DynamoDB the change feed is the table's stream, read by a consumer that shares its
  // shards with the other shadowd on the table.
  std::unique_ptr<notify::stream::StreamService> stream;
  if (on_dynamodb) {
    const ds::DynamoDbOptions table = dynamodb_options(s, store_spec.location);
    notify::stream::StreamServiceOptions o;
    o.lease_timeout = parse_duration(s.stream_lease_timeout);
    std::optional<std::string> arn;
    try {
      arn = notify::stream::StreamService::find_stream(table);
    } catch (const std::exception& e) {  // the store's readiness reports a missing table
      logger.log(srv::LogLevel::error, "the table's stream cannot be found; notifications are off until a restart",
                 {{"error", e.what()}});
    }
    if (history_from_stream) o.feed.on_entries = notify::stream::history_writer(store, options.history_retention);
    if (arn) {
      stream = std::make_unique<notify::stream::StreamService>(table, *arn, std::move(o), notify_log);
      logger.log(srv::LogLevel::info, "reading the table's stream for notifications",
                 {{"stream", *arn}, {"owner", stream->owner()}});
      metrics.add_section([st = stream.get()](std::string& out) { render_stream_metrics(*st, out); });
    } else if (history_from_stream) {
      throw std::runtime_error("--history stream needs table " + table.table +
                               "'s stream: enable it (NEW_AND_OLD_IMAGES), or use --history true");
    } else if (!delivery.list_registrations().empty()) {
      throw std::runtime_error("table " + table.table + " has notification registrations but no stream: enable its "
                               "stream (NEW_AND_OLD_IMAGES), or remove the registrations");
    }
  }
  notify::DispatcherOptions notify_options;
  notify_options.concurrency = s.notify_concurrency;
  notify_options.window = s.notify_window;
  notify_options.window_bytes = s.notify_window_bytes;
  notify_options.nice = s.notify_nice;
  notify_options.dead_letter_retention = parse_duration(s.dead_letter_retention);
  notify_options.max_dead_letters = s.max_dead_letters;
  notify_options.max_registrations = s.max_registrations;
  notify_options.keep_feed_on = history_from_stream;
  notify::Dispatcher dispatcher(engine, delivery, notify_options, notify::make_target, notify_log,
                                stream ? &stream->feed() : nullptr);
  metrics.add_section([&dispatcher](std::string& out) { notify::render_metrics(out, dispatcher.statuses()); });
  // Live change streams follow this process's writes on SQLite and memory; on DynamoDB they poll
  // history's time index, which holds the writes of every shadowd on the table (docs/streams.md).
  std::unique_ptr<ds::live::Hub> hub;
  std::string streams_off;
  if (on_dynamodb && !options.keeps_history()) {
    streams_off = "live change streams on the DynamoDB store read history, which --history false does not keep: "
                  "run shadowd with --history true or stream";
  } else if (on_dynamodb) {
    try {  // a table made before history's time index says so here
      store.history_since(engine.options().clock(), nullptr, 1);
    } catch (const ds::Error& e) {  // any other failure (the table unreachable for now) is for the readiness check
      if (std::string_view(e.what()).find("time index") != std::string_view::npos) {
        streams_off = std::string("live change streams are off: ") + e.what();
        logger.log(srv::LogLevel::error, "live change streams are off", {{"error", e.what()}});
      }
    }
  }
  if (streams_off.empty()) {
    ds::live::HubOptions hub_options{.heartbeat = parse_duration(s.stream_heartbeat), .stream_buffer = s.stream_buffer,
                                     .max_streams = s.max_streams,
                                     .max_replays = std::max<std::size_t>(1, s.workers / 4)};
    // History from the table's stream trails the writes by the consumer's delay: read further back.
    if (on_dynamodb) hub_options.poll = ds::live::HubOptions::Poll{.recent = std::chrono::milliseconds(history_from_stream ? 3000 : 1000)};
    hub_options.on_error = [&logger, limit = std::make_shared<srv::LogRateLimit>(1)](std::string_view what,
                                                                                     std::string_view error) noexcept {
      try {
        if (std::uint64_t suppressed = 0; limit->admit(suppressed)) {
          logger.log(srv::LogLevel::error, what, {{"error", std::string(error)}, {"suppressed", std::to_string(suppressed)}});
        }
      } catch (...) {  // out of memory: the line is lost, the stream goes on
      }
    };
    hub = std::make_unique<ds::live::Hub>(engine, hub_options);
    metrics.add_section([h = hub.get()](std::string& out) { h->render_metrics(out); });
  }
  // Bulk jobs run where the store keeps them; their runner takes up the jobs a crash or restart
  // interrupted. Several shadowd share a DynamoDB table: each job is run by the one holding its lease.
  std::unique_ptr<ds::jobs::JobRunner> job_runner;
  if (ds::JobStore* job_store = backend->job_store()) {
    ds::jobs::JobOptions o;
    o.max_active = s.max_jobs;
    o.indexes = indexes.get();
    o.limits.max_targets = s.max_job_targets;
    o.exclusive_store = !on_dynamodb;
    o.lease = parse_duration(s.job_lease);
    o.on_error = [&logger](const std::string& job, const std::string& error) {
      if (job.empty()) {
        logger.log(srv::LogLevel::error, "the jobs to take up could not be read", {{"error", error}});
      } else {
        logger.log(srv::LogLevel::error, "a job could not go on", {{"job", job}, {"error", error}});
      }
    };
    job_runner = std::make_unique<ds::jobs::JobRunner>(engine, *job_store, std::move(o));
    job_runner->start();
  }
  ds::api::ApiOptions api_options{.private_readyz = s.private_readyz};
  api_options.inline_reads = s.inline_reads && !on_dynamodb;  // its reads go over the network
  api_options.queries = {.budget = s.query_budget, .scan_needs_consent = on_dynamodb, .indexes = indexes.get()};
  if (std::string key_file = cursor_key_file(s, store_spec); !key_file.empty()) {
    api_options.cursor_key = std::make_shared<const ds::query::CursorKey>(ds::query::CursorKey::from_file(key_file));
  }
  api_options.streams = hub.get();
  api_options.jobs = job_runner.get();
  api_options.streams_off = streams_off;
  ds::api::Api api(engine, auth ? &*auth : nullptr, metrics, logger, &dispatcher, api_options);
  awsiot::Facade facade(engine, {verifier ? &*verifier : nullptr, auth ? &*auth : nullptr}, metrics, logger,
                        {s.aws_classic_shadow, s.aws_acknowledge, api_options.inline_reads});
  std::unique_ptr<awsiot::MqttBridge> bridge;
  if (!s.mqtt.empty()) {
    bridge = std::make_unique<awsiot::MqttBridge>(
        engine, delivery, logger,
        awsiot::MqttBridgeOptions{.broker = s.mqtt, .username = s.mqtt_username, .password = s.mqtt_password,
                                  .client_id = s.mqtt_client_id, .classic_shadow = s.aws_classic_shadow,
                                  .acknowledge = s.aws_acknowledge, .workers = s.mqtt_workers,
                                  .max_queued_bytes = s.mqtt_max_queued_bytes,
                                  .max_unsent_bytes = s.mqtt_max_unsent_bytes,
                                  // One shadowd uses SQLite or memory: no other may serve a request,
                                  // so every request is served, however long it waited.
                                  .claim_window = on_dynamodb ? parse_duration(s.mqtt_claim)
                                                              : std::chrono::milliseconds(0)});
    metrics.add_section([b = bridge.get()](std::string& out) { b->render_metrics(out); });
  }
  ds::console::Console console(metrics);
  // Connections stay well under the descriptor limit: what the process holds once started (the
  // store, notification targets, the broker) is set aside, and a quarter of the rest is left for
  // what it opens later (targets, SQLite's temporary files, requests to AWS).
  const std::size_t held = open_descriptors() + 8;  // and the server's own (epoll, acceptor, signals, timers)
  http.max_connections = std::min(s.max_connections, open_files > held ? (open_files - held) / 4 * 3 : 0);
  if (http.max_connections == 0) {
    throw std::runtime_error("the open-file limit (" + std::to_string(open_files) +
                             ") leaves no descriptor for connections");
  }
  if (http.max_connections < s.max_connections) {
    logger.log(srv::LogLevel::warn, "connection limit lowered to three quarters of the descriptors left",
               {{"max_connections", std::to_string(http.max_connections)}, {"open_files", std::to_string(open_files)},
                {"held", std::to_string(held)}});
  }
  srv::HttpServer server(http, [&](std::string_view target) -> srv::Service& {
    if (awsiot::Facade::serves(target)) return facade;
    if (s.console && ds::console::Console::serves(target)) return console;
    return api;
  });

  metrics.watch(&server.stats());

  logger.log(srv::LogLevel::info, "listening",
             {{"address", (http.host.find(':') != std::string::npos ? "[" + http.host + "]" : http.host) + ":" + std::to_string(server.port())}, {"store", s.store}});

  // Off the request path: on SQLite and memory, expired tombstones, history and dead letters are purged
  // periodically (on DynamoDB its own TTL drops them; a purge would scan the whole table); on
  // DynamoDB, the registrations other shadowd put or removed are picked up.
  std::mutex purge_mutex;
  std::condition_variable purge_cv;
  bool stopping = false;
  std::thread purger([&] {
    std::unique_lock lock(purge_mutex);
    const auto every = on_dynamodb ? std::chrono::seconds(kRegistrationRefresh) : purge_every;
    while (!purge_cv.wait_for(lock, every, [&] { return stopping; })) {
      try {
        if (on_dynamodb) {
          dispatcher.refresh();
        } else if (std::size_t n = engine.purge() + dispatcher.purge_dead_letters()) {
          logger.log(srv::LogLevel::info, "purged", {{"items", std::to_string(n)}});
        }
      } catch (const std::exception& e) {
        logger.log(srv::LogLevel::error, on_dynamodb ? "reading the registrations failed" : "purge failed",
                   {{"error", e.what()}});
      }
    }
  });

  auto stop_purger = [&] {
    {
      std::lock_guard lock(purge_mutex);
      stopping = true;
    }
    purge_cv.notify_all();
    purger.join();
  };
  try {
    server.run();
  } catch (...) {  // a thread that could not start
    stop_purger();
    throw;
  }
  stop_purger();
  logger.log(srv::LogLevel::info, "stopped");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  // A log reader that went away (`shadowd 2>&1 | tee`, a restarted log shipper) must not end the
  // server: writes to it fail instead. Sockets and pipes of its own say so per call already.
  std::signal(SIGPIPE, SIG_IGN);
  ds::shadowd::Command command = ds::shadowd::parse_command_line(argc, argv);
  using Kind = ds::shadowd::Command::Kind;
  if (command.kind == Kind::exit) return command.exit_status;
  if (command.kind == Kind::hash_token) {
    std::printf("%s\n", ds::aws::hex_sha256(command.token).c_str());
    return 0;
  }
  try {
    if (command.kind == Kind::create_table) {
      ds::create_dynamodb_table(dynamodb_options(command.options, command.table));
      std::printf("created table %s\n", command.table.c_str());
      return 0;
    }
    return serve(command.options);
  } catch (const std::system_error& e) {  // std::thread's, when no more may start (ulimit -u, -v)
    const bool threads = e.code() == std::errc::resource_unavailable_try_again;
    std::fprintf(stderr, "shadowd: %s%s\n", threads ? "cannot start a thread: " : "", e.what());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "shadowd: %s\n", e.what());
    return 1;
  }
}
