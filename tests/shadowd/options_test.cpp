// shadowd's options: each bad value is refused before anything starts, with one line naming the
// option and exit status 2; the parsers behind the checks.
#include "shadowd/options.hpp"

#include <gtest/gtest.h>

#include <cstdlib>
#include <initializer_list>
#include <string>
#include <vector>

namespace sd = deviceshadow::shadowd;

namespace {

struct Parsed {
  sd::Command command;
  std::string error;  // what went to stderr
};

Parsed parse(std::initializer_list<const char*> args) {
  std::vector<const char*> argv{"shadowd"};
  argv.insert(argv.end(), args.begin(), args.end());
  testing::internal::CaptureStderr();
  Parsed p{sd::parse_command_line(static_cast<int>(argv.size()), argv.data()), {}};
  p.error = testing::internal::GetCapturedStderr();
  return p;
}

void expect_refused(std::initializer_list<const char*> args, const std::string& message) {
  const Parsed p = parse(args);
  EXPECT_EQ(p.command.kind, sd::Command::Kind::exit) << *args.begin();
  EXPECT_EQ(p.command.exit_status, 2) << *args.begin();
  EXPECT_EQ(p.error, "shadowd: " + message + "\n");
}

TEST(Options, DefaultsServe) {
  const Parsed p = parse({});
  EXPECT_EQ(p.command.kind, sd::Command::Kind::serve);
  EXPECT_EQ(p.error, "");
  EXPECT_EQ(p.command.options.listen, "127.0.0.1:8080");
}

TEST(Options, ListenAddresses) {
  EXPECT_EQ(sd::parse_listen("127.0.0.1:8080").port, 8080);
  EXPECT_EQ(sd::parse_listen("0.0.0.0:0").port, 0);
  EXPECT_EQ(sd::parse_listen("[::1]:65535").host, "::1");
  EXPECT_EQ(sd::parse_listen("[::1]:65535").port, 65535);
  EXPECT_THROW(sd::parse_listen("localhost:80"), std::invalid_argument);
  EXPECT_THROW(sd::parse_listen("127.0.0.1"), std::invalid_argument);
}

TEST(Options, PortsOutOfRangeAreRefusedNotWrapped) {
  expect_refused({"--listen", "127.0.0.1:70000"}, "--listen: port 70000 is out of range (0-65535)");
  expect_refused({"--listen", "127.0.0.1:65536"}, "--listen: port 65536 is out of range (0-65535)");
  expect_refused({"--listen", "127.0.0.1:-1"}, "--listen: port -1 is out of range (0-65535)");
  expect_refused({"--listen", "127.0.0.1:"}, "--listen: port  is out of range (0-65535)");
  expect_refused({"--mqtt", "mqtt://127.0.0.1:71883"},
                 "--mqtt: port '71883' is out of range (1-65535) in mqtt://127.0.0.1:71883");
  expect_refused({"--mqtt", "http://broker"}, "--mqtt: expected mqtt://HOST[:PORT], not 'http://broker'");
}

TEST(Options, NumbersAreWholeAndInRange) {
  expect_refused({"--max-body-bytes", ""}, "--max-body-bytes: '' is not a whole number (1-4294967296)");
  expect_refused({"--max-body-bytes", "99999999999999999999999"},
                 "--max-body-bytes: 99999999999999999999999 is out of range (1-4294967296)");
  expect_refused({"--workers", "0"}, "--workers: 0 is out of range (1-4096)");
  expect_refused({"--read-timeout-ms", "0"}, "--read-timeout-ms: 0 is out of range (1-3600000)");
  expect_refused({"--read-timeout-ms", "-1"}, "--read-timeout-ms: '-1' is not a whole number (1-3600000)");
  expect_refused({"--idle-timeout-ms", "-1"}, "--idle-timeout-ms: '-1' is not a whole number (1-3600000)");
  expect_refused({"--notify-nice", "20"}, "--notify-nice: 20 is out of range (0-19)");
  // CLI11 reads a leading zero as octal: refused rather than read as another number.
  expect_refused({"--notify-nice", "010"}, "--notify-nice: '010' is not a whole number (0-19)");
  EXPECT_EQ(parse({"--notify-nice", "0"}).command.options.notify_nice, 0);
  expect_refused({"--max-dead-letters", "0"}, "--max-dead-letters: 0 is out of range (1-100000000)");
  expect_refused({"--max-registrations", "0"}, "--max-registrations: 0 is out of range (1-100000)");
  expect_refused({"--history-image-every", "1000001"}, "--history-image-every: 1000001 is out of range (0-1000000)");
  expect_refused({"--history-image-every", "-5"}, "--history-image-every: '-5' is not a whole number (0-1000000)");
  EXPECT_EQ(parse({}).command.options.max_registrations, 100u);
  EXPECT_EQ(parse({}).command.options.max_dead_letters, 100000u);
  expect_refused({"--cache-entries", "12abc"}, "--cache-entries: '12abc' is not a whole number (0-9223372036854775807)");
}

TEST(Options, MqttByteBudgets) {
  const Parsed defaults = parse({"--mqtt", "mqtt://127.0.0.1"});
  ASSERT_EQ(defaults.command.kind, sd::Command::Kind::serve) << defaults.error;
  EXPECT_EQ(defaults.command.options.mqtt_max_queued_bytes, std::size_t{64} << 20);
  EXPECT_EQ(defaults.command.options.mqtt_max_unsent_bytes, std::size_t{64} << 20);
  expect_refused({"--mqtt-max-queued-bytes", "65535"},
                 "--mqtt-max-queued-bytes: 65535 is out of range (65536-9223372036854775807)");
  expect_refused({"--mqtt-max-unsent-bytes", "0"},
                 "--mqtt-max-unsent-bytes: 0 is out of range (65536-9223372036854775807)");
  // One shadow may take half of the queue: that half must hold a request of the largest size.
  expect_refused({"--mqtt", "mqtt://127.0.0.1", "--max-body-bytes", "1048576", "--mqtt-max-queued-bytes", "2097151"},
                 "--mqtt-max-queued-bytes: 2097151 is less than twice --max-body-bytes (1048576): one shadow may "
                 "take at most half of it, and must fit a request of the largest size");
  EXPECT_EQ(parse({"--mqtt", "mqtt://127.0.0.1", "--mqtt-max-queued-bytes", "2097152"}).command.kind,
            sd::Command::Kind::serve);
  EXPECT_EQ(parse({"--mqtt-max-queued-bytes", "65536"}).command.kind, sd::Command::Kind::serve);  // no --mqtt
}

TEST(Options, Durations) {
  EXPECT_EQ(sd::parse_duration("90s").count(), 90);
  EXPECT_EQ(sd::parse_duration("15m").count(), 900);
  EXPECT_EQ(sd::parse_duration("2").count(), 2);
  EXPECT_EQ(sd::parse_duration("36500d").count(), 36500LL * 86400);
  expect_refused({"--history-retention", ""},
                 "--history-retention: '' is not a duration (a whole number and s, m, h or d: 90s, 15m, 48h, 30d)");
  expect_refused({"--history-retention", "99999999999999999999d"},
                 "--history-retention: 99999999999999999999d is longer than 36500d");
  expect_refused({"--history-retention", "36501d"}, "--history-retention: 36501d is longer than 36500d");
  expect_refused({"--tombstone-retention", "-5m"},
                 "--tombstone-retention: '-5m' is not a duration (a whole number and s, m, h or d: 90s, 15m, 48h, 30d)");
  expect_refused({"--dead-letter-retention", "0"}, "--dead-letter-retention: must be at least 1s, not 0");
  expect_refused({"--dead-letter-retention", "36501d"}, "--dead-letter-retention: 36501d is longer than 36500d");
  EXPECT_EQ(parse({}).command.options.dead_letter_retention, "14d");
  EXPECT_EQ(sd::parse_duration(parse({"--dead-letter-retention", "2h"}).command.options.dead_letter_retention).count(), 7200);
  // 0 would make the purger spin.
  expect_refused({"--purge-interval", "0"}, "--purge-interval: must be at least 1s, not 0");
  EXPECT_EQ(parse({"--mqtt-claim", "0"}).command.kind, sd::Command::Kind::serve);
}

TEST(Options, Stores) {
  EXPECT_EQ(sd::parse_store("memory").kind, sd::StoreKind::memory);
  EXPECT_EQ(sd::parse_store("sqlite:/x/y.db").location, "/x/y.db");
  EXPECT_EQ(sd::parse_store("dynamodb:shadows").location, "shadows");
  expect_refused({"--store", "sqlite:"}, "--store: sqlite: needs a file path, as in sqlite:./shadowd-data/shadows.db");
  expect_refused({"--store", "postgres:x"}, "--store: expected sqlite:PATH, memory or dynamodb:TABLE, not 'postgres:x'");
  expect_refused({"--store", "dynamodb:a"},
                 "--store: 'a' is not a DynamoDB table name (3 to 255 of a-z, A-Z, 0-9, '_', '-' and '.')");
  expect_refused({"--history", "stream"},
                 "--history: stream writes history from a DynamoDB table's stream: use true or false with --store "
                 "sqlite:./shadowd-data/shadows.db");
}

TEST(Options, EnvironmentVariablesAreCheckedLikeFlags) {
  ::setenv("SHADOWD_LISTEN", "127.0.0.1:99999", 1);
  expect_refused({}, "--listen: port 99999 is out of range (0-65535)");
  ::unsetenv("SHADOWD_LISTEN");
}

TEST(Options, ConfigFileSetsOptionsAndIsChecked) {
  const std::string path = testing::TempDir() + "shadowd_options_test.toml";
  std::FILE* f = std::fopen(path.c_str(), "w");
  ASSERT_NE(f, nullptr);
  std::fputs("listen = \"127.0.0.1:9090\"\nmax-body-bytes = 2048\ntimestamp-keys = [\"t\"]\n", f);
  std::fclose(f);
  const Parsed good = parse({"--config", path.c_str()});
  ASSERT_EQ(good.command.kind, sd::Command::Kind::serve) << good.error;
  EXPECT_EQ(good.command.options.listen, "127.0.0.1:9090");
  EXPECT_EQ(good.command.options.max_body_bytes, 2048u);
  EXPECT_EQ(good.command.options.timestamp_keys, std::vector<std::string>{"t"});

  f = std::fopen(path.c_str(), "w");
  std::fputs("purge-interval = \"0s\"\n", f);
  std::fclose(f);
  expect_refused({"--config", path.c_str()}, "--purge-interval: must be at least 1s, not 0s");
  std::remove(path.c_str());
}

// The file holds what CLI11 would otherwise skip or misread: each such line is refused, named.
TEST(Options, ConfigFileLinesThatWouldBeIgnoredAreRefused) {
  const std::string path = testing::TempDir() + "shadowd_options_lines.toml";
  auto refused = [&](const std::string& text, const std::string& message) {
    std::FILE* f = std::fopen(path.c_str(), "w");
    ASSERT_NE(f, nullptr);
    std::fputs(text.c_str(), f);
    std::fclose(f);
    expect_refused({"--config", path.c_str()}, "--config: " + path + " " + message);
  };
  refused("# shadowd\nmax_body_bytes = 5\n", "line 2: no option is called max_body_bytes");
  refused("nosuchkey = 1\n", "line 1: no option is called nosuchkey");
  refused("config = \"other.toml\"\n", "line 1: no option is called config");
  refused("[server]\nlisten = \"127.0.0.1:1\"\n", "line 1: tables ([...]) are not read: write every option at the top level");
  refused("this is not toml =\n", "line 1: expected `option-name = value`");
  refused("listen\n", "line 1: expected `option-name = value`");
  refused("\xEF\xBB\xBFlisten = \"127.0.0.1:1\"\n", "line 1: starts with a byte-order mark; save the file as UTF-8 without one");
  refused("workers = 4\n\nworkers = 8\n", "line 3: workers is set twice (also on line 1)");
  std::remove(path.c_str());
  expect_refused({"--config", ""}, "--config: the path must not be empty");
  expect_refused({"--config=/nonexistent/shadowd.toml"}, "--config: cannot read /nonexistent/shadowd.toml");
}

// Values that CLI11 alone would take, or that would switch a protection off unseen.
TEST(Options, EmptyAndLooseValuesAreRefused) {
  expect_refused({"--tokens", ""}, "--tokens: the token file's path must not be empty");
  expect_refused({"--timestamp-keys", ""}, "--timestamp-keys: a timestamp key must not be empty");
  expect_refused({"--console", "yes"}, "--console: expected true or false, not 'yes'");
  expect_refused({"--inline-reads", "1"}, "--inline-reads: expected true or false, not '1'");
  expect_refused({"--aws-classic-shadow", "a/b"}, "--aws-classic-shadow: name: may only contain A-Z a-z 0-9 _ . : $ -");
  expect_refused({"--mqtt", "mqtt://user:pw@127.0.0.1:1883"},
                 "--mqtt: a user name or password goes in --mqtt-username and SHADOWD_MQTT_PASSWORD, not in the URL");
  expect_refused({"--mqtt", "mqtt://127.0.0.1:1883/shadows"}, "--mqtt: expected mqtt://HOST[:PORT], without a path: 'mqtt://127.0.0.1:1883/shadows'");
  EXPECT_EQ(parse({"--mqtt", "mqtt://127.0.0.1:1883/"}).command.kind, sd::Command::Kind::serve);
  expect_refused({"hash-token", ""}, "token: the token must not be empty");
}

TEST(Options, SubcommandsParse) {
  const Parsed hash = parse({"hash-token", "secret"});
  EXPECT_EQ(hash.command.kind, sd::Command::Kind::hash_token);
  EXPECT_EQ(hash.command.token, "secret");
  const Parsed table = parse({"dynamodb", "create-table", "--table", "shadows"});
  EXPECT_EQ(table.command.kind, sd::Command::Kind::create_table);
  expect_refused({"dynamodb"}, "dynamodb: expected a subcommand: create-table");
  expect_refused({"dynamodb", "drop-table"}, "The following argument was not expected: drop-table");
  expect_refused({"dynamodb", "create-table", "--table", "x"},
                 "--table: 'x' is not a DynamoDB table name (3 to 255 of a-z, A-Z, 0-9, '_', '-' and '.')");
}

}  // namespace

TEST(Options, HistoryTakesInlineAndOffForTrueAndFalse) {
  EXPECT_EQ(parse({}).command.options.history, "true");
  EXPECT_EQ(parse({"--history", "inline"}).command.options.history, "true");
  EXPECT_EQ(parse({"--history", "off"}).command.options.history, "false");
  EXPECT_EQ(parse({"--history", "false"}).command.options.history, "false");
  const Parsed bad = parse({"--history", "sometimes"});
  EXPECT_EQ(bad.command.exit_status, 2);
  EXPECT_NE(bad.error.find("--history"), std::string::npos) << bad.error;
}

TEST(Options, InlineReadsAreOnByDefaultAndTakeTrueOrFalse) {
  EXPECT_TRUE(parse({}).command.options.inline_reads);
  EXPECT_FALSE(parse({"--inline-reads", "false"}).command.options.inline_reads);
  ::setenv("SHADOWD_INLINE_READS", "false", 1);
  EXPECT_FALSE(parse({}).command.options.inline_reads);
  ::unsetenv("SHADOWD_INLINE_READS");
  const Parsed bad = parse({"--inline-reads", "sometimes"});
  EXPECT_EQ(bad.command.exit_status, 2);
  EXPECT_NE(bad.error.find("--inline-reads"), std::string::npos) << bad.error;
}

TEST(Options, ConsoleIsOnByDefaultAndTakesTrueOrFalse) {
  EXPECT_TRUE(parse({}).command.options.console);
  EXPECT_FALSE(parse({"--console", "false"}).command.options.console);
  EXPECT_TRUE(parse({"--console", "true"}).command.options.console);
  ::setenv("SHADOWD_CONSOLE", "false", 1);
  EXPECT_FALSE(parse({}).command.options.console);
  ::unsetenv("SHADOWD_CONSOLE");
  const Parsed bad = parse({"--console", "maybe"});
  EXPECT_EQ(bad.command.kind, sd::Command::Kind::exit);
  EXPECT_EQ(bad.command.exit_status, 2);
  EXPECT_NE(bad.error.find("--console"), std::string::npos) << bad.error;
}
