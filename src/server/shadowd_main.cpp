// shadowd: the deviceshadow server. Its options and subcommands are described in docs/cli.md.
#include "deviceshadow/dynamodb_store.hpp"
#include "deviceshadow/engine.hpp"
#include "deviceshadow/error.hpp"
#include "deviceshadow/memory_store.hpp"
#include "deviceshadow/sqlite_store.hpp"
#include "notify/dispatcher.hpp"
#include "notify/stream/service.hpp"
#include "server/api.hpp"
#include "awsiot/facade.hpp"
#include "awsiot/mqtt_bridge.hpp"
#include "server/auth.hpp"
#include "server/http.hpp"
#include "server/log.hpp"
#include "server/metrics.hpp"

#include <CLI/CLI.hpp>

#include <sys/resource.h>

#include <condition_variable>
#include <cstdio>
#include <span>
#include <thread>

namespace ds = deviceshadow;
namespace srv = deviceshadow::server;
namespace notify = deviceshadow::notify;
namespace awsiot = deviceshadow::awsiot;

namespace {

// "90s", "15m", "48h", "30d" (or plain seconds).
std::chrono::seconds parse_duration(const std::string& text) {
  std::size_t end = 0;
  long long n = std::stoll(text, &end);
  std::string unit = text.substr(end);
  long long scale = unit.empty() || unit == "s" ? 1 : unit == "m" ? 60 : unit == "h" ? 3600 : unit == "d" ? 86400 : 0;
  if (scale == 0 || n < 0) throw std::invalid_argument("a duration looks like 90s, 15m, 48h or 30d: " + text);
  constexpr long long kCentury = 36500LL * 86400;
  if (n > kCentury / scale) throw std::invalid_argument("a duration is at most 36500d: " + text);
  return std::chrono::seconds(n * scale);
}

struct Settings {
  std::string listen = "127.0.0.1:8080";
  std::string store = "sqlite:./shadowd-data/shadows.db";
  std::string dynamodb_endpoint;
  std::string region;
  std::string layout = "separate";
  long dynamodb_timeout_ms = 5000;
  std::size_t cache_entries = 10000;
  std::string durability = "full";
  std::uintmax_t min_free_bytes = std::uintmax_t{64} << 20;
  std::string tokens;
  std::string aws_credentials;
  std::string aws_classic_shadow = "main";
  bool aws_acknowledge = false;
  std::string mqtt;
  std::string mqtt_username;
  std::string mqtt_password;
  std::string mqtt_client_id;
  std::size_t mqtt_workers = 16;
  std::string mqtt_claim = "3s";
  std::size_t max_body_bytes = 1 << 20;
  std::size_t max_state_bytes = 64 << 10;
  std::size_t max_depth = 32;
  std::size_t max_batch_items = 100;
  std::vector<std::string> timestamp_keys = {"ts", "timestamp"};
  std::string history = "true";
  std::string history_retention = "30d";
  std::string tombstone_retention = "48h";
  std::string purge_interval = "10m";
  int max_attempts = 8;
  std::size_t io_threads = 1;
  std::size_t workers = 64;
  long read_timeout_ms = 15000;
  long idle_timeout_ms = 60000;
  std::size_t max_connections = 10000;
  std::size_t max_response_bytes_in_flight = std::size_t{256} << 20;
  std::size_t max_page_bytes = std::size_t{4} << 20;
  std::size_t notify_concurrency = 8;
  std::size_t notify_window = 10000;
  int notify_nice = 10;
  std::string stream_lease_timeout = "10s";
  std::string log_format = "text";
  std::string log_level = "info";
};

ds::DynamoDbOptions dynamodb_options(const Settings& s, std::string table) {
  ds::DynamoDbOptions o;
  o.table = std::move(table);
  o.endpoint = s.dynamodb_endpoint;
  o.region = s.region;
  o.layout = s.layout == "combined" ? ds::DynamoDbLayout::combined : ds::DynamoDbLayout::separate;
  o.request_timeout = std::chrono::milliseconds(s.dynamodb_timeout_ms);
  return o;
}

std::unique_ptr<ds::Store> open_store(const Settings& s) {
  if (s.store == "memory") return ds::make_memory_store();
  if (s.store.rfind("dynamodb:", 0) == 0) return ds::open_dynamodb_store(dynamodb_options(s, s.store.substr(9)));
  if (s.store.rfind("sqlite:", 0) == 0) {
    ds::SqliteOptions o;
    o.path = s.store.substr(7);
    o.durable = s.durability == "full";
    o.min_free_bytes = s.min_free_bytes;
    return ds::open_sqlite_store(o);
  }
  throw std::invalid_argument("--store must be sqlite:PATH, memory or dynamodb:TABLE, not " + s.store);
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
    srv::append_metric(out, type, name, help, v);
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
  std::size_t colon = s.listen.rfind(':');
  if (colon == std::string::npos) throw std::invalid_argument("--listen must be HOST:PORT");
  http.host = s.listen.substr(0, colon);
  http.port = static_cast<unsigned short>(std::stoul(s.listen.substr(colon + 1)));
  http.io_threads = s.io_threads;
  http.workers = s.workers;
  http.max_body_bytes = s.max_body_bytes;
  http.read_timeout = std::chrono::milliseconds(s.read_timeout_ms);
  http.idle_timeout = std::chrono::milliseconds(s.idle_timeout_ms);
  http.max_response_bytes_in_flight = s.max_response_bytes_in_flight;
  // Connections stay well under the descriptor limit: a quarter is left for everything else.
  const std::size_t open_files = raise_open_file_limit();
  http.max_connections = std::min(s.max_connections, open_files / 4 * 3);
  if (http.max_connections < s.max_connections) {
    logger.log(srv::LogLevel::warn, "connection limit lowered to three quarters of the open-file limit",
               {{"max_connections", std::to_string(http.max_connections)}, {"open_files", std::to_string(open_files)}});
  }

  ds::EngineOptions options;
  options.document.limits = {s.max_body_bytes, s.max_state_bytes, s.max_depth, s.max_batch_items};
  options.document.timestamp_keys = ds::TimestampKeys(s.timestamp_keys);
  options.history = s.history == "true";
  const bool history_from_stream = s.history == "stream";
  options.history_retention = parse_duration(s.history_retention);
  options.tombstone_retention = parse_duration(s.tombstone_retention);
  options.max_attempts = s.max_attempts;
  options.cache_entries = s.cache_entries;
  options.max_page_bytes = s.max_page_bytes;
  const bool on_dynamodb = s.store.rfind("dynamodb:", 0) == 0;
  if (history_from_stream && !on_dynamodb) {
    throw std::invalid_argument("--history stream writes history from a DynamoDB table's stream: use true or false on " +
                                s.store);
  }
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
  ds::validate_shadow_name(s.aws_classic_shadow);

  std::unique_ptr<ds::Store> store = open_store(s);
  // From here SIGINT/SIGTERM wait for the server's run() (until now they end the process).
  srv::block_shutdown_signals();
  srv::Metrics metrics;
  srv::MeteredStore metered(*store, metrics);
  ds::Engine engine(metered, options);
  auto notify_log = [&](bool error, std::string_view message, std::vector<std::pair<std::string, std::string>> fields) {
    std::vector<srv::Logger::Field> f(fields.begin(), fields.end());
    logger.log(error ? srv::LogLevel::error : srv::LogLevel::info, message, f);
  };
  // On DynamoDB the change feed is the table's stream, read by a consumer that shares its
  // shards with the other shadowd on the table.
  std::unique_ptr<notify::stream::StreamService> stream;
  if (on_dynamodb) {
    const ds::DynamoDbOptions table = dynamodb_options(s, s.store.substr(9));
    notify::stream::StreamServiceOptions o;
    o.lease_timeout = parse_duration(s.stream_lease_timeout);
    if (o.lease_timeout < std::chrono::seconds(1)) throw std::invalid_argument("--stream-lease-timeout is at least 1s");
    std::optional<std::string> arn;
    try {
      arn = notify::stream::StreamService::find_stream(table);
    } catch (const std::exception& e) {  // the store's readiness reports a missing table
      logger.log(srv::LogLevel::error, "the table's stream cannot be found; notifications are off until a restart",
                 {{"error", e.what()}});
    }
    if (history_from_stream) {  // each write's change event becomes its history event
      o.feed.on_entries = [&metered, retention = options.history_retention](std::span<const notify::stream::AssembledEntry> entries) {
        std::vector<ds::ShadowHistoryEvent> events;
        events.reserve(entries.size());
        for (const auto& entry : entries) events.push_back({entry.key, ds::history_event_of(entry.event(), retention)});
        metered.append_history(events);
      };
    }
    if (arn) {
      stream = std::make_unique<notify::stream::StreamService>(table, *arn, std::move(o), notify_log);
      logger.log(srv::LogLevel::info, "reading the table's stream for notifications",
                 {{"stream", *arn}, {"owner", stream->owner()}});
      metrics.add_section([st = stream.get()](std::string& out) { render_stream_metrics(*st, out); });
    } else if (history_from_stream) {
      throw std::runtime_error("--history stream needs table " + table.table +
                               "'s stream: enable it (NEW_AND_OLD_IMAGES), or use --history true");
    } else if (!store->list_registrations().empty()) {
      throw std::runtime_error("table " + table.table + " has notification registrations but no stream: enable its "
                               "stream (NEW_AND_OLD_IMAGES), or remove the registrations");
    }
  }
  notify::DispatcherOptions notify_options;
  notify_options.concurrency = s.notify_concurrency;
  notify_options.window = s.notify_window;
  notify_options.nice = s.notify_nice;
  notify_options.keep_feed_on = history_from_stream;
  notify::Dispatcher dispatcher(engine, notify_options, notify::make_target, notify_log,
                                stream ? &stream->feed() : nullptr);
  srv::Api api(engine, auth ? &*auth : nullptr, metrics, logger, &dispatcher);
  awsiot::Facade facade(engine, {verifier ? &*verifier : nullptr, auth ? &*auth : nullptr}, metrics, logger,
                        {s.aws_classic_shadow, s.aws_acknowledge});
  std::unique_ptr<awsiot::MqttBridge> bridge;
  if (!s.mqtt.empty()) {
    bridge = std::make_unique<awsiot::MqttBridge>(
        engine, logger,
        awsiot::MqttBridgeOptions{.broker = s.mqtt, .username = s.mqtt_username, .password = s.mqtt_password,
                                  .client_id = s.mqtt_client_id, .classic_shadow = s.aws_classic_shadow,
                                  .acknowledge = s.aws_acknowledge, .workers = s.mqtt_workers,
                                  .claim_window = parse_duration(s.mqtt_claim)});
    metrics.add_section([b = bridge.get()](std::string& out) { b->render_metrics(out); });
  }
  srv::HttpServer server(
      http,
      [&](const srv::HttpRequest& r) { return awsiot::Facade::serves(r.target) ? facade.handle(r) : api.handle(r); },
      [&](int status, const std::string& message) { return api.transport_error(status, message); });

  // Off the request path: on SQLite and memory, expired tombstones and history are purged
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
        } else if (std::size_t n = engine.purge()) {
          logger.log(srv::LogLevel::info, "purged", {{"items", std::to_string(n)}});
        }
      } catch (const std::exception& e) {
        logger.log(srv::LogLevel::error, on_dynamodb ? "reading the registrations failed" : "purge failed",
                   {{"error", e.what()}});
      }
    }
  });

  metrics.watch(&server.stats());

  logger.log(srv::LogLevel::info, "listening",
             {{"address", http.host + ":" + std::to_string(server.port())}, {"store", s.store}});
  server.run();
  {
    std::lock_guard lock(purge_mutex);
    stopping = true;
  }
  purge_cv.notify_all();
  purger.join();
  logger.log(srv::LogLevel::info, "stopped");
  return 0;
}

// For counts of threads and slots, where 0 would leave none: refused with a message naming the
// option rather than raised to 1 behind the user's back.
const CLI::Validator kAtLeastOne(
    [](std::string& text) -> std::string {
      std::size_t n = 0;
      if (text.empty() || text[0] == '-' || !CLI::detail::lexical_cast(text, n) || n < 1) {
        return "must be a whole number of at least 1, not " + text;
      }
      return {};
    },
    "AT LEAST 1");

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"shadowd: the deviceshadow server. Every option can also be set as SHADOWD_<OPTION> "
               "(e.g. SHADOWD_LISTEN) or in a TOML file given with --config (keys are option names)."};
  app.set_config("--config", "", "TOML configuration file");
  Settings s;
  auto env = [](const char* name) { return std::string("SHADOWD_") + name; };
  app.add_option("--listen", s.listen, "HOST:PORT to listen on (port 0: any free port)")->envname(env("LISTEN"))->capture_default_str();
  app.add_option("--store", s.store, "sqlite:PATH, memory or dynamodb:TABLE")->envname(env("STORE"))->capture_default_str();
  auto dynamodb_flags = [&](CLI::App* a) {
    a->add_option("--dynamodb-endpoint", s.dynamodb_endpoint, "DynamoDB endpoint URL (default: the region's)")
        ->envname(env("DYNAMODB_ENDPOINT"));
    a->add_option("--region", s.region, "AWS region (default: AWS_REGION, AWS_DEFAULT_REGION, the profile's, us-east-1)")
        ->envname(env("REGION"));
  };
  dynamodb_flags(&app);
  app.add_option("--dynamodb-timeout-ms", s.dynamodb_timeout_ms, "time one DynamoDB request may take")
      ->envname(env("DYNAMODB_TIMEOUT_MS"))->capture_default_str();
  app.add_option("--layout", s.layout, "DynamoDB item layout: separate (one item per section) or combined")
      ->envname(env("LAYOUT"))->check(CLI::IsMember({"separate", "combined"}))->capture_default_str();
  app.add_option("--cache-entries", s.cache_entries, "shadows whose records are cached so writes need no read (0: off)")
      ->envname(env("CACHE_ENTRIES"))->capture_default_str();
  app.add_option("--durability", s.durability, "SQLite commits: full (fsync every commit) or normal")
      ->envname(env("DURABILITY"))->check(CLI::IsMember({"full", "normal"}))->capture_default_str();
  app.add_option("--min-free-bytes", s.min_free_bytes,
                 "SQLite: /readyz answers 503 while the filesystem holding the database has fewer bytes free than this")
      ->envname(env("MIN_FREE_BYTES"))->capture_default_str();
  app.add_option("--tokens", s.tokens, "token file; without one the server is open to everyone")->envname(env("TOKENS"));
  app.add_option("--aws-credentials", s.aws_credentials,
                 "AWS access keys whose signatures the AWS IoT API requires (docs/aws-iot.md); mode 600")
      ->envname(env("AWS_CREDENTIALS"));
  app.add_option("--aws-classic-shadow", s.aws_classic_shadow, "the shadow AWS IoT's classic (unnamed) shadow is")
      ->envname(env("AWS_CLASSIC_SHADOW"))->capture_default_str();
  app.add_option("--aws-acknowledge", s.aws_acknowledge,
                 "acknowledge desired values on writes through the AWS IoT API: true or false")
      ->envname(env("AWS_ACKNOWLEDGE"))->default_str("false");
  app.add_option("--mqtt", s.mqtt,
                 "serve the AWS IoT Device Shadow MQTT topics through this broker, mqtt://HOST[:PORT] (docs/aws-iot.md)")
      ->envname(env("MQTT"));
  app.add_option("--mqtt-username", s.mqtt_username, "user name for the --mqtt broker")->envname(env("MQTT_USERNAME"));
  app.add_option("--mqtt-password", s.mqtt_password, "password for the --mqtt broker (better: SHADOWD_MQTT_PASSWORD)")
      ->envname(env("MQTT_PASSWORD"));
  app.add_option("--mqtt-client-id", s.mqtt_client_id, "MQTT client id (default: shadowd- and a random number)")
      ->envname(env("MQTT_CLIENT_ID"));
  app.add_option("--mqtt-workers", s.mqtt_workers, "threads serving MQTT requests")
      ->envname(env("MQTT_WORKERS"))->check(kAtLeastOne)->capture_default_str();
  app.add_option("--mqtt-claim", s.mqtt_claim,
                 "how long a shadowd's claim on an MQTT request keeps others on the same store from serving it; 0 "
                 "claims nothing")
      ->envname(env("MQTT_CLAIM"))->capture_default_str();
  app.add_option("--max-body-bytes", s.max_body_bytes, "largest request body")->envname(env("MAX_BODY_BYTES"))->capture_default_str();
  app.add_option("--max-state-bytes", s.max_state_bytes, "largest section state, as compact JSON")->envname(env("MAX_STATE_BYTES"))->capture_default_str();
  app.add_option("--max-depth", s.max_depth, "deepest nesting below a state's root")->envname(env("MAX_DEPTH"))->capture_default_str();
  app.add_option("--max-batch-items", s.max_batch_items, "operations per batch request")->envname(env("MAX_BATCH_ITEMS"))->capture_default_str();
  app.add_option("--timestamp-keys", s.timestamp_keys, "members that make an object a timestamped value, in priority order")
      ->envname(env("TIMESTAMP_KEYS"))->delimiter(',')->capture_default_str();
  app.add_option("--history", s.history,
                 "record the history journal: true, false, or stream (DynamoDB: written from the table's stream, "
                 "not in each write's transaction)")
      ->envname(env("HISTORY"))->check(CLI::IsMember({"true", "false", "stream"}))->capture_default_str();
  app.add_option("--history-retention", s.history_retention, "how long history events are kept")->envname(env("HISTORY_RETENTION"))->capture_default_str();
  app.add_option("--tombstone-retention", s.tombstone_retention, "how long deleted sections keep their version")->envname(env("TOMBSTONE_RETENTION"))->capture_default_str();
  app.add_option("--purge-interval", s.purge_interval, "how often expired tombstones and history are dropped")->envname(env("PURGE_INTERVAL"))->capture_default_str();
  app.add_option("--max-attempts", s.max_attempts, "read-merge-write attempts of an unpinned write")->envname(env("MAX_ATTEMPTS"))->capture_default_str();
  app.add_option("--io-threads", s.io_threads, "network I/O threads")->envname(env("IO_THREADS"))->check(kAtLeastOne)->capture_default_str();
  app.add_option("--workers", s.workers, "request handler threads")->envname(env("WORKERS"))->check(kAtLeastOne)->capture_default_str();
  app.add_option("--read-timeout-ms", s.read_timeout_ms, "time a client has to send one whole request")
      ->envname(env("READ_TIMEOUT_MS"))->capture_default_str();
  app.add_option("--idle-timeout-ms", s.idle_timeout_ms, "time a keep-alive connection may wait for its next request")
      ->envname(env("IDLE_TIMEOUT_MS"))->capture_default_str();
  app.add_option("--max-connections", s.max_connections,
                 "open client connections; more are answered 503 and closed. shadowd raises its open-file limit to the "
                 "hard limit at start and lowers this to 3/4 of that limit if it is higher, with a warning")
      ->envname(env("MAX_CONNECTIONS"))->capture_default_str();
  app.add_option("--max-response-bytes-in-flight", s.max_response_bytes_in_flight,
                 "response bytes written but not yet taken by slow clients, at most: a read whose response is over "
                 "16 KiB and would pass this is answered 503 with Retry-After: 1 (writes are always answered)")
      ->envname(env("MAX_RESPONSE_BYTES_IN_FLIGHT"))->capture_default_str();
  app.add_option("--max-page-bytes", s.max_page_bytes,
                 "bytes of events in one history page and of shadows in one batch get response")
      ->envname(env("MAX_PAGE_BYTES"))->capture_default_str();
  app.add_option("--notify-concurrency", s.notify_concurrency, "event deliveries in flight per notification registration")
      ->envname(env("NOTIFY_CONCURRENCY"))->check(kAtLeastOne)->capture_default_str();
  app.add_option("--notify-window", s.notify_window,
                 "change-feed entries a registration holds in memory ahead of its checkpoint")
      ->envname(env("NOTIFY_WINDOW"))->check(kAtLeastOne)->capture_default_str();
  app.add_option("--notify-nice", s.notify_nice,
                 "nice levels the notification delivery threads run below request handling (0 to 19; 0: the same priority)")
      ->envname(env("NOTIFY_NICE"))->check(CLI::Range(0, 19))->capture_default_str();
  app.add_option("--stream-lease-timeout", s.stream_lease_timeout,
                 "on DynamoDB: how long a shadowd that stopped renewing its stream shard leases keeps them before "
                 "the others take them over")
      ->envname(env("STREAM_LEASE_TIMEOUT"))->capture_default_str();
  app.add_option("--log-format", s.log_format, "text or json")->envname(env("LOG_FORMAT"))->check(CLI::IsMember({"text", "json"}))->capture_default_str();
  app.add_option("--log-level", s.log_level, "debug, info, warn or error")->envname(env("LOG_LEVEL"))
      ->check(CLI::IsMember({"debug", "info", "warn", "error"}))->capture_default_str();

  std::string token;
  CLI::App* hash = app.add_subcommand("hash-token", "print the SHA-256 of a token, for the token file");
  hash->add_option("token", token, "the secret token")->required();
  CLI::App* dynamodb = app.add_subcommand("dynamodb", "DynamoDB administration");
  dynamodb->require_subcommand(1);
  CLI::App* create_table = dynamodb->add_subcommand(
      "create-table", "create a table in the layout shadowd uses (on-demand, GSI1, TTL on ttl, stream NEW_AND_OLD_IMAGES)");
  std::string table;
  create_table->add_option("--table", table, "table name")->required();
  dynamodb_flags(create_table);
  app.require_subcommand(0, 1);
  CLI11_PARSE(app, argc, argv);

  if (*hash) {
    std::printf("%s\n", srv::sha256_hex(token).c_str());
    return 0;
  }
  if (*create_table) {
    try {
      ds::create_dynamodb_table(dynamodb_options(s, table));
      std::printf("created table %s\n", table.c_str());
      return 0;
    } catch (const std::exception& e) {
      std::fprintf(stderr, "shadowd: %s\n", e.what());
      return 1;
    }
  }
  try {
    return serve(s);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "shadowd: %s\n", e.what());
    return 1;
  }
}
