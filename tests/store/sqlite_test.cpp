// SQLite-specific behaviour: durability across reopen, schema versioning, integrity.
#include "deviceshadow/engine.hpp"
#include "deviceshadow/error.hpp"
#include "support/stores.hpp"

#include <sqlite3.h>

#include <mutex>
#include <thread>
#include <vector>

namespace {

std::string scalar(const std::filesystem::path& db, const char* sql) {
  sqlite3* h = nullptr;
  sqlite3_open(db.c_str(), &h);
  sqlite3_stmt* st = nullptr;
  sqlite3_prepare_v2(h, sql, -1, &st, nullptr);
  std::string out;
  if (sqlite3_step(st) == SQLITE_ROW) out = reinterpret_cast<const char*>(sqlite3_column_text(st, 0));
  sqlite3_finalize(st);
  sqlite3_close(h);
  return out;
}

ds::SqliteOptions options_in(const TempDir& dir) {
  ds::SqliteOptions o;
  o.path = (dir.path() / "nested" / "dir" / "shadows.db").string();
  return o;
}

TEST(Sqlite, CreatesTheDatabaseWithWalAndTheCurrentSchema) {
  TempDir dir;
  { auto store = ds::open_sqlite_store(options_in(dir)); }
  auto db = dir.path() / "nested" / "dir" / "shadows.db";
  EXPECT_EQ(scalar(db, "PRAGMA journal_mode"), "wal");
  EXPECT_EQ(scalar(db, "PRAGMA user_version"), std::to_string(ds::kSqliteSchemaVersion));
}

TEST(Sqlite, WritesSurviveReopen) {
  TempDir dir;
  {
    auto store = ds::open_sqlite_store(options_in(dir));
    ds::Engine engine(*store);
    ds::UpdateRequest r;
    r.key = {"My House#Basement#Lightning Controller", "main"};
    r.state["level"] = 0.75;
    engine.update(r);
  }
  auto store = ds::open_sqlite_store(options_in(dir));
  ds::Engine engine(*store);
  ds::ShadowView view = engine.get({"My House#Basement#Lightning Controller", "main"});
  EXPECT_EQ(view.record.reported.state_json, R"({"level":0.75})");
  EXPECT_EQ(engine.history(view.key).events.size(), 1u);
  EXPECT_EQ(scalar(dir.path() / "nested" / "dir" / "shadows.db", "PRAGMA integrity_check"), "ok");
}

// A version 1 database (before registrations and the feed) is migrated in place; its shadows stay.
TEST(Sqlite, MigratesAVersion1Database) {
  TempDir dir;
  auto db = dir.path() / "nested" / "dir" / "shadows.db";
  {
    auto store = ds::open_sqlite_store(options_in(dir));
    ds::Engine engine(*store);
    ds::UpdateRequest r;
    r.key = {"t", "main"};
    r.state["a"] = 1;
    engine.update(r);
  }
  scalar(db, "ALTER TABLE sections DROP COLUMN times");
  scalar(db, "DROP TABLE registrations");
  scalar(db, "DROP TABLE feed");
  scalar(db, "DROP TABLE dead_letters");
  scalar(db, "PRAGMA user_version = 1");
  auto store = ds::open_sqlite_store(options_in(dir));
  EXPECT_EQ(scalar(db, "PRAGMA user_version"), std::to_string(ds::kSqliteSchemaVersion));
  store->put_registration({"r1", "{}", 1});
  EXPECT_EQ(store->list_registrations().size(), 1u);
  EXPECT_EQ(store->read({"t", "main"}).reported.state_json, R"({"a":1})");
}

// A version 2 database (before per-leaf times) gains the column; its sections read with no
// times (every leaf at the section's time) and keep them from their next write on.
TEST(Sqlite, MigratesAVersion2DatabaseWithoutLeafTimes) {
  TempDir dir;
  auto db = dir.path() / "nested" / "dir" / "shadows.db";
  std::int64_t first_ns = 0;
  {
    auto store = ds::open_sqlite_store(options_in(dir));
    ds::Engine engine(*store);
    ds::UpdateRequest r;
    r.key = {"t", "main"};
    r.state["a"] = 1;
    r.state["b"] = 2;
    first_ns = engine.update(r).shadow.record.reported.timestamp_ns;
  }
  scalar(db, "ALTER TABLE sections DROP COLUMN times");
  scalar(db, "PRAGMA user_version = 2");
  auto store = ds::open_sqlite_store(options_in(dir));
  EXPECT_EQ(scalar(db, "PRAGMA user_version"), std::to_string(ds::kSqliteSchemaVersion));
  EXPECT_EQ(store->read({"t", "main"}).reported.times_json, "");
  ds::Engine engine(*store);
  ds::UpdateRequest r;
  r.key = {"t", "main"};
  r.state["b"] = 3;
  const std::int64_t second_ns = engine.update(r).shadow.record.reported.timestamp_ns;
  EXPECT_EQ(store->read({"t", "main"}).reported.times_json,
            R"({"a":)" + std::to_string(first_ns) + R"(,"b":)" + std::to_string(second_ns) + "}");
}

// The write-ahead log is copied into the database while the store is open, and stays bounded
// (8 * checkpoint_pages, plus the last transaction) under steady writes from many threads.
TEST(Sqlite, CheckpointsKeepTheWriteAheadLogBounded) {
  TempDir dir;
  ds::SqliteOptions o = options_in(dir);
  o.checkpoint_pages = 16;
  const auto db = dir.path() / "nested" / "dir" / "shadows.db";
  auto wal = db;
  wal += "-wal";
  auto store = ds::open_sqlite_store(o);
  ds::Engine engine(*store);
  const auto empty_db = std::filesystem::file_size(db);
  std::uintmax_t largest_wal = 0;
  std::mutex largest_mutex;
  std::vector<std::thread> writers;
  for (int w = 0; w < 8; ++w) {
    writers.emplace_back([&, w] {
      for (int i = 0; i < 120; ++i) {
        ds::UpdateRequest r;
        r.key = {"thing-" + std::to_string(w), "shadow-" + std::to_string(i)};
        r.state["blob"] = std::string(3000, static_cast<char>('a' + i % 26));
        engine.update(r);
        std::lock_guard lock(largest_mutex);
        largest_wal = std::max(largest_wal, std::filesystem::file_size(wal));
      }
    });
  }
  for (auto& t : writers) t.join();
  constexpr std::uintmax_t kFrame = 4096 + 24;
  EXPECT_LE(largest_wal, (8 * 16 + 256) * kFrame);  // without the writer checkpointing: tens of MB
  EXPECT_GT(std::filesystem::file_size(db), empty_db + 960 * 3000);  // the shadows reached the database
  store.reset();
  EXPECT_EQ(scalar(db, "SELECT count(*) FROM sections"), "960");
  EXPECT_EQ(scalar(db, "PRAGMA integrity_check"), "ok");
}

TEST(Sqlite, RefusesADatabaseFromANewerVersion) {
  TempDir dir;
  { auto store = ds::open_sqlite_store(options_in(dir)); }
  scalar(dir.path() / "nested" / "dir" / "shadows.db", "PRAGMA user_version = 99");
  try {
    ds::open_sqlite_store(options_in(dir));
    FAIL() << "opened a newer schema";
  } catch (const ds::Error& e) {
    EXPECT_EQ(e.code(), ds::ErrorCode::unavailable);
    EXPECT_NE(std::string(e.what()).find("newer"), std::string::npos);
  }
}

TEST(Sqlite, UnopenablePathIsUnavailable) {
  ds::SqliteOptions o;
  o.path = "/proc/deviceshadow/cannot/shadows.db";
  try {
    ds::open_sqlite_store(o);
    FAIL();
  } catch (const ds::Error& e) {
    EXPECT_EQ(e.code(), ds::ErrorCode::unavailable);
  }
}

}  // namespace
