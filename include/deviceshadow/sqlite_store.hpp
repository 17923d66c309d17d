// The embedded default store (Store, DeliveryStore and JobStore): one SQLite database file in WAL mode.
//
// Writes go through a single writer thread that commits whatever writes are queued together
// in one transaction (group commit), each in its own savepoint, so a failed condition rolls
// back only its own write and one fsync covers the whole group. Reads use a pool of reader
// connections and never wait for the writer. The schema is versioned (PRAGMA user_version)
// and migrated at open.
#pragma once

#include "deviceshadow/store_backend.hpp"

#include <cstdint>
#include <memory>
#include <string>

namespace deviceshadow {

struct SqliteOptions {
  std::string path = "./shadowd-data/shadows.db";  // parent directories are created
  bool durable = true;           // synchronous=FULL (fsync at every commit); false: NORMAL
  bool group_commit = true;      // false: one transaction per write (a benchmark baseline)
  std::size_t max_group = 512;   // writes per transaction at most
  std::size_t readers = 4;       // reader connections
  // Once the write-ahead log holds this many pages, a thread of its own copies them into the
  // database (a passive checkpoint), so writes do not wait for it. Only if the log reaches 8
  // times this (that thread cannot keep up) does the writer checkpoint before it goes on.
  int checkpoint_pages = 1000;
  // Readiness fails while the database's filesystem has less space free: a write needs room
  // for its pages in the write-ahead log, and the log's checkpoint room in the database.
  std::uintmax_t min_free_bytes = std::uintmax_t{64} << 20;
};

// Opens (creating or migrating) the database. Throws Error(unavailable) if it cannot, or if
// its schema is newer than this build understands.
std::unique_ptr<StoreBackend> open_sqlite_store(const SqliteOptions& options);

// The schema version this build writes.
inline constexpr int kSqliteSchemaVersion = 10;

}  // namespace deviceshadow
