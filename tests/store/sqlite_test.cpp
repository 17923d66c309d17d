// SQLite-specific behaviour: durability across reopen, schema versioning, integrity.
#include "deviceshadow/engine.hpp"
#include "deviceshadow/error.hpp"
#include "support/stores.hpp"

#include <sqlite3.h>

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
