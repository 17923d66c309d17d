// The SQLite store's one object (not public API): its shadows and the machinery (the writer
// thread and its group commit, the reader pool, the checkpoint thread) in sqlite_store.cpp, its
// delivery state in sqlite_delivery.cpp, its bulk jobs in sqlite_jobs.cpp. All write through the
// one writer connection.
#pragma once

#include "deviceshadow/error.hpp"
#include "deviceshadow/sqlite_store.hpp"
#include "store/feed_listener.hpp"

#include <sqlite3.h>

#include <condition_variable>
#include <cstring>
#include <deque>
#include <exception>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <set>
#include <span>
#include <type_traits>

namespace deviceshadow {
namespace sqlite {

[[noreturn]] inline void fail(sqlite3* db, int rc, std::string_view what) {
  std::string message = "sqlite: " + std::string(what) + ": " + (db ? sqlite3_errmsg(db) : sqlite3_errstr(rc));
  int primary = rc & 0xFF;
  // The system's reason, when a system call failed: "disk I/O error" says nothing of which.
  if (const int system = db ? sqlite3_system_errno(db) : 0;
      system != 0 && (primary == SQLITE_IOERR || primary == SQLITE_CANTOPEN || primary == SQLITE_FULL)) {
    message += " (";
    message += std::strerror(system);
    message += ')';
  }
  // Busy, locked, full disk and I/O errors are conditions of the machine: retryable.
  bool retryable = primary == SQLITE_BUSY || primary == SQLITE_LOCKED || primary == SQLITE_FULL ||
                   primary == SQLITE_IOERR || primary == SQLITE_CANTOPEN || primary == SQLITE_READONLY;
  throw Error(retryable ? ErrorCode::unavailable : ErrorCode::internal, std::move(message));
}

// A prepared statement; reset after each use by Query's destructor.
class Statement {
 public:
  Statement(sqlite3* db, const char* sql) : db_(db) {
    int rc = sqlite3_prepare_v3(db, sql, -1, SQLITE_PREPARE_PERSISTENT, &stmt_, nullptr);
    if (rc != SQLITE_OK) fail(db, rc, "prepare");
  }
  ~Statement() { sqlite3_finalize(stmt_); }
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;

  sqlite3* db() const { return db_; }
  sqlite3_stmt* get() const { return stmt_; }

 private:
  sqlite3* db_;
  sqlite3_stmt* stmt_ = nullptr;
};

// One execution of a Statement: bind, step, read columns.
class Query {
 public:
  explicit Query(Statement& s) : s_(s) {}
  ~Query() {
    sqlite3_reset(s_.get());
    sqlite3_clear_bindings(s_.get());
  }
  Query& bind(int i, std::string_view v) {
    check(sqlite3_bind_text(s_.get(), i, v.data(), static_cast<int>(v.size()), SQLITE_STATIC));
    return *this;
  }
  Query& bind(int i, std::int64_t v) {
    check(sqlite3_bind_int64(s_.get(), i, v));
    return *this;
  }
  Query& bind(int i, double v) {
    check(sqlite3_bind_double(s_.get(), i, v));
    return *this;
  }
  // True while there is a row.
  bool step() {
    int rc = sqlite3_step(s_.get());
    if (rc == SQLITE_ROW) return true;
    if (rc == SQLITE_DONE) return false;
    fail(s_.db(), rc, "step");
  }
  void run() {
    while (step()) {
    }
  }
  std::int64_t integer(int col) const { return sqlite3_column_int64(s_.get(), col); }
  double real(int col) const { return sqlite3_column_double(s_.get(), col); }
  int type(int col) const { return sqlite3_column_type(s_.get(), col); }
  std::string text(int col) const {
    const auto* p = reinterpret_cast<const char*>(sqlite3_column_text(s_.get(), col));
    return p ? std::string(p, static_cast<std::size_t>(sqlite3_column_bytes(s_.get(), col))) : std::string();
  }

 private:
  void check(int rc) {
    if (rc != SQLITE_OK) fail(s_.db(), rc, "bind");
  }
  Statement& s_;
};

// A connection with its prepared statements, cached by SQL text address.
class Connection {
 public:
  Connection(const std::string& path, bool durable) {
    int rc = sqlite3_open_v2(path.c_str(), &db_, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, nullptr);
    if (rc != SQLITE_OK) {
      std::string what = "open " + path;
      sqlite3_close(db_);
      db_ = nullptr;
      fail(nullptr, rc, what);
    }
    sqlite3_busy_timeout(db_, 10000);
    exec("PRAGMA journal_mode=WAL");
    exec(durable ? "PRAGMA synchronous=FULL" : "PRAGMA synchronous=NORMAL");
    exec("PRAGMA foreign_keys=OFF");
  }
  ~Connection() {
    statements_.clear();
    sqlite3_close(db_);
  }
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  void exec(const char* sql) {
    int rc = sqlite3_exec(db_, sql, nullptr, nullptr, nullptr);
    if (rc != SQLITE_OK) fail(db_, rc, sql);
  }
  // Runs a statement that returns no rows, prepared once: for what every write repeats
  // (transaction control), which exec() would parse each time.
  void run(const char* sql) { Query(statement(sql)).run(); }
  Statement& statement(const char* sql) {
    auto it = statements_.find(sql);
    if (it == statements_.end()) it = statements_.emplace(sql, std::make_unique<Statement>(db_, sql)).first;
    return *it->second;
  }
  sqlite3* db() const { return db_; }

 private:
  sqlite3* db_ = nullptr;
  std::map<const char*, std::unique_ptr<Statement>> statements_;
};

// Both sections of a shadow as stored (sqlite_store.cpp).
ShadowRecord read_record(Connection& c, const ShadowKey& key);

// Removes and adds the shadow's entries as `updates` say (sqlite_index.cpp); inside the
// caller's transaction.
void apply_index_updates(Connection& c, const ShadowKey& key, std::span<const IndexUpdate> updates);

}  // namespace sqlite

class SqliteStore final : public StoreBackend, public JobStore {
 public:
  explicit SqliteStore(const SqliteOptions& options);
  ~SqliteStore() override;

  // Store
  std::vector<ShadowRecord> read(std::span<const ShadowKey> keys) override;
  std::optional<ShadowRecord> try_read(const ShadowKey& key) override;  // with an idle reader
  void write(const ShadowWrite& write) override;
  std::vector<ShadowSummary> list_shadows(std::string_view thing, std::string_view after_name,
                                          std::size_t limit) override;
  std::vector<std::string> list_things(std::string_view prefix, std::string_view after_thing,
                                       std::size_t limit) override;
  std::vector<ShadowKey> list_shadow_keys(const ShadowKey* after, std::size_t limit) override;
  std::vector<HistoryEvent> history(const ShadowKey& key, const HistoryQuery& query) override;
  std::vector<ShadowHistoryEvent> history_since(std::int64_t since_ns, const ShadowHistoryEvent* after,
                                                std::size_t limit) override;
  std::size_t purge(std::int64_t now_ns) override;
  void append_history(std::span<const ShadowHistoryEvent> events) override;
  std::optional<StateImage> image_before(const ShadowKey& key, std::string_view event_id) override;
  std::optional<std::string> unready() override;
  IndexDeclaration index_fields() override;
  std::uint64_t put_index_fields(std::span<const IndexFieldState> fields, std::uint64_t generation) override;
  std::vector<ShadowKey> put_index_entries(std::span<const IndexedShadow> shadows) override;
  std::vector<IndexHit> index_range(std::string_view field, const IndexRange& range, const IndexHit* after,
                                    std::size_t limit) override;
  std::uint64_t index_count(std::string_view field, const IndexRange& range, std::uint64_t cap) override;

  // DeliveryStore
  bool claim(std::string_view id, std::string_view owner, std::int64_t now_ns, std::int64_t expires_ns) override;
  std::size_t purge_dead_letters(std::int64_t now_ns) override;
  void put_registration(const RegistrationRecord& r) override;
  std::vector<RegistrationRecord> list_registrations() override;
  bool remove_registration(std::string_view id) override;
  std::optional<std::uint64_t> checkpoint(std::string_view registration) override;
  void put_checkpoint(std::string_view registration, std::uint64_t seq) override;
  void put_dead_letters(std::span<const DeadLetter> letters) override;
  std::vector<DeadLetter> dead_letters(std::string_view registration, std::string_view after, std::size_t limit) override;
  std::uint64_t count_dead_letters(std::string_view registration) override;
  std::size_t remove_dead_letters(std::string_view registration,
                                  std::optional<std::span<const std::string>> event_ids) override;
  std::vector<FeedEntry> read_feed(std::uint64_t after, std::size_t limit) override;
  void trim_feed(std::uint64_t up_to) override;
  std::uint64_t feed_end() override;
  void set_feed_listener(std::function<void()> listener) override { feed_listener_.set(std::move(listener)); }

  // JobStore (sqlite_jobs.cpp)
  JobStore* job_store() noexcept override { return this; }
  void create_job(const JobRecord& job, std::size_t max_active) override;
  bool update_job(const JobRecord& job, std::uint64_t expected_revision) override;
  std::optional<JobRecord> job(std::string_view id) override;
  std::vector<JobRecord> jobs(std::string_view before, std::size_t limit) override;
  std::vector<JobRecord> active_jobs() override;
  void remove_job(std::string_view id) override;
  void put_targets(std::string_view job, std::uint64_t page, std::span<const ShadowKey> targets) override;
  std::vector<ShadowKey> targets(std::string_view job, std::uint64_t page) override;
  void remove_targets(std::string_view job) override;
  void remove_orphan_targets(std::string_view before) override;

 private:
  using Connection = sqlite::Connection;

  // A unit of work for the writer thread; `error` is set if it failed. Its caller sleeps until the
  // writer marks it done (a mutex and condition variable rather than std::binary_semaphore,
  // whose wait yields the CPU several times before it sleeps: four sched_yield calls a write).
  struct Job {
    std::function<void(Connection&)> run;
    std::exception_ptr error;
    std::mutex mutex;
    std::condition_variable cv;
    bool done = false;  // guarded by mutex; set by the writer once `error` is final
  };

  static void migrate(Connection& c);
  // Runs `work` on the writer thread, in a savepoint of the group it commits with.
  void run_on_writer(std::function<void(Connection&)> work);
  void writer_loop();
  void commit_group(const std::vector<Job*>& group);
  static int on_commit(void* self, sqlite3* db, const char*, int pages);
  void checkpoint_loop();
  void stop_checkpointer();  // ends the checkpoint thread and joins it

  // A reader connection taken from the idle ones, given back when the lease ends; empty when
  // `wait` is false and none is idle.
  struct ReaderLease {
    ReaderLease(SqliteStore& store, bool wait);
    ~ReaderLease();
    ReaderLease(const ReaderLease&) = delete;
    ReaderLease& operator=(const ReaderLease&) = delete;
    SqliteStore& store;
    std::unique_ptr<Connection> connection;
  };
  template <class F>
  std::invoke_result_t<F&, Connection&> with_reader(F&& f) {
    ReaderLease lease(*this, true);
    return f(*lease.connection);
  }

  SqliteOptions options_;
  std::unique_ptr<Connection> writer_;  // used by the writer thread only (and at open)
  std::thread writer_thread_;
  std::mutex queue_mutex_;
  std::condition_variable queue_cv_;
  std::deque<Job*> queue_;
  bool stopping_ = false;
  bool appended_ = false;  // writer thread: the group being committed appended feed entries
  FeedListener feed_listener_;

  std::mutex readers_mutex_;
  std::condition_variable readers_cv_;
  std::vector<std::unique_ptr<Connection>> idle_readers_;
  std::size_t readers_awaited_ = 0;  // callers waiting for an idle reader, whom try_read leaves it to

  std::unique_ptr<Connection> checkpointer_;  // used by the checkpoint thread only
  std::thread checkpoint_thread_;
  std::mutex checkpoint_mutex_;
  std::condition_variable checkpoint_cv_;
  bool checkpoint_wanted_ = false;
  bool checkpoint_stopping_ = false;
  int checkpoint_asked_at_ = 0;  // log pages when the checkpoint thread was last asked (writer thread only)
};

}  // namespace deviceshadow
