// SQLite-specific behaviour: durability across reopen, schema versioning, integrity.
#include "deviceshadow/engine.hpp"
#include "deviceshadow/error.hpp"
#include "support/stores.hpp"

#include <sqlite3.h>

#include <atomic>
#include <chrono>
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

// Makes the dead letters table of a current database what it was before version 5 (no expiry).
void dead_letters_before_version_5(const std::filesystem::path& db) {
  scalar(db, "DROP INDEX dead_letters_expiry");
  scalar(db, "ALTER TABLE dead_letters DROP COLUMN expires");
}

ds::SqliteOptions options_in(const TempDir& dir) {
  ds::SqliteOptions o;
  o.path = (dir.path() / "nested" / "dir" / "shadows.db").string();
  return o;
}

// A database in `dir` of the current schema holding shadow t/main, reported {"a":1}: what the
// migration tests take back to an older version.
void store_one_shadow(const TempDir& dir) {
  auto store = ds::open_sqlite_store(options_in(dir));
  ds::Engine engine(*store);
  ds::UpdateRequest r;
  r.key = {"t", "main"};
  r.state["a"] = 1;
  engine.update(r);
}

TEST(Sqlite, CreatesTheDatabaseWithWalAndTheCurrentSchema) {
  TempDir dir;
  { auto store = ds::open_sqlite_store(options_in(dir)); }
  auto db = dir.path() / "nested" / "dir" / "shadows.db";
  EXPECT_EQ(scalar(db, "PRAGMA journal_mode"), "wal");
  EXPECT_EQ(scalar(db, "PRAGMA user_version"), std::to_string(ds::kSqliteSchemaVersion));
}

// try_read never waits for a reader: with the only one busy it does not answer.
TEST(Sqlite, TryReadDoesNotWaitForABusyReader) {
  TempDir dir;
  ds::SqliteOptions o = options_in(dir);
  o.readers = 1;
  auto store = ds::open_sqlite_store(o);
  const std::vector<ds::ShadowKey> many(20000, ds::ShadowKey{"t", "main"});
  std::atomic<bool> stop{false};
  std::thread reader([&] {
    while (!stop) store->read(many);  // holds the reader nearly all the time
  });
  bool declined = false;
  for (auto until = std::chrono::steady_clock::now() + std::chrono::seconds(30); !declined && std::chrono::steady_clock::now() < until;) {
    declined = !store->try_read({"t", "main"});
  }
  stop = true;
  reader.join();
  EXPECT_TRUE(declined);
  EXPECT_TRUE(store->try_read({"t", "main"}));  // idle again
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
  store_one_shadow(dir);
  scalar(db, "ALTER TABLE sections DROP COLUMN times");
  scalar(db, "DROP TABLE registrations");
  scalar(db, "DROP TABLE feed");
  scalar(db, "DROP TABLE feed_trimmed");
  scalar(db, "DROP TABLE dead_letters");
  scalar(db, "PRAGMA user_version = 1");
  auto store = ds::open_sqlite_store(options_in(dir));
  EXPECT_EQ(scalar(db, "PRAGMA user_version"), std::to_string(ds::kSqliteSchemaVersion));
  store->put_registration({"r1", "{}", 1});
  EXPECT_EQ(store->list_registrations().size(), 1u);
  EXPECT_EQ(store->read({"t", "main"}).reported.state_json, R"({"a":1})");
}

// A version 3 feed (seq by AUTOINCREMENT) keeps its entries and its seqs: the next entry is
// numbered after the largest seq ever used, whether entries are left or all were trimmed.
TEST(Sqlite, MigratesAVersion3FeedWithoutReusingSeqs) {
  for (const bool entries_left : {true, false}) {
    TempDir dir;
    auto db = dir.path() / "nested" / "dir" / "shadows.db";
    { auto store = ds::open_sqlite_store(options_in(dir)); }
    scalar(db, "DROP TABLE feed");
    scalar(db, "DROP TABLE feed_trimmed");
    scalar(db, "CREATE TABLE feed(seq INTEGER PRIMARY KEY AUTOINCREMENT, thing TEXT NOT NULL, name TEXT NOT NULL, "
               "entry TEXT NOT NULL)");
    for (const char* insert : {R"(INSERT INTO feed VALUES (10, 't', 'main', '{"n":10}'))",
                               R"(INSERT INTO feed VALUES (11, 't', 'main', '{"n":11}'))",
                               R"(INSERT INTO feed VALUES (12, 'u', 'aux', '{"n":12}'))"}) {
      scalar(db, insert);
    }
    scalar(db, entries_left ? "DELETE FROM feed WHERE seq <= 10" : "DELETE FROM feed");
    dead_letters_before_version_5(db);
    scalar(db, "PRAGMA user_version = 3");

    auto store = ds::open_sqlite_store(options_in(dir));
    EXPECT_EQ(scalar(db, "PRAGMA user_version"), std::to_string(ds::kSqliteSchemaVersion));
    EXPECT_EQ(store->feed_end(), 12u);
    std::vector<ds::FeedEntry> kept = store->read_feed(0, 10);
    if (entries_left) {
      EXPECT_EQ(kept, (std::vector<ds::FeedEntry>{{11, {"t", "main"}, R"({"n":11})"}, {12, {"u", "aux"}, R"({"n":12})"}}));
    } else {
      EXPECT_TRUE(kept.empty());
    }
    ds::ShadowWrite w;
    w.key = {"v", "main"};
    ds::SectionRecord r;
    r.version = 1;
    r.state_json = "{}";
    w.sections.push_back({ds::Section::reported, 0, r, false});
    w.feed = R"({"n":13})";
    store->write(w);
    EXPECT_EQ(store->read_feed(12, 10), (std::vector<ds::FeedEntry>{{13, {"v", "main"}, R"({"n":13})"}}));
    EXPECT_EQ(scalar(db, "PRAGMA integrity_check"), "ok");
  }
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
  scalar(db, "DROP TABLE feed_trimmed");
  dead_letters_before_version_5(db);
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

// A version 6 database (before images) gains the table of images; its history stays, and
// images are stored and found from then on.
TEST(Sqlite, MigratesVersion6ToKeepImages) {
  TempDir dir;
  auto db = dir.path() / "nested" / "dir" / "shadows.db";
  ds::ShadowWrite w;
  w.key = {"t", "main"};
  ds::SectionRecord r;
  r.version = 1;
  r.write_id = "w1";
  w.sections.push_back({ds::Section::reported, 0, r, false});
  w.event = ds::HistoryEvent{"00000000000000000010#R1", 10, INT64_MAX, "{}"};
  {
    auto store = ds::open_sqlite_store(options_in(dir));
    store->write(w);
  }
  scalar(db, "DROP TABLE images");
  scalar(db, "PRAGMA user_version = 6");
  auto store = ds::open_sqlite_store(options_in(dir));
  EXPECT_EQ(scalar(db, "PRAGMA user_version"), std::to_string(ds::kSqliteSchemaVersion));
  EXPECT_EQ(store->history(w.key, {}).size(), 1u);
  w.sections[0] = {ds::Section::reported, 1, r, true};
  w.sections[0].record.version = 2;
  w.event = ds::HistoryEvent{"00000000000000000020#R2", 20, INT64_MAX, "{}"};
  w.image = ds::StateImage{w.event->id, INT64_MAX, "{}"};
  store->write(w);
  EXPECT_EQ(store->image_before(w.key, "00000000000000000030#R3")->event_id, w.event->id);
  EXPECT_FALSE(store->image_before(w.key, "00000000000000000010#R1").has_value());
}

// A version 7 database (before declared indexes) gains the field list and the entries table;
// its shadows stay, and index entries are written with shadows from then on.
TEST(Sqlite, MigratesVersion7ToKeepDeclaredIndexes) {
  TempDir dir;
  auto db = dir.path() / "nested" / "dir" / "shadows.db";
  ds::ShadowWrite w;
  w.key = {"t", "main"};
  ds::SectionRecord r;
  r.version = 1;
  r.write_id = "w1";
  r.state_json = R"({"fw":"1.2"})";
  w.sections.push_back({ds::Section::reported, 0, r, false});
  {
    auto store = ds::open_sqlite_store(options_in(dir));
    store->write(w);
  }
  scalar(db, "DROP TABLE shadow_index");
  scalar(db, "DROP TABLE index_fields");
  scalar(db, "PRAGMA user_version = 7");
  auto store = ds::open_sqlite_store(options_in(dir));
  EXPECT_EQ(scalar(db, "PRAGMA user_version"), std::to_string(ds::kSqliteSchemaVersion));
  EXPECT_EQ(store->read(w.key).reported.state_json, r.state_json);
  EXPECT_TRUE(store->index_fields().fields.empty());
  const std::vector<ds::IndexFieldState> fields{{"reported/fw", false, 0}};
  store->put_index_fields(fields, 0);
  ds::IndexValue fw{ds::IndexValue::Type::string, 0, 0, false, "1.3"};
  w.sections[0] = {ds::Section::reported, 1, r, true};
  w.sections[0].record.version = 2;
  w.index = {{"reported/fw", {}, {fw}}};
  store->write(w);
  EXPECT_EQ(store->index_fields().fields, fields);
  const auto hits = store->index_range("reported/fw", {ds::IndexValue::Type::string, fw, fw}, nullptr, 10);
  ASSERT_EQ(hits.size(), 1u);
  EXPECT_EQ(hits[0].thing, "t");
  EXPECT_EQ(scalar(db, "SELECT count(*) FROM shadow_index"), "1");
}

// Version 10 builds every declared field again, for the entries of shadows lacking it.
TEST(Sqlite, MigratesVersion9ByBuildingTheDeclaredIndexesAgain) {
  TempDir dir;
  auto db = dir.path() / "nested" / "dir" / "shadows.db";
  store_one_shadow(dir);
  {
    auto store = ds::open_sqlite_store(options_in(dir));
    const std::vector<ds::IndexFieldState> fields{{"reported/fw", true, 1}, {"_modified", true, 1}};
    store->put_index_fields(fields, 0);
  }
  scalar(db, "PRAGMA user_version = 9");
  auto store = ds::open_sqlite_store(options_in(dir));
  EXPECT_EQ(scalar(db, "PRAGMA user_version"), std::to_string(ds::kSqliteSchemaVersion));
  const std::vector<ds::IndexFieldState> building{{"reported/fw", false, 0}, {"_modified", false, 0}};
  EXPECT_EQ(store->index_fields().fields, building);
  EXPECT_TRUE(store->read(ds::ShadowKey{"t", "main"}).reported.exists());
}

// Version 9 adds the bulk jobs' tables to a version 8 database, keeping its shadows.
TEST(Sqlite, MigratesVersion8ByAddingTheJobTables) {
  TempDir dir;
  auto db = dir.path() / "nested" / "dir" / "shadows.db";
  store_one_shadow(dir);
  scalar(db, "DROP TABLE jobs");
  scalar(db, "DROP TABLE job_targets");
  scalar(db, "PRAGMA user_version = 8");
  auto store = ds::open_sqlite_store(options_in(dir));
  EXPECT_EQ(scalar(db, "PRAGMA user_version"), std::to_string(ds::kSqliteSchemaVersion));
  EXPECT_TRUE(store->read(ds::ShadowKey{"t", "main"}).reported.exists());
  ds::JobStore& jobs = *store->job_store();
  jobs.create_job({"0000000000000001-00000001", "{}", "{}", true, 1, "", 0}, 10);
  jobs.put_targets("0000000000000001-00000001", 0, std::vector<ds::ShadowKey>{{"t", "main"}});
  EXPECT_EQ(jobs.active_jobs().size(), 1u);
  EXPECT_EQ(jobs.targets("0000000000000001-00000001", 0).size(), 1u);
}

// Dead letters stored before version 5 had no expiry: they expire 14 days (the default
// retention) after they failed, and purge_dead_letters drops them then.
TEST(Sqlite, MigratesVersion4DeadLettersToExpireAfterTheDefaultRetention) {
  TempDir dir;
  auto db = dir.path() / "nested" / "dir" / "shadows.db";
  { auto store = ds::open_sqlite_store(options_in(dir)); }
  dead_letters_before_version_5(db);
  scalar(db, "INSERT INTO dead_letters VALUES ('r', '00000000000000000001#R1', '{}', 3, 'x', 1000)");
  scalar(db, "PRAGMA user_version = 4");
  auto store = ds::open_sqlite_store(options_in(dir));
  EXPECT_EQ(scalar(db, "PRAGMA user_version"), std::to_string(ds::kSqliteSchemaVersion));
  constexpr std::int64_t kFourteenDays = 14LL * 86400 * 1'000'000'000;
  const std::vector<ds::DeadLetter> letters = store->dead_letters("r", "", 10);
  EXPECT_EQ(letters, (std::vector<ds::DeadLetter>{{"r", "00000000000000000001#R1", "{}", 3, "x", 1000, 1000 + kFourteenDays}}));
  EXPECT_EQ(store->purge_dead_letters(1000 + kFourteenDays - 1), 0u);
  EXPECT_EQ(store->purge_dead_letters(1000 + kFourteenDays), 1u);
  EXPECT_EQ(store->count_dead_letters("r"), 0u);
}

// The write-ahead log is copied into the database while the store is open, and stays bounded
// under steady writes from many threads: 8 * checkpoint_pages, plus the transactions committed
// while readers still use the log's end (a few, on a loaded machine).
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
  EXPECT_LE(largest_wal, (8 * 16 + 1024) * kFrame);  // without the writer checkpointing: tens of MB
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
