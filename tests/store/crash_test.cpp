// Crash durability: a writer process is SIGKILLed at random moments, many rounds; after each
// reopen every write it acknowledged is present and the database passes its integrity check.
#include "deviceshadow/sqlite_store.hpp"
#include "support/stores.hpp"

#include <poll.h>
#include <signal.h>
#include <sqlite3.h>
#include <sys/wait.h>
#include <unistd.h>

#include <boost/json/object.hpp>

#include <chrono>
#include <set>

#include "deviceshadow/json.hpp"

namespace {

// Runs the writer until it acknowledged its first write and `millis` ms more, then SIGKILLs
// it; returns the keys it acknowledged. Waiting for the first write keeps a slow start (a
// sanitizer build, a busy machine) from eating the round.
std::vector<long> run_and_kill(const std::string& db, long first_key, int millis) {
  int out[2];
  EXPECT_EQ(pipe(out), 0);
  pid_t pid = fork();
  if (pid == 0) {
    dup2(out[1], STDOUT_FILENO);
    close(out[0]);
    close(out[1]);
    execl(DS_CRASH_WRITER, DS_CRASH_WRITER, db.c_str(), std::to_string(first_key).c_str(), nullptr);
    _exit(127);
  }
  close(out[1]);
  std::string text;
  char buf[4096];
  pollfd first{out[0], POLLIN, 0};
  while (text.find('\n') == std::string::npos && poll(&first, 1, 60'000) > 0) {
    ssize_t n = read(out[0], buf, sizeof buf);
    if (n <= 0) break;
    text.append(buf, static_cast<std::size_t>(n));
  }
  usleep(static_cast<useconds_t>(millis) * 1000);
  kill(pid, SIGKILL);
  int status = 0;
  waitpid(pid, &status, 0);
  EXPECT_TRUE(WIFSIGNALED(status)) << "writer exited on its own with status " << status;
  for (ssize_t n; (n = read(out[0], buf, sizeof buf)) > 0;) text.append(buf, static_cast<std::size_t>(n));
  close(out[0]);
  std::vector<long> keys;
  for (std::size_t pos = 0, nl; (nl = text.find('\n', pos)) != std::string::npos; pos = nl + 1) {
    keys.push_back(std::stol(text.substr(pos, nl - pos)));
  }
  return keys;
}

// The first column of the first row of `sql` on the database, as text.
std::string scalar(const std::string& db, const char* sql) {
  sqlite3* h = nullptr;
  sqlite3_open(db.c_str(), &h);
  sqlite3_stmt* st = nullptr;
  sqlite3_prepare_v2(h, sql, -1, &st, nullptr);
  std::string out = sqlite3_step(st) == SQLITE_ROW ? reinterpret_cast<const char*>(sqlite3_column_text(st, 0)) : "?";
  sqlite3_finalize(st);
  sqlite3_close(h);
  return out;
}

TEST(CrashDurability, NoAcknowledgedWriteIsLostWhenTheWriterIsKilled) {
  TempDir dir;
  const std::string db = (dir.path() / "shadows.db").string();
  std::vector<long> acknowledged;
  std::mt19937 rng(12345);
  long next_key = 0;
  constexpr int kRounds = 25;
  for (int round = 0; round < kRounds; ++round) {
    std::vector<long> keys = run_and_kill(db, next_key, 40 + static_cast<int>(rng() % 160));
    acknowledged.insert(acknowledged.end(), keys.begin(), keys.end());
    next_key += 1'000'000;  // each round writes keys of its own
    ASSERT_EQ(scalar(db, "PRAGMA integrity_check"), "ok") << "round " << round;
  }
  ASSERT_GT(acknowledged.size(), 100u) << "the writer hardly wrote; the test proves nothing";
  ds::SqliteOptions o;
  o.path = db;
  auto store = ds::open_sqlite_store(o);
  std::set<std::string> present;
  for (int s = 0; s < 7; ++s) {
    ds::ShadowRecord r = store->read({"crash-" + std::to_string(s), "main"});
    boost::json::value state = ds::parse_json(r.reported.state_json);
    for (const auto& m : state.as_object()) present.insert(std::string(m.key()));
  }
  for (long k : acknowledged) ASSERT_TRUE(present.count("k" + std::to_string(k))) << "lost acknowledged write " << k;
  RecordProperty("acknowledged_writes", static_cast<int>(acknowledged.size()));

  // The change feed: every stored write has its entry (the same count as history events, both
  // written in the write's transaction), and so every acknowledged write is in it.
  std::vector<ds::FeedEntry> feed = store->read_feed(0, SIZE_MAX >> 1);
  EXPECT_EQ(std::to_string(feed.size()), scalar(db, "SELECT count(*) FROM history"));
  std::set<std::string> in_feed;
  for (const ds::FeedEntry& e : feed) {
    const boost::json::value entry = ds::parse_json(e.json);
    for (const auto& change : entry.at("event").at("reported").at("changes").as_array()) {
      in_feed.insert(std::string(change.at("path").as_string()));
    }
  }
  for (long k : acknowledged) ASSERT_TRUE(in_feed.count("/k" + std::to_string(k))) << "no feed entry for write " << k;
}

}  // namespace
