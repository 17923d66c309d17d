// The SQLite store's shadows (Store), its schema and its machinery: the writer thread with its
// group commit, the reader pool and the checkpoint thread (sqlite.hpp). Its delivery state is
// in sqlite_delivery.cpp.
#include "store/sqlite.hpp"

#include "store/conditions.hpp"

#include <filesystem>
#include <utility>

namespace deviceshadow {
namespace {

using sqlite::fail;
using sqlite::Query;
using sqlite::read_record;
using Connection = sqlite::Connection;

constexpr const char* kSchemaV1 = R"sql(
CREATE TABLE sections(
  thing TEXT NOT NULL, name TEXT NOT NULL, section INTEGER NOT NULL,
  version INTEGER NOT NULL, deleted INTEGER NOT NULL, timestamp INTEGER NOT NULL,
  client_token TEXT NOT NULL, tz TEXT NOT NULL, state TEXT NOT NULL,
  write_id TEXT NOT NULL, expires INTEGER NOT NULL,
  PRIMARY KEY (thing, name, section)) WITHOUT ROWID;
CREATE INDEX sections_tombstones ON sections(expires) WHERE deleted = 1;
CREATE TABLE history(
  thing TEXT NOT NULL, name TEXT NOT NULL, id TEXT NOT NULL, timestamp INTEGER NOT NULL,
  expires INTEGER NOT NULL, event TEXT NOT NULL,
  PRIMARY KEY (thing, name, id)) WITHOUT ROWID;
CREATE INDEX history_expiry ON history(expires);
PRAGMA user_version = 1;
)sql";

// Version 2: notifications -- registrations, the change feed's outbox, delivery state.
constexpr const char* kSchemaV2 = R"sql(
CREATE TABLE registrations(
  id TEXT NOT NULL PRIMARY KEY, document TEXT NOT NULL, updated INTEGER NOT NULL,
  checkpoint INTEGER) WITHOUT ROWID;
CREATE TABLE feed(
  seq INTEGER PRIMARY KEY AUTOINCREMENT, thing TEXT NOT NULL, name TEXT NOT NULL, entry TEXT NOT NULL);
CREATE TABLE dead_letters(
  registration TEXT NOT NULL, event_id TEXT NOT NULL, event TEXT NOT NULL, attempts INTEGER NOT NULL,
  last_error TEXT NOT NULL, failed INTEGER NOT NULL,
  PRIMARY KEY (registration, event_id)) WITHOUT ROWID;
PRAGMA user_version = 2;
)sql";

// Version 3: per-leaf change times of each section ('' for rows written before: every leaf at
// the section's timestamp).
constexpr const char* kSchemaV3 = R"sql(
ALTER TABLE sections ADD COLUMN times TEXT NOT NULL DEFAULT '';
PRAGMA user_version = 3;
)sql";

// Version 4: the feed numbers its entries itself instead of by AUTOINCREMENT, which rewrote a
// page of sqlite_sequence in every transaction that appended. feed_trimmed keeps the largest seq
// trimmed, so that seqs are never reused once the table is empty.
constexpr const char* kSchemaV4 = R"sql(
CREATE TABLE feed_trimmed(seq INTEGER NOT NULL);
INSERT INTO feed_trimmed SELECT coalesce((SELECT seq FROM sqlite_sequence WHERE name = 'feed'), 0);
CREATE TABLE feed_v4(seq INTEGER PRIMARY KEY, thing TEXT NOT NULL, name TEXT NOT NULL, entry TEXT NOT NULL);
INSERT INTO feed_v4 SELECT seq, thing, name, entry FROM feed;
DROP TABLE feed;
ALTER TABLE feed_v4 RENAME TO feed;
PRAGMA user_version = 4;
)sql";

// Version 5: dead letters expire (--dead-letter-retention). Those stored before expire 14 days
// (the default retention) after they failed.
constexpr const char* kSchemaV5 = R"sql(
ALTER TABLE dead_letters ADD COLUMN expires INTEGER NOT NULL DEFAULT 9223372036854775807;
UPDATE dead_letters SET expires = failed + 1209600000000000 WHERE failed < 9000000000000000000;
CREATE INDEX dead_letters_expiry ON dead_letters(expires);
PRAGMA user_version = 5;
)sql";

// Version 6: history in time order across shadows (live streams resuming at a time).
constexpr const char* kSchemaV6 = R"sql(
CREATE INDEX IF NOT EXISTS history_time ON history(timestamp, thing, name, id);
PRAGMA user_version = 6;
)sql";

// Version 7: images of shadows' states taken with history events every so many events, which
// time travel starts its replay from (StateImage). IF NOT EXISTS: a database whose
// user_version was set back (as the migration tests do) still migrates.
constexpr const char* kSchemaV7 = R"sql(
CREATE TABLE IF NOT EXISTS images(
  thing TEXT NOT NULL, name TEXT NOT NULL, id TEXT NOT NULL, expires INTEGER NOT NULL, image TEXT NOT NULL,
  PRIMARY KEY (thing, name, id)) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS images_expiry ON images(expires);
PRAGMA user_version = 7;
)sql";

// Version 8: declared indexes (docs/queries.md, "Indexes"). shadow_index holds one row per value
// a shadow has for a declared field: `type` is IndexValue::Type, `value` an INTEGER, REAL or
// TEXT SQLite compares as the filter language does within a type (numbers numerically,
// strings bytewise); null is 0. Its key covers every read: a comparison reads one range of it.
// A write deletes and inserts exactly the rows that change (IndexUpdate), by their key.
constexpr const char* kSchemaV8 = R"sql(
CREATE TABLE IF NOT EXISTS index_fields(
  field TEXT NOT NULL PRIMARY KEY, position INTEGER NOT NULL, ready INTEGER NOT NULL, indexed INTEGER NOT NULL
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS shadow_index(
  field TEXT NOT NULL, type INTEGER NOT NULL, value NOT NULL, thing TEXT NOT NULL, name TEXT NOT NULL,
  PRIMARY KEY (field, type, value, thing, name)) WITHOUT ROWID;
PRAGMA user_version = 8;
)sql";

// Version 9: bulk jobs (docs/jobs.md) -- each job's record, and its target list in pages of
// [[thing, name], …] JSON. IF NOT EXISTS, as version 7.
constexpr const char* kSchemaV9 = R"sql(
CREATE TABLE IF NOT EXISTS jobs(
  id TEXT NOT NULL PRIMARY KEY, spec TEXT NOT NULL, progress TEXT NOT NULL, active INTEGER NOT NULL,
  revision INTEGER NOT NULL, owner TEXT NOT NULL, lease_expires INTEGER NOT NULL) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS jobs_active ON jobs(id) WHERE active = 1;
CREATE TABLE IF NOT EXISTS job_targets(
  job TEXT NOT NULL, page INTEGER NOT NULL, targets TEXT NOT NULL,
  PRIMARY KEY (job, page)) WITHOUT ROWID;
PRAGMA user_version = 9;
)sql";

// Version 10: a shadow holding no value of a declared field has an entry of type `absent`
// (IndexValue), which entries built before lack: every declared field is built again (its
// queries read without it meanwhile; the build adds what is missing and keeps the rest).
constexpr const char* kSchemaV10 = R"sql(
UPDATE index_fields SET ready = 0, indexed = 0;
PRAGMA user_version = 10;
)sql";

constexpr const char* kSelectSections =
    "SELECT section, version, deleted, timestamp, client_token, tz, state, write_id, expires, times "
    "FROM sections WHERE thing = ?1 AND name = ?2";
constexpr const char* kUpsertSection =
    "INSERT OR REPLACE INTO sections(thing, name, section, version, deleted, timestamp, client_token, tz, state, "
    "write_id, expires, times) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)";
// Ignored when the shadow has an event of that id (append_history is idempotent; the engine's
// ids never repeat).
constexpr const char* kInsertHistory =
    "INSERT OR IGNORE INTO history(thing, name, id, timestamp, expires, event) VALUES (?1, ?2, ?3, ?4, ?5, ?6)";
constexpr const char* kListShadows =
    "SELECT name, section, version, deleted, timestamp FROM sections WHERE thing = ?1 AND name > ?2 "
    "ORDER BY name, section";
constexpr const char* kListShadowKeys =
    "SELECT thing, name FROM sections WHERE (thing, name) > (?1, ?2) AND deleted = 0 GROUP BY thing, name "
    "ORDER BY thing, name LIMIT ?3";
constexpr const char* kListThings =
    "SELECT thing FROM sections WHERE thing >= ?1 AND thing > ?2 AND deleted = 0 GROUP BY thing ORDER BY thing "
    "LIMIT ?3";
constexpr const char* kListThingsBounded =
    "SELECT thing FROM sections WHERE thing >= ?1 AND thing > ?2 AND thing < ?4 AND deleted = 0 GROUP BY thing "
    "ORDER BY thing LIMIT ?3";
// ?7 and ?8 bound the ids by since and until (an id starts with its time), so that a query
// walks only that range of the key.
constexpr const char* kHistoryAsc =
    "SELECT id, timestamp, expires, event FROM history WHERE thing = ?1 AND name = ?2 AND id > ?3 "
    "AND id BETWEEN ?7 AND ?8 AND timestamp BETWEEN ?4 AND ?5 ORDER BY id ASC LIMIT ?6";
constexpr const char* kHistoryDesc =
    "SELECT id, timestamp, expires, event FROM history WHERE thing = ?1 AND name = ?2 AND id < ?3 "
    "AND id BETWEEN ?7 AND ?8 AND timestamp BETWEEN ?4 AND ?5 ORDER BY id DESC LIMIT ?6";
constexpr const char* kHistorySince =
    "SELECT thing, name, id, timestamp, expires, event FROM history WHERE timestamp >= ?1 "
    "AND (timestamp, thing, name, id) > (?2, ?3, ?4, ?5) ORDER BY timestamp, thing, name, id LIMIT ?6";
constexpr const char* kPurgeTombstones = "DELETE FROM sections WHERE deleted = 1 AND expires <= ?1";
constexpr const char* kPurgeHistory = "DELETE FROM history WHERE expires <= ?1";
constexpr const char* kInsertImage = "INSERT OR REPLACE INTO images(thing, name, id, expires, image) VALUES (?1, ?2, ?3, ?4, ?5)";
constexpr const char* kImageBefore =
    "SELECT id, expires, image FROM images WHERE thing = ?1 AND name = ?2 AND id <= ?3 ORDER BY id DESC LIMIT 1";
constexpr const char* kPurgeImages = "DELETE FROM images WHERE expires <= ?1";
// The seq is kFeedEnd's + 1 (the same subquery; kFeedEnd is in sqlite_delivery.cpp). VALUES,
// not INSERT ... SELECT: a SELECT that reads the table it inserts into is first copied to a
// temporary table.
constexpr const char* kAppendFeed =
    "INSERT INTO feed(seq, thing, name, entry) VALUES "
    "((SELECT max(coalesce((SELECT max(seq) FROM feed), 0), feed_trimmed.seq) FROM feed_trimmed) + 1, ?1, ?2, ?3)";

}  // namespace

ShadowRecord sqlite::read_record(Connection& c, const ShadowKey& key) {
  ShadowRecord record;
  Query q(c.statement(kSelectSections));
  q.bind(1, key.thing).bind(2, key.name);
  while (q.step()) {
    SectionRecord& s = record.section(q.integer(0) == 0 ? Section::reported : Section::desired);
    s.version = static_cast<std::uint64_t>(q.integer(1));
    s.deleted = q.integer(2) != 0;
    s.timestamp_ns = q.integer(3);
    s.client_token = q.text(4);
    s.tz = q.text(5);
    s.state_json = q.text(6);
    s.write_id = q.text(7);
    s.expires_ns = q.integer(8);
    s.times_json = q.text(9);
  }
  return record;
}

namespace {

void insert_history(Connection& c, const ShadowKey& key, const HistoryEvent& e) {
  Query q(c.statement(kInsertHistory));
  q.bind(1, key.thing).bind(2, key.name).bind(3, e.id).bind(4, e.timestamp_ns).bind(5, e.expires_ns).bind(6, e.json);
  q.run();
}

void apply_write(Connection& c, const ShadowWrite& write) {
  check_conditions(read_record(c, write.key), write);
  for (const SectionPut& put : write.sections) {
    const SectionRecord& r = put.record;
    Query q(c.statement(kUpsertSection));
    q.bind(1, write.key.thing).bind(2, write.key.name).bind(3, std::int64_t{put.section == Section::reported ? 0 : 1});
    q.bind(4, static_cast<std::int64_t>(r.version)).bind(5, std::int64_t{r.deleted}).bind(6, r.timestamp_ns);
    q.bind(7, r.client_token).bind(8, r.tz).bind(9, r.state_json).bind(10, r.write_id).bind(11, r.expires_ns);
    q.bind(12, r.times_json);
    q.run();
  }
  if (write.event) insert_history(c, write.key, *write.event);
  if (const std::optional<StateImage>& i = write.image) {
    Query(c.statement(kInsertImage)).bind(1, write.key.thing).bind(2, write.key.name).bind(3, i->event_id)
        .bind(4, i->expires_ns).bind(5, i->json).run();
  }
  sqlite::apply_index_updates(c, write.key, write.index);
  if (write.feed) Query(c.statement(kAppendFeed)).bind(1, write.key.thing).bind(2, write.key.name).bind(3, *write.feed).run();
}

// The smallest string greater than every string with this prefix ("" if there is none).
std::string prefix_successor(std::string prefix) {
  while (!prefix.empty() && static_cast<unsigned char>(prefix.back()) == 0xFF) prefix.pop_back();
  if (!prefix.empty()) prefix.back() = static_cast<char>(static_cast<unsigned char>(prefix.back()) + 1);
  return prefix;
}

}  // namespace

SqliteStore::SqliteStore(const SqliteOptions& options) : options_(options) {
  std::filesystem::path parent = std::filesystem::path(options.path).parent_path();
  std::error_code ec;
  if (!parent.empty()) std::filesystem::create_directories(parent, ec);
  writer_ = std::make_unique<Connection>(options.path, options.durable);
  migrate(*writer_);
  for (std::size_t i = 0; i < std::max<std::size_t>(1, options.readers); ++i) {
    idle_readers_.push_back(std::make_unique<Connection>(options.path, options.durable));
  }
  checkpointer_ = std::make_unique<Connection>(options.path, options.durable);
  sqlite3_wal_hook(writer_->db(), &SqliteStore::on_commit, this);  // replaces the automatic checkpoint
  checkpoint_thread_ = std::thread([this] { checkpoint_loop(); });
  try {
    writer_thread_ = std::thread([this] { writer_loop(); });
  } catch (...) {  // no thread to be had: the checkpointer's must end before its members go
    stop_checkpointer();
    throw;
  }
}

SqliteStore::~SqliteStore() {
  {
    std::lock_guard lock(queue_mutex_);
    stopping_ = true;
  }
  queue_cv_.notify_all();
  writer_thread_.join();
  stop_checkpointer();
}

void SqliteStore::stop_checkpointer() {
  {
    std::lock_guard lock(checkpoint_mutex_);
    checkpoint_stopping_ = true;
  }
  checkpoint_cv_.notify_all();
  checkpoint_thread_.join();
}

std::vector<ShadowRecord> SqliteStore::read(std::span<const ShadowKey> keys) {
  return with_reader([&](Connection& c) {
    std::vector<ShadowRecord> out;
    out.reserve(keys.size());
    for (const ShadowKey& key : keys) out.push_back(read_record(c, key));
    return out;
  });
}

SqliteStore::ReaderLease::ReaderLease(SqliteStore& store, bool wait) : store(store) {
  std::unique_lock lock(store.readers_mutex_);
  if (wait) {
    ++store.readers_awaited_;
    store.readers_cv_.wait(lock, [&] { return !store.idle_readers_.empty(); });
    --store.readers_awaited_;
  }
  // Without waiting, a reader given back goes to those who wait for one, not past them.
  if (store.idle_readers_.empty() || (!wait && store.readers_awaited_ > 0)) return;
  connection = std::move(store.idle_readers_.back());
  store.idle_readers_.pop_back();
}

SqliteStore::ReaderLease::~ReaderLease() {
  if (!connection) return;
  std::lock_guard lock(store.readers_mutex_);
  store.idle_readers_.push_back(std::move(connection));
  store.readers_cv_.notify_one();
}

std::optional<ShadowRecord> SqliteStore::try_read(const ShadowKey& key) {
  ReaderLease lease(*this, false);
  if (!lease.connection) return std::nullopt;
  return read_record(*lease.connection, key);
}

void SqliteStore::write(const ShadowWrite& write) {
  run_on_writer([&](Connection& c) {
    apply_write(c, write);
    appended_ = appended_ || write.feed.has_value();
  });
}

std::vector<ShadowSummary> SqliteStore::list_shadows(std::string_view thing, std::string_view after_name,
                                                     std::size_t limit) {
  return with_reader([&](Connection& c) {
    std::vector<ShadowSummary> out;
    Query q(c.statement(kListShadows));
    q.bind(1, thing).bind(2, after_name);
    std::string name;
    ShadowRecord record;
    auto flush = [&] {
      if (!name.empty() && record.exists()) out.push_back(summarize(name, record));
      record = ShadowRecord{};
    };
    while (out.size() < limit && q.step()) {
      std::string row_name = q.text(0);
      if (row_name != name) {
        flush();
        name = std::move(row_name);
      }
      SectionRecord& s = record.section(q.integer(1) == 0 ? Section::reported : Section::desired);
      s.version = static_cast<std::uint64_t>(q.integer(2));
      s.deleted = q.integer(3) != 0;
      s.timestamp_ns = q.integer(4);
    }
    if (out.size() < limit) flush();
    return out;
  });
}

std::vector<ShadowKey> SqliteStore::list_shadow_keys(const ShadowKey* after, std::size_t limit) {
  return with_reader([&](Connection& c) {
    Query q(c.statement(kListShadowKeys));
    q.bind(1, after ? std::string_view(after->thing) : std::string_view(""))  // not a null pointer: not NULL
        .bind(2, after ? std::string_view(after->name) : std::string_view(""))
        .bind(3, static_cast<std::int64_t>(std::min<std::size_t>(limit, INT64_MAX)));
    std::vector<ShadowKey> out;
    while (q.step()) out.push_back({q.text(0), q.text(1)});
    return out;
  });
}

std::vector<std::string> SqliteStore::list_things(std::string_view prefix, std::string_view after_thing,
                                                  std::size_t limit) {
  return with_reader([&](Connection& c) {
    std::string upper = prefix_successor(std::string(prefix));
    Query q(c.statement(upper.empty() ? kListThings : kListThingsBounded));
    q.bind(1, prefix).bind(2, after_thing).bind(3, static_cast<std::int64_t>(limit));
    if (!upper.empty()) q.bind(4, upper);
    std::vector<std::string> out;
    while (q.step()) out.push_back(q.text(0));
    return out;
  });
}

std::vector<HistoryEvent> SqliteStore::history(const ShadowKey& key, const HistoryQuery& query) {
  return with_reader([&](Connection& c) {
    Query q(c.statement(query.descending ? kHistoryDesc : kHistoryAsc));
    // Ids are ASCII digits, '#', a letter and digits: "\x7f" sorts after all of them.
    std::string after = query.after_id.empty() && query.descending ? std::string("\x7f") : query.after_id;
    q.bind(1, key.thing).bind(2, key.name).bind(3, after).bind(4, query.since_ns).bind(5, query.until_ns);
    q.bind(6, static_cast<std::int64_t>(query.limit));
    const auto [low, high] = history_id_range(query);
    q.bind(7, low).bind(8, high);
    std::vector<HistoryEvent> out;
    for (std::size_t bytes = 0; bytes <= query.max_bytes && q.step();) {
      out.push_back({q.text(0), q.integer(1), q.integer(2), q.text(3)});
      bytes += out.back().json.size();
    }
    return out;
  });
}

std::vector<ShadowHistoryEvent> SqliteStore::history_since(std::int64_t since_ns, const ShadowHistoryEvent* after,
                                                          std::size_t limit) {
  return with_reader([&](Connection& c) {
    Query q(c.statement(kHistorySince));
    q.bind(1, since_ns).bind(2, after ? after->event.timestamp_ns : INT64_MIN);
    const std::string_view none("");  // bound as '' (a default string_view would bind NULL)
    q.bind(3, after ? std::string_view(after->key.thing) : none).bind(4, after ? std::string_view(after->key.name) : none);
    q.bind(5, after ? std::string_view(after->event.id) : none).bind(6, static_cast<std::int64_t>(limit));
    std::vector<ShadowHistoryEvent> out;
    while (q.step()) out.push_back({{q.text(0), q.text(1)}, {q.text(2), q.integer(3), q.integer(4), q.text(5)}});
    return out;
  });
}

std::optional<StateImage> SqliteStore::image_before(const ShadowKey& key, std::string_view event_id) {
  return with_reader([&](Connection& c) -> std::optional<StateImage> {
    Query q(c.statement(kImageBefore));
    q.bind(1, key.thing).bind(2, key.name).bind(3, event_id);
    if (!q.step()) return std::nullopt;
    return StateImage{q.text(0), q.integer(1), q.text(2)};
  });
}

std::size_t SqliteStore::purge(std::int64_t now_ns) {
  std::size_t purged = 0;
  run_on_writer([&](Connection& c) {
    for (const char* sql : {kPurgeTombstones, kPurgeHistory, kPurgeImages}) {
      Query(c.statement(sql)).bind(1, now_ns).run();
      purged += static_cast<std::size_t>(sqlite3_changes(c.db()));
    }
  });
  return purged;
}

void SqliteStore::append_history(std::span<const ShadowHistoryEvent> events) {
  run_on_writer([&](Connection& c) {
    for (const ShadowHistoryEvent& e : events) insert_history(c, e.key, e.event);
  });
}

namespace {

// True when the database's path no longer names the file `c` has open (removed, or replaced by
// another): what a write commits there would be gone at the next start.
bool database_moved(Connection& c) {
  int moved = 0;
  return sqlite3_file_control(c.db(), "main", SQLITE_FCNTL_HAS_MOVED, &moved) == SQLITE_OK && moved != 0;
}

Error moved_error(const std::string& path) {
  return Error(ErrorCode::unavailable, "the database file " + path +
                                           " was removed or replaced while open; restart shadowd");
}

}  // namespace

std::optional<std::string> SqliteStore::unready() {
  try {
    with_reader([&](Connection& c) {
      Query(c.statement("SELECT 1")).step();
      if (database_moved(c)) throw moved_error(options_.path);
    });
  } catch (const Error& e) {
    return std::string("the database cannot be read: ") + e.what();
  }
  // Below this, a write (or the write-ahead log's checkpoint) may fail for lack of space.
  std::error_code ec;
  std::filesystem::space_info space = std::filesystem::space(options_.path, ec);
  if (!ec && space.available < options_.min_free_bytes) {
    return "the database's filesystem has " + std::to_string(space.available) + " bytes free, under the " +
           std::to_string(options_.min_free_bytes) + " it needs";
  }
  return std::nullopt;
}

void SqliteStore::migrate(Connection& c) {
  int version = 0;
  {
    Query q(c.statement("PRAGMA user_version"));
    if (q.step()) version = static_cast<int>(q.integer(0));
  }
  if (version > kSqliteSchemaVersion) {
    throw Error(ErrorCode::unavailable, "sqlite: the database schema version " + std::to_string(version) +
                                            " is newer than this build supports (" +
                                            std::to_string(kSqliteSchemaVersion) + ")");
  }
  // Each step runs in its own transaction, so an interrupted migration resumes where it stopped.
  for (auto [from, sql] : {std::pair{0, kSchemaV1}, std::pair{1, kSchemaV2}, std::pair{2, kSchemaV3},
                           std::pair{3, kSchemaV4}, std::pair{4, kSchemaV5},
                           std::pair{5, kSchemaV6}, std::pair{6, kSchemaV7}, std::pair{7, kSchemaV8},
                           std::pair{8, kSchemaV9}, std::pair{9, kSchemaV10}}) {
    if (version > from) continue;
    c.exec("BEGIN IMMEDIATE");
    c.exec(sql);
    c.exec("COMMIT");
    version = from + 1;
  }
}

void SqliteStore::run_on_writer(std::function<void(Connection&)> work) {
  Job job{std::move(work)};
  {
    std::lock_guard lock(queue_mutex_);
    queue_.push_back(&job);
  }
  queue_cv_.notify_one();
  {
    std::unique_lock lock(job.mutex);
    job.cv.wait(lock, [&] { return job.done; });
  }
  if (job.error) std::rethrow_exception(job.error);
}

void SqliteStore::writer_loop() {
  std::vector<Job*> group;
  for (;;) {
    {
      std::unique_lock lock(queue_mutex_);
      queue_cv_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping, nothing left
      std::size_t n = options_.group_commit ? std::min(queue_.size(), options_.max_group) : 1;
      group.assign(queue_.begin(), queue_.begin() + static_cast<std::ptrdiff_t>(n));
      queue_.erase(queue_.begin(), queue_.begin() + static_cast<std::ptrdiff_t>(n));
    }
    commit_group(group);
    if (std::exchange(appended_, false)) feed_listener_.call();
    // Wakes exactly the group's callers. A job lives on its caller's stack, and its caller
    // returns once it holds the job's mutex and sees `done`: notifying before the unlock keeps
    // the condition variable alive, and the unlock is the writer's last use of the job (the
    // wake-up that may follow passes on the mutex's address only).
    for (Job* job : group) {
      std::lock_guard lock(job->mutex);
      job->done = true;
      job->cv.notify_one();
    }
  }
}

// Runs each job in its own savepoint inside one transaction; a failed job rolls back only
// itself. If the commit fails, every job of the group fails.
namespace {

// Undoes the job that failed inside a group's transaction. False when the transaction is gone:
// SQLite may roll it back whole after SQLITE_FULL, IOERR, NOMEM or BUSY, and it is rolled back
// here when undoing the job fails.
bool undo_job(Connection& c) {
  if (sqlite3_get_autocommit(c.db())) return false;
  try {
    c.run("ROLLBACK TO job");
    c.run("RELEASE job");
    return true;
  } catch (...) {
    sqlite3_exec(c.db(), "ROLLBACK", nullptr, nullptr, nullptr);
    return false;
  }
}

}  // namespace

void SqliteStore::commit_group(const std::vector<Job*>& group) {
  Connection& c = *writer_;
  try {
    c.run("BEGIN IMMEDIATE");
  } catch (...) {
    for (Job* job : group) job->error = std::current_exception();
    return;
  }
  for (Job* job : group) {
    try {
      c.run("SAVEPOINT job");
      job->run(c);
      c.run("RELEASE job");
    } catch (...) {
      job->error = std::current_exception();
      if (!undo_job(c)) {  // the group's transaction is gone, and with it every write of the group
        for (Job* other : group) {
          if (!other->error) other->error = job->error;
        }
        return;
      }
    }
  }
  sqlite::Statement& commit = c.statement("COMMIT");
  std::exception_ptr error;
  if (database_moved(c)) {  // a stat: a commit there would be lost, so none is acknowledged
    error = std::make_exception_ptr(moved_error(options_.path));
  } else if (const int rc = sqlite3_step(commit.get()); rc != SQLITE_DONE) {
    try {
      fail(c.db(), rc, "commit");
    } catch (...) {
      error = std::current_exception();
    }
  }
  sqlite3_reset(commit.get());
  if (error) {
    sqlite3_exec(c.db(), "ROLLBACK", nullptr, nullptr, nullptr);
    for (Job* job : group) job->error = error;
  }
}

// Called on the writer's connection after each commit, with the pages in the write-ahead log.
// The checkpoint thread is asked at every checkpoint_pages the log grows. Under steady writes
// its passive checkpoints never catch the log's end, so the log does not start over until the
// writer checkpoints itself at 8 times checkpoint_pages; by then it has few pages left to copy.
int SqliteStore::on_commit(void* self, sqlite3* db, const char*, int pages) {
  auto& store = *static_cast<SqliteStore*>(self);
  const int every = store.options_.checkpoint_pages;
  if (pages < store.checkpoint_asked_at_) store.checkpoint_asked_at_ = 0;  // the log started over
  if (pages >= 8 * every) {
    sqlite3_wal_checkpoint_v2(db, nullptr, SQLITE_CHECKPOINT_PASSIVE, nullptr, nullptr);
    store.checkpoint_asked_at_ = 0;
  } else if (pages >= store.checkpoint_asked_at_ + every) {
    store.checkpoint_asked_at_ = pages;
    {
      std::lock_guard lock(store.checkpoint_mutex_);
      store.checkpoint_wanted_ = true;
    }
    store.checkpoint_cv_.notify_one();
  }
  return SQLITE_OK;
}

// Copies the log into the database when asked. A passive checkpoint waits for no one; once it
// has copied the whole log, the next write starts the log over from its beginning. Failures
// (a checkpoint already running, a full disk) leave the pages in the log for the next one.
void SqliteStore::checkpoint_loop() {
  std::unique_lock lock(checkpoint_mutex_);
  for (;;) {
    checkpoint_cv_.wait(lock, [&] { return checkpoint_stopping_ || checkpoint_wanted_; });
    if (checkpoint_stopping_) return;
    checkpoint_wanted_ = false;
    lock.unlock();
    sqlite3_wal_checkpoint_v2(checkpointer_->db(), nullptr, SQLITE_CHECKPOINT_PASSIVE, nullptr, nullptr);
    lock.lock();
  }
}

std::unique_ptr<StoreBackend> open_sqlite_store(const SqliteOptions& options) {
  return std::make_unique<SqliteStore>(options);
}

}  // namespace deviceshadow
