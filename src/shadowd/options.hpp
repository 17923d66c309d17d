// shadowd's command line: every option with its SHADOWD_* variable and --config key, checked
// while it is parsed, so that a bad value stops shadowd before anything starts, with one line
// that names the option and the reason and exit status 2:
//   shadowd: --listen: port 70000 is out of range (0-65535)
// The parsers below are the ones those checks use; each throws std::invalid_argument with the
// reason (without the option's name).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace deviceshadow::shadowd {

struct ListenAddress {
  std::string host;        // an IPv4 or IPv6 address, without brackets
  std::uint16_t port = 0;  // 0: any free port
};
// "HOST:PORT" or "[IPV6]:PORT"; HOST must be an IP address.
ListenAddress parse_listen(std::string_view text);

// A whole number followed by s, m, h or d ("90s", "15m", "48h", "30d"; no unit: seconds), at most
// 36500d.
std::chrono::seconds parse_duration(std::string_view text);

enum class StoreKind { sqlite, memory, dynamodb };
struct StoreSpec {
  StoreKind kind = StoreKind::sqlite;
  std::string location;  // the SQLite path or the DynamoDB table; empty for memory
};
// "sqlite:PATH", "memory" or "dynamodb:TABLE" (a valid DynamoDB table name).
StoreSpec parse_store(std::string_view text);

// Every option of the server, as given (durations as their text, checked by parse_duration).
struct Options {
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
  bool private_readyz = false;
  bool inline_reads = true;
  bool console = true;  // serve the web console at /console/
  std::string aws_credentials;
  std::string aws_classic_shadow = "main";
  bool aws_acknowledge = false;
  std::string mqtt;
  std::string mqtt_username;
  std::string mqtt_password;
  std::string mqtt_client_id;
  std::size_t mqtt_workers = 16;
  std::size_t mqtt_max_queued_bytes = std::size_t{64} << 20;
  std::size_t mqtt_max_unsent_bytes = std::size_t{64} << 20;
  std::string mqtt_claim = "3s";
  std::size_t max_body_bytes = 1 << 20;
  std::size_t max_state_bytes = 64 << 10;
  std::size_t max_depth = 32;
  std::size_t max_batch_items = 100;
  std::vector<std::string> timestamp_keys = {"ts", "timestamp"};
  std::string history = "true";
  std::string history_retention = "30d";
  std::size_t history_image_every = 64;
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
  std::size_t query_budget = 200000;
  std::size_t max_jobs = 4;
  std::uint64_t max_job_targets = 1000000;
  std::string job_lease = "30s";
  std::string cursor_key_file;
  std::size_t notify_concurrency = 8;
  std::size_t notify_window = 10000;
  std::size_t notify_window_bytes = std::size_t{64} << 20;
  int notify_nice = 10;
  std::string dead_letter_retention = "14d";
  std::size_t max_dead_letters = 100000;
  std::size_t max_registrations = 100;
  std::string stream_lease_timeout = "10s";
  std::string stream_heartbeat = "15s";
  std::size_t stream_buffer = std::size_t{1} << 20;
  std::size_t max_streams = 1000;
  std::string log_format = "text";
  std::string log_level = "info";
};

// What the command line asks for.
struct Command {
  enum class Kind { serve, hash_token, create_table, exit } kind = Kind::serve;
  Options options;
  std::string token;  // hash-token
  std::string table;  // dynamodb create-table
  int exit_status = 0;  // Kind::exit: --help (0) or a refused option (2, already reported)
};

// Parses argv, the SHADOWD_* environment and the --config file. Help and refusals are printed
// here (help to stdout, a refusal as one "shadowd: …" line to stderr) and come back as
// Kind::exit.
Command parse_command_line(int argc, const char* const* argv);

}  // namespace deviceshadow::shadowd
