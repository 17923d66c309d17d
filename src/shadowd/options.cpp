#include "shadowd/options.hpp"

#include "deviceshadow/ascii.hpp"
#include "deviceshadow/error.hpp"
#include "deviceshadow/validation.hpp"
#include "notify/mqtt_session.hpp"

#include <CLI/CLI.hpp>

#include <arpa/inet.h>

#include <charconv>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <optional>
#include <stdexcept>

namespace deviceshadow::shadowd {

namespace {

// CLI11 runs a check on the text before it converts it, so a value that passes converts.
// `description` shows in --help after the type ("UINT:1-4096"; a size only its least value, "UINT:>=1024").
CLI::Validator whole(std::uint64_t min, std::uint64_t max, std::string description) {
  return CLI::Validator(
      [min, max](std::string& text) -> std::string {
        try {
          parse_whole_number(text, min, max);
          return {};
        } catch (const std::invalid_argument& e) {
          return e.what();
        }
      },
      std::move(description));
}

CLI::Validator whole(std::uint64_t min, std::uint64_t max) {
  return whole(min, max, std::to_string(min) + "-" + std::to_string(max));
}

template <typename Parse>
CLI::Validator checked_by(Parse parse, std::string description) {
  return CLI::Validator(
      [parse](std::string& text) -> std::string {
        try {
          parse(text);
          return {};
        } catch (const std::invalid_argument& e) {
          return e.what();
        }
      },
      std::move(description));
}

CLI::Validator duration_of_at_least(std::chrono::seconds min) {
  return checked_by(
      [min](const std::string& text) {
        if (parse_duration(text) < min) {
          throw std::invalid_argument("must be at least " + std::to_string(min.count()) + "s, not " + text);
        }
      },
      "DURATION");
}

// Not empty: an option given as "" is a mistake, not a way to leave it unset.
CLI::Validator not_empty(std::string what) {
  return CLI::Validator(
      [what](std::string& text) -> std::string { return text.empty() ? what + " must not be empty" : std::string(); }, "");
}

// One of the words "true" and "false" (as the help says; CLI11 alone also takes yes, on, 1, "").
CLI::Validator true_or_false() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        return text == "true" || text == "false" ? std::string() : "expected true or false, not '" + text + "'";
      },
      "");
}

// The path after --config on the command line; nullopt when it is not given.
std::optional<std::string> config_path(int argc, const char* const* argv) {
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (arg == "--") break;
    if (arg == "--config") return i + 1 < argc ? std::optional<std::string>(argv[i + 1]) : std::nullopt;
    if (arg.starts_with("--config=")) return std::string(arg.substr(9));
  }
  return std::nullopt;
}

// The --config file as shadowd reads it: blank lines, comments and `key = value` lines whose
// key is an option's name, each at most once. CLI11 skips or misreads other TOML (tables, a
// mistyped key, a line without `=`, a byte-order mark); they are refused here, naming the line.
void check_config_file(const std::string& path, const CLI::App& app) {
  if (path.empty()) throw std::invalid_argument("--config: the path must not be empty");
  std::ifstream in(path);
  std::error_code ec;
  if (!in || std::filesystem::is_directory(path, ec)) throw std::invalid_argument("--config: cannot read " + path);
  std::map<std::string, int> seen;
  std::string line;
  for (int number = 1; std::getline(in, line); ++number) {
    auto where = [&] { return "--config: " + path + " line " + std::to_string(number) + ": "; };
    if (number == 1 && line.starts_with("\xEF\xBB\xBF")) {
      throw std::invalid_argument(where() + "starts with a byte-order mark; save the file as UTF-8 without one");
    }
    const std::size_t start = line.find_first_not_of(" \t\r");
    if (start == std::string::npos || line[start] == '#') continue;
    if (line[start] == '[') {
      throw std::invalid_argument(where() + "tables ([...]) are not read: write every option at the top level");
    }
    const std::size_t eq = line.find('=', start);
    const std::size_t key_end = line.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-", start);
    const std::string key = line.substr(start, key_end - start);
    if (eq == std::string::npos || key.empty() || line.find_first_not_of(" \t", key_end) != eq) {
      throw std::invalid_argument(where() + "expected `option-name = value`");
    }
    const CLI::Option* option = app.get_option_no_throw("--" + key);
    if (key == "config" || option == nullptr) throw std::invalid_argument(where() + "no option is called " + key);
    if (const auto [it, fresh] = seen.emplace(key, number); !fresh) {
      throw std::invalid_argument(where() + key + " is set twice (also on line " + std::to_string(it->second) + ")");
    }
  }
}

constexpr std::uint64_t kMaxSize = std::numeric_limits<std::int64_t>::max();
constexpr std::uint64_t kHour = 3600 * 1000;
constexpr std::uint64_t kMinMqttBytes = 64 * 1024;

}  // namespace

ListenAddress parse_listen(std::string_view text) {
  const std::size_t colon = text.rfind(':');
  if (colon == std::string_view::npos) throw std::invalid_argument("expected HOST:PORT, not '" + std::string(text) + "'");
  std::string_view host = text.substr(0, colon);
  const std::string_view port = text.substr(colon + 1);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  unsigned char address[16];
  const std::string h(host);
  if (inet_pton(AF_INET, h.c_str(), address) != 1 && inet_pton(AF_INET6, h.c_str(), address) != 1) {
    throw std::invalid_argument("host '" + h + "' is not an IP address (such as 127.0.0.1, 0.0.0.0 or [::1])");
  }
  std::uint64_t n = 0;
  try {
    n = parse_whole_number(port, 0, 65535);
  } catch (const std::invalid_argument&) {
    throw std::invalid_argument("port " + std::string(port) + " is out of range (0-65535)");
  }
  return {h, static_cast<std::uint16_t>(n)};
}

std::chrono::seconds parse_duration(std::string_view text) {
  std::size_t digits = 0;
  while (digits < text.size() && text[digits] >= '0' && text[digits] <= '9') ++digits;
  const std::string_view unit = text.substr(digits);
  const long long scale = unit.empty() || unit == "s" ? 1 : unit == "m" ? 60 : unit == "h" ? 3600 : unit == "d" ? 86400 : 0;
  if (digits == 0 || scale == 0) {
    throw std::invalid_argument("'" + std::string(text) + "' is not a duration (a whole number and s, m, h or d: 90s, 15m, 48h, 30d)");
  }
  constexpr std::uint64_t kCentury = 36500ULL * 86400;
  std::uint64_t n = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + digits, n);
  if (ec != std::errc() || n > kCentury / static_cast<std::uint64_t>(scale)) {
    throw std::invalid_argument(std::string(text) + " is longer than 36500d");
  }
  return std::chrono::seconds(static_cast<long long>(n) * scale);
}

StoreSpec parse_store(std::string_view text) {
  if (text == "memory") return {StoreKind::memory, {}};
  if (text.starts_with("sqlite:")) {
    if (text.size() == 7) throw std::invalid_argument("sqlite: needs a file path, as in sqlite:./shadowd-data/shadows.db");
    return {StoreKind::sqlite, std::string(text.substr(7))};
  }
  if (text.starts_with("dynamodb:")) {
    const std::string_view table = text.substr(9);
    const bool valid = table.size() >= 3 && table.size() <= 255 &&
                       table.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-") ==
                           std::string_view::npos;
    if (!valid) {
      throw std::invalid_argument("'" + std::string(table) +
                                  "' is not a DynamoDB table name (3 to 255 of a-z, A-Z, 0-9, '_', '-' and '.')");
    }
    return {StoreKind::dynamodb, std::string(table)};
  }
  throw std::invalid_argument("expected sqlite:PATH, memory or dynamodb:TABLE, not '" + std::string(text) + "'");
}

Command parse_command_line(int argc, const char* const* argv) {
  CLI::App app{"shadowd: the deviceshadow server. Every option can also be set as SHADOWD_<OPTION> "
               "(e.g. SHADOWD_LISTEN) or in a TOML file given with --config (keys are option names)."};
  app.set_config("--config", "", "TOML configuration file");
  Command command;
  Options& s = command.options;
  auto env = [](const char* name) { return std::string("SHADOWD_") + name; };
  // A byte size or count with no useful upper bound: --help shows its least value.
  auto size = [](std::uint64_t min) { return whole(min, kMaxSize, ">=" + std::to_string(min)); };
  app.add_option("--listen", s.listen, "HOST:PORT to listen on (port 0: any free port)")
      ->envname(env("LISTEN"))->check(checked_by(parse_listen, "HOST:PORT"))->capture_default_str();
  app.add_option("--store", s.store, "sqlite:PATH, memory or dynamodb:TABLE")
      ->envname(env("STORE"))->check(checked_by(parse_store, "STORE"))->capture_default_str();
  auto dynamodb_flags = [&](CLI::App* a) {
    a->add_option("--dynamodb-endpoint", s.dynamodb_endpoint, "DynamoDB endpoint URL (default: the region's)")
        ->envname(env("DYNAMODB_ENDPOINT"));
    a->add_option("--region", s.region, "AWS region (default: AWS_REGION, AWS_DEFAULT_REGION, the profile's, us-east-1)")
        ->envname(env("REGION"));
  };
  dynamodb_flags(&app);
  app.add_option("--dynamodb-timeout-ms", s.dynamodb_timeout_ms, "time one DynamoDB request may take")
      ->envname(env("DYNAMODB_TIMEOUT_MS"))->check(whole(1, kHour))->capture_default_str();
  app.add_option("--layout", s.layout, "DynamoDB item layout: separate (one item per section) or combined")
      ->envname(env("LAYOUT"))->check(CLI::IsMember({"separate", "combined"}))->capture_default_str();
  app.add_option("--cache-entries", s.cache_entries, "shadows whose records are cached so writes need no read (0: off)")
      ->envname(env("CACHE_ENTRIES"))->check(size(0))->capture_default_str();
  app.add_option("--durability", s.durability, "SQLite commits: full (fsync every commit) or normal")
      ->envname(env("DURABILITY"))->check(CLI::IsMember({"full", "normal"}))->capture_default_str();
  app.add_option("--min-free-bytes", s.min_free_bytes,
                 "SQLite: /readyz answers 503 while the filesystem holding the database has fewer bytes free than this")
      ->envname(env("MIN_FREE_BYTES"))->check(size(0))->capture_default_str();
  app.add_option("--tokens", s.tokens, "token file; without one the server is open to everyone")
      ->envname(env("TOKENS"))->check(not_empty("the token file's path"));
  app.add_option("--private-readyz", s.private_readyz,
                 "with --tokens: /readyz needs a token too (/healthz never does): true or false")
      ->envname(env("PRIVATE_READYZ"))->check(true_or_false())->default_str("false");
  app.add_option("--inline-reads", s.inline_reads,
                 "answer GETs of one shadow on the network thread when the store can read at once (SQLite, "
                 "memory): true or false (false: on the worker pool, for a disk too slow to read on the network thread)")
      ->envname(env("INLINE_READS"))->check(true_or_false())->default_str("true");
  app.add_option("--console", s.console, "serve the web console at /console/ (docs/console.md): true or false")
      ->envname(env("CONSOLE"))->check(true_or_false())->default_str("true");
  app.add_option("--aws-credentials", s.aws_credentials,
                 "AWS access keys whose signatures the AWS IoT API requires (docs/aws-iot.md); mode 600")
      ->envname(env("AWS_CREDENTIALS"));
  app.add_option("--aws-classic-shadow", s.aws_classic_shadow, "the shadow AWS IoT's classic (unnamed) shadow is")
      ->envname(env("AWS_CLASSIC_SHADOW"))->check(checked_by(
          [](const std::string& name) {
            try {
              validate_shadow_name(name);
            } catch (const Error& e) {
              throw std::invalid_argument(e.what());
            }
          },
          "NAME"))->capture_default_str();
  app.add_option("--aws-acknowledge", s.aws_acknowledge,
                 "acknowledge desired values on writes through the AWS IoT API: true or false")
      ->envname(env("AWS_ACKNOWLEDGE"))->check(true_or_false())->default_str("false");
  app.add_option("--mqtt", s.mqtt,
                 "serve the AWS IoT Device Shadow MQTT topics through this broker, mqtt://HOST[:PORT] (docs/aws-iot.md)")
      ->envname(env("MQTT"))->check(checked_by(
          [](const std::string& url) {
            notify::check_plain_mqtt_broker(url, "--mqtt-username and SHADOWD_MQTT_PASSWORD");
          },
          "mqtt://HOST[:PORT]"));
  app.add_option("--mqtt-username", s.mqtt_username, "user name for the --mqtt broker")->envname(env("MQTT_USERNAME"));
  app.add_option("--mqtt-password", s.mqtt_password, "password for the --mqtt broker (better: SHADOWD_MQTT_PASSWORD)")
      ->envname(env("MQTT_PASSWORD"));
  app.add_option("--mqtt-client-id", s.mqtt_client_id, "MQTT client id (default: shadowd- and a random number)")
      ->envname(env("MQTT_CLIENT_ID"));
  app.add_option("--mqtt-workers", s.mqtt_workers, "threads serving MQTT requests")
      ->envname(env("MQTT_WORKERS"))->check(whole(1, 1024))->capture_default_str();
  app.add_option("--mqtt-max-queued-bytes", s.mqtt_max_queued_bytes,
                 "bytes of MQTT requests waiting for a worker, at most; one shadow may take no more than the room "
                 "left free (at most half), and a request that does not fit is answered 429. At least twice "
                 "--max-body-bytes")
      ->envname(env("MQTT_MAX_QUEUED_BYTES"))->check(size(kMinMqttBytes))->capture_default_str();
  app.add_option("--mqtt-max-unsent-bytes", s.mqtt_max_unsent_bytes,
                 "bytes of MQTT answers handed to the broker connection and not yet acknowledged by the broker, at "
                 "most; past it an answer waits up to 2 s for room and is then dropped")
      ->envname(env("MQTT_MAX_UNSENT_BYTES"))->check(size(kMinMqttBytes))->capture_default_str();
  app.add_option("--mqtt-claim", s.mqtt_claim,
                 "how long a shadowd's claim on an MQTT request keeps others on the same store from serving it; 0 "
                 "claims nothing")
      ->envname(env("MQTT_CLAIM"))->check(duration_of_at_least(std::chrono::seconds(0)))->capture_default_str();
  app.add_option("--max-body-bytes", s.max_body_bytes, "largest request body")
      ->envname(env("MAX_BODY_BYTES"))->check(whole(1, std::uint64_t{1} << 32))->capture_default_str();
  app.add_option("--max-state-bytes", s.max_state_bytes, "largest section state, as compact JSON")
      ->envname(env("MAX_STATE_BYTES"))->check(whole(1, std::uint64_t{1} << 32))->capture_default_str();
  app.add_option("--max-depth", s.max_depth, "deepest nesting below a state's root")
      ->envname(env("MAX_DEPTH"))->check(whole(1, 1000))->capture_default_str();
  app.add_option("--max-batch-items", s.max_batch_items, "operations per batch request")
      ->envname(env("MAX_BATCH_ITEMS"))->check(whole(1, 100000))->capture_default_str();
  app.add_option("--timestamp-keys", s.timestamp_keys, "members that make an object a timestamped value, in priority order")
      ->envname(env("TIMESTAMP_KEYS"))->delimiter(',')->check(not_empty("a timestamp key"))->capture_default_str();
  app.add_option("--history", s.history,
                 "record the history journal: true (or inline: in each write's transaction), false (or off), or "
                 "stream (DynamoDB: written from the table's stream, not in each write's transaction)")
      ->envname(env("HISTORY"))->check(CLI::IsMember({"true", "inline", "false", "off", "stream"}))
      ->transform([](std::string v) { return v == "inline" ? "true" : v == "off" ? "false" : v; })
      ->capture_default_str();
  app.add_option("--history-retention", s.history_retention, "how long history events are kept")
      ->envname(env("HISTORY_RETENTION"))->check(duration_of_at_least(std::chrono::seconds(0)))->capture_default_str();
  app.add_option("--history-image-every", s.history_image_every,
                 "store a full image of a shadow's state with about every this many of its history events (and when "
                 "the changes since its last image outweigh its state), so an as-of read replays at most about this "
                 "many events; 0 stores none")
      ->envname(env("HISTORY_IMAGE_EVERY"))->check(whole(0, 1000000))->capture_default_str();
  app.add_option("--tombstone-retention", s.tombstone_retention, "how long deleted sections keep their version")
      ->envname(env("TOMBSTONE_RETENTION"))->check(duration_of_at_least(std::chrono::seconds(0)))->capture_default_str();
  app.add_option("--purge-interval", s.purge_interval, "how often expired tombstones, history and dead letters are dropped")
      ->envname(env("PURGE_INTERVAL"))->check(duration_of_at_least(std::chrono::seconds(1)))->capture_default_str();
  app.add_option("--max-attempts", s.max_attempts, "read-merge-write attempts of an unpinned write")
      ->envname(env("MAX_ATTEMPTS"))->check(whole(1, 1000))->capture_default_str();
  app.add_option("--io-threads", s.io_threads, "network I/O threads")
      ->envname(env("IO_THREADS"))->check(whole(1, 256))->capture_default_str();
  app.add_option("--workers", s.workers, "request handler threads")
      ->envname(env("WORKERS"))->check(whole(1, 4096))->capture_default_str();
  app.add_option("--read-timeout-ms", s.read_timeout_ms, "time a client has to send one whole request")
      ->envname(env("READ_TIMEOUT_MS"))->check(whole(1, kHour))->capture_default_str();
  app.add_option("--idle-timeout-ms", s.idle_timeout_ms, "time a keep-alive connection may wait for its next request")
      ->envname(env("IDLE_TIMEOUT_MS"))->check(whole(1, kHour))->capture_default_str();
  app.add_option("--max-connections", s.max_connections,
                 "open client connections; more are answered 503 and closed. shadowd raises its open-file limit to the "
                 "hard limit at start and lowers this to 3/4 of the descriptors that limit leaves once started, with a "
                 "warning")
      ->envname(env("MAX_CONNECTIONS"))->check(size(1))->capture_default_str();
  app.add_option("--max-response-bytes-in-flight", s.max_response_bytes_in_flight,
                 "response bytes written but not yet taken by slow clients, at most: a read whose response is over "
                 "16 KiB and would pass this is answered 503 with Retry-After: 1 (writes are always answered)")
      ->envname(env("MAX_RESPONSE_BYTES_IN_FLIGHT"))->check(size(1))->capture_default_str();
  app.add_option("--max-page-bytes", s.max_page_bytes,
                 "bytes of events in one history or dead-letters page, of shadows in one batch get response and in one "
                 "page of a fleet query")
      ->envname(env("MAX_PAGE_BYTES"))->check(size(1024))->capture_default_str();
  app.add_option("--query-budget", s.query_budget,
                 "shadows one fleet query (search, count) may examine; past it the query is refused with 400 "
                 "query_too_expensive")
      ->envname(env("QUERY_BUDGET"))->check(whole(1, 1000000000))->capture_default_str();
  app.add_option("--max-jobs", s.max_jobs, "bulk jobs running at once at most; starting another is refused with 429")
      ->envname(env("MAX_JOBS"))->check(whole(1, 1000))->capture_default_str();
  app.add_option("--max-job-targets", s.max_job_targets,
                 "shadows one bulk job may target at most; a job (or dry run) matching more is refused with 400")
      ->envname(env("MAX_JOB_TARGETS"))->check(whole(1, 100000000))->capture_default_str();
  app.add_option("--job-lease", s.job_lease,
                 "on DynamoDB: how long a bulk job's runner holds it without renewing (it renews every third of it); "
                 "another shadowd takes over a job whose runner stopped once this has passed")
      ->envname(env("JOB_LEASE"))->check(duration_of_at_least(std::chrono::seconds(3)))->capture_default_str();
  app.add_option("--cursor-key-file", s.cursor_key_file,
                 "file holding the key that seals fleet-query cursors, created (mode 0600, 32 random bytes) if missing; "
                 "shadowd instances sharing a store should share it. Default: cursor.key beside the SQLite database; "
                 "with another store a random key per process (cursors then end with the process)")
      ->envname(env("CURSOR_KEY_FILE"));
  app.add_option("--notify-concurrency", s.notify_concurrency, "event deliveries in flight per notification registration")
      ->envname(env("NOTIFY_CONCURRENCY"))->check(whole(1, 1024))->capture_default_str();
  app.add_option("--notify-window", s.notify_window,
                 "change-feed entries a registration holds in memory ahead of its checkpoint")
      ->envname(env("NOTIFY_WINDOW"))->check(whole(1, 10000000))->capture_default_str();
  app.add_option("--notify-window-bytes", s.notify_window_bytes,
                 "bytes of change-feed entries a registration holds in memory ahead of its checkpoint")
      ->envname(env("NOTIFY_WINDOW_BYTES"))->check(size(1))->capture_default_str();
  app.add_option("--notify-nice", s.notify_nice,
                 "nice levels the notification delivery threads run below request handling (0 to 19; 0: the same priority)")
      ->envname(env("NOTIFY_NICE"))->check(whole(0, 19))->capture_default_str();
  app.add_option("--max-registrations", s.max_registrations,
                 "notification registrations a PUT may create at most (each enabled one costs its target's "
                 "descriptors; all share four sender threads); more are refused with 400")
      ->envname(env("MAX_REGISTRATIONS"))->check(whole(1, 100000))->capture_default_str();
  app.add_option("--dead-letter-retention", s.dead_letter_retention,
                 "how long a dead letter is kept after it failed (then purged; on DynamoDB, by the table's TTL)")
      ->envname(env("DEAD_LETTER_RETENTION"))->check(duration_of_at_least(std::chrono::seconds(1)))->capture_default_str();
  app.add_option("--max-dead-letters", s.max_dead_letters,
                 "dead letters a registration keeps at most; storing one more removes the oldest")
      ->envname(env("MAX_DEAD_LETTERS"))->check(whole(1, 100000000))->capture_default_str();
  app.add_option("--stream-lease-timeout", s.stream_lease_timeout,
                 "on DynamoDB: how long a shadowd that stopped renewing its stream shard leases keeps them before "
                 "the others take them over")
      ->envname(env("STREAM_LEASE_TIMEOUT"))->check(duration_of_at_least(std::chrono::seconds(1)))->capture_default_str();
  app.add_option("--stream-heartbeat", s.stream_heartbeat, "how often a live change stream (SSE) sends a keep-alive comment")
      ->envname(env("STREAM_HEARTBEAT"))->check(duration_of_at_least(std::chrono::seconds(1)))->capture_default_str();
  app.add_option("--stream-buffer", s.stream_buffer,
                 "bytes a live change stream may have waiting for its client; a slower client is sent event: overflow "
                 "and closed")
      ->envname(env("STREAM_BUFFER"))->check(size(4096))->capture_default_str();
  app.add_option("--max-streams", s.max_streams, "live change streams open at once; more are answered 503 with Retry-After")
      ->envname(env("MAX_STREAMS"))->check(size(1))->capture_default_str();
  app.add_option("--log-format", s.log_format, "text or json")
      ->envname(env("LOG_FORMAT"))->check(CLI::IsMember({"text", "json"}))->capture_default_str();
  app.add_option("--log-level", s.log_level, "debug, info, warn or error")->envname(env("LOG_LEVEL"))
      ->check(CLI::IsMember({"debug", "info", "warn", "error"}))->capture_default_str();

  CLI::App* hash = app.add_subcommand("hash-token", "print the SHA-256 of a token, for the token file");
  hash->add_option("token", command.token, "the secret token")->required()->check(not_empty("the token"));
  CLI::App* dynamodb = app.add_subcommand("dynamodb", "DynamoDB administration");
  CLI::App* create_table = dynamodb->add_subcommand(
      "create-table",
      "create a table in the layout shadowd uses (on-demand, GSI1, GSI2, TTL on ttl, stream NEW_AND_OLD_IMAGES)");
  create_table->add_option("--table", command.table, "table name")
      ->required()->check(checked_by([](const std::string& t) { parse_store("dynamodb:" + t); }, "TABLE"));
  dynamodb_flags(create_table);
  app.require_subcommand(0, 1);

  try {
    if (const std::optional<std::string> config = config_path(argc, argv)) check_config_file(*config, app);
    app.parse(argc, argv);
  } catch (const std::invalid_argument& e) {
    std::fprintf(stderr, "shadowd: %s\n", e.what());
    command.kind = Command::Kind::exit;
    command.exit_status = 2;
    return command;
  } catch (const CLI::CallForHelp& e) {
    command.kind = Command::Kind::exit;
    command.exit_status = app.exit(e);
    return command;
  } catch (const CLI::CallForAllHelp& e) {
    command.kind = Command::Kind::exit;
    command.exit_status = app.exit(e);
    return command;
  } catch (const CLI::ParseError& e) {
    std::fprintf(stderr, "shadowd: %s\n", e.what());
    command.kind = Command::Kind::exit;
    command.exit_status = 2;
    return command;
  }
  if (*dynamodb && !*create_table) {  // (checked here: CLI11's own check hides an unknown one's name)
    std::fprintf(stderr, "shadowd: dynamodb: expected a subcommand: create-table\n");
    command.kind = Command::Kind::exit;
    command.exit_status = 2;
    return command;
  }
  if (s.history == "stream" && parse_store(s.store).kind != StoreKind::dynamodb) {
    std::fprintf(stderr, "shadowd: --history: stream writes history from a DynamoDB table's stream: use true or false "
                         "with --store %s\n", s.store.c_str());
    command.kind = Command::Kind::exit;
    command.exit_status = 2;
    return command;
  }
  if (!s.mqtt.empty() && s.mqtt_max_queued_bytes / 2 < s.max_body_bytes) {
    std::fprintf(stderr, "shadowd: --mqtt-max-queued-bytes: %zu is less than twice --max-body-bytes (%zu): one shadow "
                         "may take at most half of it, and must fit a request of the largest size\n",
                 s.mqtt_max_queued_bytes, s.max_body_bytes);
    command.kind = Command::Kind::exit;
    command.exit_status = 2;
    return command;
  }
  command.kind = *hash ? Command::Kind::hash_token : *create_table ? Command::Kind::create_table : Command::Kind::serve;
  return command;
}

}  // namespace deviceshadow::shadowd
