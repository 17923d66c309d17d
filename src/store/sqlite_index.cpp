// The SQLite store's declared indexes (docs/storage.md, "Indexes"): the field list in
// index_fields, the entries in shadow_index, both written through the writer (a write's entries
// in its own transaction), read through the reader pool.
#include "store/sqlite.hpp"

#include <algorithm>

namespace deviceshadow {
namespace {

using sqlite::Query;
using Connection = sqlite::Connection;

constexpr const char* kSelectFields = "SELECT field, ready, indexed FROM index_fields ORDER BY position";
constexpr const char* kClearFields = "DELETE FROM index_fields";
constexpr const char* kInsertField = "INSERT INTO index_fields(field, position, ready, indexed) VALUES (?1, ?2, ?3, ?4)";
constexpr const char* kDropEntries = "DELETE FROM shadow_index WHERE field = ?1";
constexpr const char* kDeleteEntry =
    "DELETE FROM shadow_index WHERE field = ?1 AND type = ?2 AND value = ?3 AND thing = ?4 AND name = ?5";
constexpr const char* kInsertEntry =
    "INSERT OR IGNORE INTO shadow_index(field, type, value, thing, name) VALUES (?1, ?2, ?3, ?4, ?5)";

void bind_value(Query& q, int i, const IndexValue& v) {
  switch (v.type) {
    case IndexValue::Type::string: q.bind(i, std::string_view(v.text)); break;
    case IndexValue::Type::number:
      if (v.real) {
        q.bind(i, v.number);
        break;
      }
      [[fallthrough]];
    default: q.bind(i, v.integer);
  }
}

IndexValue read_value(const Query& q, IndexValue::Type type, int col) {
  IndexValue v;
  v.type = type;
  if (type == IndexValue::Type::string) {
    v.text = q.text(col);
  } else if (q.type(col) == SQLITE_FLOAT) {
    v.real = true;
    v.number = q.real(col);
  } else {
    v.integer = q.integer(col);
  }
  return v;
}

// The WHERE clause of a range over (field ?1, type ?2), its bounds bound from ?3 on; with
// `after`, strictly after its position (value, thing, name); with the range's end, before it.
struct RangeSql {
  std::string sql;
  int next = 3;
  int low = 0, high = 0, end = 0, after = 0;
};

RangeSql range_sql(const IndexRange& r, bool with_after) {
  RangeSql s;
  s.sql = "field = ?1 AND type = ?2";
  if (r.low) s.sql += std::string(" AND value ") + (r.low_open ? ">" : ">=") + " ?" + std::to_string(s.low = s.next++);
  if (r.high) s.sql += std::string(" AND value ") + (r.high_open ? "<" : "<=") + " ?" + std::to_string(s.high = s.next++);
  if (r.end) {
    s.end = s.next;
    s.sql += " AND (value, thing, name) < (?" + std::to_string(s.next) + ", ?" + std::to_string(s.next + 1) + ", ?" +
             std::to_string(s.next + 2) + ")";
    s.next += 3;
  }
  if (with_after) {
    s.after = s.next;
    s.sql += std::string(" AND (value, thing, name) ") + (r.descending ? "<" : ">") + " (?" + std::to_string(s.next) + ", ?" + std::to_string(s.next + 1) + ", ?" +
             std::to_string(s.next + 2) + ")";
    s.next += 3;
  }
  return s;
}

// Range statements are built per shape (bounds, after, limit or count): a few texts, cached.
const char* cached_sql(std::string sql) {
  static std::mutex mutex;
  static std::set<std::string> texts;
  std::lock_guard lock(mutex);
  return texts.insert(std::move(sql)).first->c_str();
}

void bind_range(Query& q, std::string_view field, const IndexRange& r, const RangeSql& s) {
  q.bind(1, field).bind(2, static_cast<std::int64_t>(r.type));
  if (r.low) bind_value(q, s.low, *r.low);
  if (r.high) bind_value(q, s.high, *r.high);
  if (r.end) {
    bind_value(q, s.end, r.end->value);
    q.bind(s.end + 1, r.end->thing).bind(s.end + 2, r.end->name);
  }
}

}  // namespace

void sqlite::apply_index_updates(Connection& c, const ShadowKey& key, std::span<const IndexUpdate> updates) {
  for (const IndexUpdate& u : updates) {
    for (const auto& [sql, values] : {std::pair{kDeleteEntry, &u.removed}, std::pair{kInsertEntry, &u.added}}) {
      for (const IndexValue& v : *values) {
        Query q(c.statement(sql));
        q.bind(1, u.field).bind(2, static_cast<std::int64_t>(v.type));
        bind_value(q, 3, v);
        q.bind(4, key.thing).bind(5, key.name);
        q.run();
      }
    }
  }
}

// One process writes a database file: the generation stays 0.
IndexDeclaration SqliteStore::index_fields() {
  return with_reader([&](Connection& c) {
    IndexDeclaration out;
    Query q(c.statement(kSelectFields));
    while (q.step()) out.fields.push_back({q.text(0), q.integer(1) != 0, static_cast<std::uint64_t>(q.integer(2))});
    return out;
  });
}

std::uint64_t SqliteStore::put_index_fields(std::span<const IndexFieldState> fields, std::uint64_t) {
  run_on_writer([&](Connection& c) {
    std::vector<std::string> dropped;
    for (Query q(c.statement(kSelectFields)); q.step();) {
      std::string field = q.text(0);
      if (std::none_of(fields.begin(), fields.end(), [&](const IndexFieldState& f) { return f.field == field; })) {
        dropped.push_back(std::move(field));
      }
    }
    for (const std::string& field : dropped) Query(c.statement(kDropEntries)).bind(1, field).run();
    Query(c.statement(kClearFields)).run();
    std::int64_t position = 0;
    for (const IndexFieldState& f : fields) {
      Query(c.statement(kInsertField)).bind(1, f.field).bind(2, position++).bind(3, std::int64_t{f.ready})
          .bind(4, static_cast<std::int64_t>(f.indexed)).run();
    }
  });
  return 0;
}

std::vector<ShadowKey> SqliteStore::put_index_entries(std::span<const IndexedShadow> shadows) {
  std::vector<ShadowKey> moved;
  run_on_writer([&](Connection& c) {
    moved.clear();  // a failed attempt rolls back whole
    for (const IndexedShadow& s : shadows) {
      const ShadowRecord now = sqlite::read_record(c, s.key);
      if (now.reported.version != s.reported_version || now.desired.version != s.desired_version) {
        moved.push_back(s.key);
        continue;
      }
      sqlite::apply_index_updates(c, s.key, s.updates);
    }
  });
  return moved;
}

std::vector<IndexHit> SqliteStore::index_range(std::string_view field, const IndexRange& range, const IndexHit* after,
                                               std::size_t limit) {
  const RangeSql s = range_sql(range, after != nullptr);
  const char* sql = cached_sql("SELECT value, thing, name FROM shadow_index WHERE " + s.sql +
                               (range.descending ? " ORDER BY value DESC, thing DESC, name DESC LIMIT ?"
                                                 : " ORDER BY value, thing, name LIMIT ?") +
                               std::to_string(s.next));
  return with_reader([&](Connection& c) {
    Query q(c.statement(sql));
    bind_range(q, field, range, s);
    if (after) {
      bind_value(q, s.after, after->value);
      q.bind(s.after + 1, after->thing).bind(s.after + 2, after->name);
    }
    q.bind(s.next, static_cast<std::int64_t>(std::min<std::size_t>(limit, INT64_MAX)));
    std::vector<IndexHit> out;
    while (q.step()) out.push_back({read_value(q, range.type, 0), q.text(1), q.text(2)});
    return out;
  });
}

std::uint64_t SqliteStore::index_count(std::string_view field, const IndexRange& range, std::uint64_t cap) {
  const RangeSql s = range_sql(range, false);
  const char* sql = cached_sql("SELECT count(*) FROM (SELECT 1 FROM shadow_index WHERE " + s.sql + " LIMIT ?" +
                               std::to_string(s.next) + ")");
  return with_reader([&](Connection& c) {
    Query q(c.statement(sql));
    bind_range(q, field, range, s);
    q.bind(s.next, static_cast<std::int64_t>(std::min<std::uint64_t>(cap, INT64_MAX)));
    return q.step() ? static_cast<std::uint64_t>(q.integer(0)) : 0;
  });
}

}  // namespace deviceshadow
