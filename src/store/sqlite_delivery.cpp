// The SQLite store's delivery state (DeliveryStore): registrations (each with its checkpoint
// in its row), dead letters and the outbox (the feed table SqliteStore::write appends to), on
// the same writer and readers as its shadows.
#include "store/sqlite.hpp"

namespace deviceshadow {
namespace {

using sqlite::Query;
using Connection = sqlite::Connection;

constexpr const char* kPurgeDeadLetters = "DELETE FROM dead_letters WHERE expires <= ?1";
// The largest seq ever used: the last entry's, or the largest trimmed once none is left.
constexpr const char* kFeedEnd =
    "SELECT max(coalesce((SELECT max(seq) FROM feed), 0), feed_trimmed.seq) FROM feed_trimmed";
// A put keeps the registration's checkpoint.
constexpr const char* kPutRegistration =
    "INSERT INTO registrations(id, document, updated) VALUES (?1, ?2, ?3) "
    "ON CONFLICT(id) DO UPDATE SET document = excluded.document, updated = excluded.updated";
constexpr const char* kListRegistrations = "SELECT id, document, updated FROM registrations ORDER BY id";
constexpr const char* kRemoveRegistration = "DELETE FROM registrations WHERE id = ?1";
constexpr const char* kRemoveDeadLetters = "DELETE FROM dead_letters WHERE registration = ?1";
constexpr const char* kCheckpoint = "SELECT checkpoint FROM registrations WHERE id = ?1 AND checkpoint IS NOT NULL";
constexpr const char* kPutCheckpoint = "UPDATE registrations SET checkpoint = ?2 WHERE id = ?1";
constexpr const char* kPutDeadLetter =
    "INSERT OR REPLACE INTO dead_letters(registration, event_id, event, attempts, last_error, failed, expires) "
    "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)";
constexpr const char* kDeadLetters =
    "SELECT registration, event_id, event, attempts, last_error, failed, expires FROM dead_letters "
    "WHERE registration = ?1 AND event_id > ?2 ORDER BY event_id LIMIT ?3";
constexpr const char* kCountDeadLetters = "SELECT count(*) FROM dead_letters WHERE registration = ?1";
constexpr const char* kRemoveDeadLetter = "DELETE FROM dead_letters WHERE registration = ?1 AND event_id = ?2";
constexpr const char* kReadFeed = "SELECT seq, thing, name, entry FROM feed WHERE seq > ?1 ORDER BY seq LIMIT ?2";
constexpr const char* kRecordTrim =
    "UPDATE feed_trimmed SET seq = max(seq, coalesce((SELECT max(seq) FROM feed WHERE seq <= ?1), 0))";
constexpr const char* kTrimFeed = "DELETE FROM feed WHERE seq <= ?1";


}  // namespace

// One process uses this store: every claim is granted.
bool SqliteStore::claim(std::string_view, std::string_view, std::int64_t, std::int64_t) { return true; }

std::size_t SqliteStore::purge_dead_letters(std::int64_t now_ns) {
  std::size_t purged = 0;
  run_on_writer([&](Connection& c) {
    Query(c.statement(kPurgeDeadLetters)).bind(1, now_ns).run();
    purged = static_cast<std::size_t>(sqlite3_changes(c.db()));
  });
  return purged;
}

void SqliteStore::put_registration(const RegistrationRecord& r) {
  run_on_writer([&](Connection& c) {
    Query(c.statement(kPutRegistration)).bind(1, r.id).bind(2, r.json).bind(3, r.updated_ns).run();
  });
}

std::vector<RegistrationRecord> SqliteStore::list_registrations() {
  return with_reader([](Connection& c) {
    Query q(c.statement(kListRegistrations));
    std::vector<RegistrationRecord> out;
    while (q.step()) out.push_back({q.text(0), q.text(1), q.integer(2)});
    return out;
  });
}

bool SqliteStore::remove_registration(std::string_view id) {
  bool removed = false;
  run_on_writer([&](Connection& c) {
    Query(c.statement(kRemoveRegistration)).bind(1, id).run();
    removed = sqlite3_changes(c.db()) > 0;
    Query(c.statement(kRemoveDeadLetters)).bind(1, id).run();
  });
  return removed;
}

// The checkpoint lives in the registration's row: it exists only while the registration does.
std::optional<std::uint64_t> SqliteStore::checkpoint(std::string_view registration) {
  return with_reader([&](Connection& c) -> std::optional<std::uint64_t> {
    Query q(c.statement(kCheckpoint));
    q.bind(1, registration);
    if (!q.step()) return std::nullopt;
    return static_cast<std::uint64_t>(q.integer(0));
  });
}

void SqliteStore::put_checkpoint(std::string_view registration, std::uint64_t seq) {
  run_on_writer([&](Connection& c) {
    Query(c.statement(kPutCheckpoint)).bind(1, registration).bind(2, static_cast<std::int64_t>(seq)).run();
  });
}

void SqliteStore::put_dead_letters(std::span<const DeadLetter> letters) {
  if (letters.empty()) return;
  run_on_writer([&](Connection& c) {
    for (const DeadLetter& d : letters) {
      Query q(c.statement(kPutDeadLetter));
      q.bind(1, d.registration).bind(2, d.event_id).bind(3, d.event).bind(4, std::int64_t{d.attempts});
      q.bind(5, d.last_error).bind(6, d.failed_ns).bind(7, d.expires_ns).run();
    }
  });
}

std::vector<DeadLetter> SqliteStore::dead_letters(std::string_view registration, std::string_view after, std::size_t limit) {
  return with_reader([&](Connection& c) {
    Query q(c.statement(kDeadLetters));
    q.bind(1, registration).bind(2, after).bind(3, static_cast<std::int64_t>(std::min<std::size_t>(limit, INT64_MAX)));
    std::vector<DeadLetter> out;
    while (q.step()) {
      out.push_back({q.text(0), q.text(1), q.text(2), static_cast<int>(q.integer(3)), q.text(4), q.integer(5),
                     q.integer(6)});
    }
    return out;
  });
}

std::uint64_t SqliteStore::count_dead_letters(std::string_view registration) {
  return with_reader([&](Connection& c) -> std::uint64_t {
    Query q(c.statement(kCountDeadLetters));
    q.bind(1, registration);
    return q.step() ? static_cast<std::uint64_t>(q.integer(0)) : 0;
  });
}

// One transaction, however many.
std::size_t SqliteStore::remove_dead_letters(std::string_view registration,
                                             std::optional<std::span<const std::string>> event_ids) {
  if (event_ids && event_ids->empty()) return 0;
  std::size_t removed = 0;
  run_on_writer([&](Connection& c) {
    if (!event_ids) {
      Query(c.statement(kRemoveDeadLetters)).bind(1, registration).run();
      removed = static_cast<std::size_t>(sqlite3_changes(c.db()));
      return;
    }
    for (const std::string& id : *event_ids) {
      Query(c.statement(kRemoveDeadLetter)).bind(1, registration).bind(2, id).run();
      removed += static_cast<std::size_t>(sqlite3_changes(c.db()));
    }
  });
  return removed;
}

std::vector<FeedEntry> SqliteStore::read_feed(std::uint64_t after, std::size_t limit) {
  return with_reader([&](Connection& c) {
    Query q(c.statement(kReadFeed));
    q.bind(1, static_cast<std::int64_t>(after)).bind(2, static_cast<std::int64_t>(limit));
    std::vector<FeedEntry> out;
    while (q.step()) out.push_back({static_cast<std::uint64_t>(q.integer(0)), {q.text(1), q.text(2)}, q.text(3)});
    return out;
  });
}

void SqliteStore::trim_feed(std::uint64_t up_to) {
  run_on_writer([&](Connection& c) {
    Query(c.statement(kRecordTrim)).bind(1, static_cast<std::int64_t>(up_to)).run();
    Query(c.statement(kTrimFeed)).bind(1, static_cast<std::int64_t>(up_to)).run();
  });
}

std::uint64_t SqliteStore::feed_end() {
  return with_reader([](Connection& c) -> std::uint64_t {
    Query q(c.statement(kFeedEnd));
    return q.step() ? static_cast<std::uint64_t>(q.integer(0)) : 0;
  });
}

}  // namespace deviceshadow
