// Fleet queries (docs/queries.md): GET /v1/shadows, POST /v1/shadows/search, GET
// /v1/shadows/count, POST /v1/shadows/aggregate. Any role may ask; every answer is limited to
// the things the token covers.
#include "api/api.hpp"
#include "api/handlers.hpp"

#include "deviceshadow/error.hpp"
#include "deviceshadow/render.hpp"
#include "query/aggregate.hpp"
#include "query/cursor.hpp"

#include <algorithm>
#include <cmath>

namespace deviceshadow::api {
namespace {

constexpr std::string_view kDefaultSort = "+thing,+name";
constexpr std::size_t kMaxGroupBy = 8, kMaxMetrics = 20, kMaxFields = 32;

// A search as asked, from the query string or the JSON body.
struct SearchRequest {
  std::string filter;
  std::vector<std::string> fields;
  std::string sort;  // normalized: kDefaultSort
  std::size_t limit = kDefaultPageLimit;
  std::string cursor;
  bool allow_scan = false;
};

// A whole number of a JSON body, also when written 5.0, from 1 to `high`; else invalid_request
// naming `field`.
std::uint64_t whole_number(const json::value& v, std::uint64_t high, const char* field) {
  const bool whole = v.is_int64() || v.is_uint64() || (v.is_double() && std::trunc(v.get_double()) == v.get_double());
  if (!whole || v.to_number<double>() < 1 || v.to_number<double>() > static_cast<double>(high)) {
    throw Error::invalid_request(std::string(field) + " must be a whole number between 1 and " + std::to_string(high), field);
  }
  return v.to_number<std::uint64_t>();
}

// The members of a comma-separated list; an empty one (",x", "x,", "x,,y") is kept, and refused
// as a property would be.
std::vector<std::string> split_fields(std::string_view text) {
  std::vector<std::string> out;
  if (text.empty()) return out;
  for (std::size_t start = 0;;) {
    const std::size_t comma = text.find(',', start);
    out.emplace_back(text.substr(start, comma == std::string_view::npos ? comma : comma - start));
    if (comma == std::string_view::npos) return out;
    start = comma + 1;
  }
}

// The sort as asked, normalized: kDefaultSort, or "+FIELD" / "-FIELD" (a declared field, then
// thing and name, which may be written after it).
std::string checked_sort(std::string_view text) {
  if (text.empty()) return std::string(kDefaultSort);
  std::vector<std::string> keys = split_fields(text);
  for (std::string& k : keys) {  // an unencoded '+' in a query string arrives as a space
    if (!k.empty() && k[0] == ' ') k[0] = '+';
  }
  std::string sign = "+";
  if (!keys.front().empty() && (keys.front()[0] == '-' || keys.front()[0] == '+')) sign = keys.front().substr(0, 1);
  for (std::string& k : keys) {
    if (!k.empty() && k[0] == '+') k.erase(0, 1);
  }
  if (keys == std::vector<std::string>{"thing"} || keys == std::vector<std::string>{"thing", "name"}) return std::string(kDefaultSort);
  std::string field = keys.front();
  if (!field.empty() && field[0] == '-') field.erase(0, 1);
  if (!field.empty() && (field[0] == '-' || field[0] == '+')) field.clear();  // "+-x", "-+x": no such field
  const std::vector<std::string> tail(keys.begin() + 1, keys.end());
  const bool ties_default = tail.empty() || tail == std::vector<std::string>{"thing"} || tail == std::vector<std::string>{"thing", "name"};
  try {
    if (!ties_default) throw Error::invalid_request("");
    query::parse_index_field(field);
  } catch (const Error&) {
    throw Error::invalid_request("sort: '" + std::string(text) +
                                     "' is not +thing,+name or one declared field, e.g. -reported/temp (ties: thing, then name)",
                                 "sort");
  }
  return sign + field;
}

// A sorted search's value, as its cursors carry it: "TYPE:" then the value (a real number after
// 'r', in shortest round-trip form).
std::string encode_position(const IndexValue& v) {
  std::string out = std::to_string(static_cast<int>(v.type)) + ":";
  if (v.type == IndexValue::Type::string) {
    out += v.text;
  } else if (v.real) {
    out += 'r';
    append_json(out, json::value(v.number));
  } else {
    out += std::to_string(v.integer);
  }
  return out;
}

IndexValue decode_position(const std::string& text) {
  auto bad = [] { return Error::invalid_request("the cursor is not a sorted search's", "cursor"); };
  if (text.size() < 2 || text[1] != ':' || text[0] < '0' || text[0] > '5') throw bad();
  IndexValue v;
  v.type = static_cast<IndexValue::Type>(text[0] - '0');
  const std::string value = text.substr(2);
  try {
    if (v.type == IndexValue::Type::string) {
      v.text = value;
    } else if (!value.empty() && value[0] == 'r') {
      v.real = true;
      v.number = std::stod(value.substr(1));
    } else {
      v.integer = std::stoll(value);
    }
  } catch (const std::exception&) {
    throw bad();
  }
  return v;
}

SearchRequest from_query(std::map<std::string, std::string>& q) {
  http::allow_only(q, {"filter", "fields", "sort", "limit", "cursor", "allowScan"});
  SearchRequest r;
  r.filter = q["filter"];
  r.fields = split_fields(q["fields"]);
  r.sort = checked_sort(q["sort"]);
  if (q.contains("limit")) r.limit = checked_limit(http::parse_uint(q["limit"], "limit"));
  r.cursor = q["cursor"];
  if (q.contains("allowScan")) r.allow_scan = parse_flag(q["allowScan"], "allowScan");
  return r;
}

json::object body_object(const std::string& body, const Limits& limits) {
  json::value v = body.empty() ? json::value(json::object()) : parse_request_json(body, limits.max_depth, 0);
  if (!v.is_object()) throw Error::invalid_request("the request body must be a JSON object");
  return std::move(v.get_object());
}

std::string text(const json::value& m, std::string_view name) {
  if (!m.is_string()) throw Error::invalid_request(std::string(name) + " must be a string", std::string(name));
  return std::string(m.get_string());
}

// A filter member: a string, or null for none.
std::string filter_member(const json::value& m) { return m.is_null() ? std::string() : text(m, "filter"); }

bool flag(const json::value& m, const char* name) {
  if (!m.is_bool()) throw Error::invalid_request(std::string(name) + " must be true or false", name);
  return m.get_bool();
}

SearchRequest from_body(const std::string& body, const Limits& limits) {
  const json::object o = body_object(body, limits);
  SearchRequest r;
  std::string sort;
  for (const auto& m : o) {
    const std::string_view k = m.key();
    if (k == "filter") {
      r.filter = filter_member(m.value());
    } else if (k == "sort") {
      sort = text(m.value(), "sort");
    } else if (k == "cursor") {
      r.cursor = text(m.value(), "cursor");
    } else if (k == "fields" && m.value().is_array()) {  // one property per item: commas allowed
      for (const json::value& f : m.value().get_array()) r.fields.push_back(text(f, "fields"));
    } else if (k == "fields") {
      r.fields = split_fields(text(m.value(), "fields"));
    } else if (k == "limit") {
      r.limit = whole_number(m.value(), kMaxPageLimit, "limit");
    } else if (k == "allowScan") {
      r.allow_scan = flag(m.value(), "allowScan");
    } else {
      throw Error::invalid_request("unknown member '" + std::string(k) + "'", std::string(k));
    }
  }
  r.sort = checked_sort(sort);
  return r;
}

query::Filter parse_filter(const std::string& text) {
  return text.empty() ? query::Filter() : query::Filter::parse(text, now().unix_nanos());
}

// The things a token covers (empty: every thing).
std::span<const ThingPattern> scope_of(const Token* token) {
  return token ? std::span<const ThingPattern>(token->patterns) : std::span<const ThingPattern>();
}

// One shadow of a page: the whole GET body, or thing, name and the fields asked for.
void append_result(std::string& out, const query::Subject& s, const std::vector<query::Property>& fields) {
  if (fields.empty()) {
    append_shadow(out, ShadowView{s.key(), s.record(), s.delta()});
    return;
  }
  out += "{\"thing\":";
  append_json_string(out, s.key().thing);
  out += ",\"name\":";
  append_json_string(out, s.key().name);
  for (const query::Property& p : fields) {
    if (p.kind == query::Property::Kind::thing || p.kind == query::Property::Kind::name) continue;
    const std::size_t mark = out.size();
    out += ',';
    append_json_string(out, p.text);
    out += ':';
    if (!query::append_property(out, s, p)) out.resize(mark);
  }
  out += '}';
}

}  // namespace

const query::CursorKey& Api::cursor_key() const {
  static const query::CursorKey process_key = query::CursorKey::random();
  return options_.cursor_key ? *options_.cursor_key : process_key;
}

HttpResponse Api::search(Context& ctx) {
  authorize(ctx, Action::read, "");
  const EngineOptions& engine_options = engine_.options();
  if (ctx.request.method != "GET") http::allow_only(ctx.query, {});
  SearchRequest r = ctx.request.method == "GET" ? from_query(ctx.query) : from_body(ctx.request.body, engine_options.document.limits);
  const query::Filter filter = parse_filter(r.filter);
  if (r.fields.size() > kMaxFields) {
    throw Error::invalid_request("fields: at most " + std::to_string(kMaxFields) + " properties", "fields");
  }
  std::vector<query::Property> fields;
  for (const std::string& f : r.fields) {
    if (std::count(r.fields.begin(), r.fields.end(), f) > 1) {
      throw Error::invalid_request("fields: '" + f + "' is listed twice", "fields");
    }
    fields.push_back(query::parse_property(f));
  }
  const query::CursorKey& key = cursor_key();
  const std::string binding = query::cursor_binding(r.filter, r.sort, ctx.token ? ctx.token->sha256_hex : "");
  std::optional<query::Sort> sort;
  if (r.sort != kDefaultSort) {
    sort = query::Sort{r.sort.substr(1), r.sort[0] == '-'};
    if (!options_.queries.indexes || !options_.queries.indexes->ready(sort->field)) {
      throw Error::invalid_request("sort: " + sort->field +
                                       " is not a declared field whose index is ready (PUT /v1/index, GET /v1/index)",
                                   "sort");
    }
  }
  std::optional<ShadowKey> after;
  std::optional<query::SortPosition> position;
  if (!r.cursor.empty()) {
    std::string value;
    after = key.open(r.cursor, binding, &value);
    if (sort) position = query::SortPosition{decode_position(value), *after};
  }

  // A page ends at `limit` shadows or, like a history page, once they reach max_page_bytes (the
  // first always goes in); the match after the last one decides whether a cursor follows.
  const std::size_t budget = engine_options.max_page_bytes;
  std::string out = "{\"shadows\":[", item, last_value;
  std::size_t kept = 0, bytes = 0;
  bool more = false;
  auto take = [&](const query::Subject& s, const IndexValue* value) {
    item.clear();
    append_result(item, s, fields);
    if (kept == r.limit || (kept > 0 && bytes + item.size() > budget)) {
      more = true;
      return false;
    }
    if (kept++) out += ',';
    out += item;
    bytes += item.size();
    after = s.key();
    if (value) last_value = encode_position(*value);
    return true;
  };
  try {
    const query::Scan scan{filter, scope_of(ctx.token), sort ? std::nullopt : after, r.allow_scan};
    if (sort) {
      query::sorted_scan(engine_.store(), engine_options.document.timestamp_keys, scan, *sort, position, options_.queries,
                         [&](const query::Subject& s, const IndexValue& v) { return take(s, &v); });
    } else {
      query::scan(engine_.store(), engine_options.document.timestamp_keys, scan, options_.queries,
                  [&](const query::Subject& s) { return take(s, nullptr); });
    }
  } catch (const Error& e) {
    // The budget ran out looking past a full page for whether another match follows: the page
    // stands, with a cursor (the next page may find nothing more, or run out itself).
    if (e.code() != ErrorCode::query_too_expensive || kept < r.limit) throw;
    more = true;
  }
  out += ']';
  if (more) {
    out += ",\"cursor\":";
    append_json_string(out, key.seal(*after, binding, last_value));
  }
  return {200, "application/json", out + "}", {}};
}

HttpResponse Api::count(Context& ctx) {
  authorize(ctx, Action::read, "");
  http::allow_only(ctx.query, {"filter", "allowScan"});
  const query::Filter filter = parse_filter(ctx.query["filter"]);
  const bool allow_scan = ctx.query.contains("allowScan") && parse_flag(ctx.query["allowScan"], "allowScan");
  const std::uint64_t n = query::count(engine_.store(), engine_.options().document.timestamp_keys,
                                       {filter, scope_of(ctx.token), std::nullopt, allow_scan}, options_.queries);
  return {200, "application/json", "{\"count\":" + std::to_string(n) + "}", {}};
}

HttpResponse Api::aggregate(Context& ctx) {
  authorize(ctx, Action::read, "");
  http::allow_only(ctx.query, {});
  const json::object o = body_object(ctx.request.body, engine_.options().document.limits);
  std::string filter_text;
  std::vector<query::Property> group_by;
  std::vector<query::Metric> metrics;
  std::size_t max_groups = 100;
  bool allow_scan = false;
  for (const auto& m : o) {
    const std::string_view k = m.key();
    if (k == "filter") {
      filter_text = filter_member(m.value());
    } else if (k == "groupBy") {
      const json::array* props = m.value().if_array();
      if (!props || props->size() > kMaxGroupBy) {
        throw Error::invalid_request("groupBy must be an array of at most " + std::to_string(kMaxGroupBy) + " properties", "groupBy");
      }
      std::vector<std::string> seen;
      for (const json::value& p : *props) {
        std::string property = text(p, "groupBy");
        if (std::find(seen.begin(), seen.end(), property) != seen.end()) {
          throw Error::invalid_request("groupBy names " + property + " twice", "groupBy");
        }
        group_by.push_back(query::parse_property(property, "groupBy"));
        seen.push_back(std::move(property));
      }
    } else if (k == "metrics") {
      const json::object* labelled = m.value().if_object();
      if (!labelled || labelled->empty() || labelled->size() > kMaxMetrics) {
        throw Error::invalid_request("metrics must be an object of 1 to " + std::to_string(kMaxMetrics) +
                                         " labelled metrics, e.g. {\"n\":\"count()\"}",
                                     "metrics");
      }
      for (const auto& metric : *labelled) {
        const std::string label(metric.key());
        metrics.push_back(query::parse_metric(label, text(metric.value(), "metrics." + label)));
      }
    } else if (k == "maxGroups") {
      max_groups = whole_number(m.value(), 1000, "maxGroups");
    } else if (k == "allowScan") {
      allow_scan = flag(m.value(), "allowScan");
    } else {
      throw Error::invalid_request("unknown member '" + std::string(k) + "'", std::string(k));
    }
  }
  if (metrics.empty()) throw Error::invalid_request("metrics is required, e.g. {\"n\":\"count()\"}", "metrics");
  const query::Filter filter = parse_filter(filter_text);
  query::Aggregation aggregation(std::move(group_by), std::move(metrics), max_groups);
  query::QueryOptions options = options_.queries;
  options.budget_always = true;  // every match is kept (its group, its values for percentiles)
  query::scan(engine_.store(), engine_.options().document.timestamp_keys, {filter, scope_of(ctx.token), std::nullopt, allow_scan},
              options, [&](const query::Subject& s) {
                aggregation.add(s);
                return true;
              });
  return {200, "application/json", aggregation.render(), {}};
}

// GET /v1/index: the declared fields and their state; PUT /v1/index {"fields":[…]}: declares
// exactly those (docs/queries.md, "Indexes").
HttpResponse Api::index(Context& ctx) {
  if (ctx.token && ctx.token->role != Role::admin) throw Error(ErrorCode::forbidden, "indexes need an admin token");
  http::allow_only(ctx.query, {});
  query::IndexKeeper* keeper = options_.queries.indexes;
  std::vector<IndexFieldState> states;
  if (ctx.request.method == "PUT") {
    const json::object o = body_object(ctx.request.body, engine_.options().document.limits);
    std::vector<std::string> fields;
    for (const auto& m : o) {
      if (m.key() != "fields") throw Error::invalid_request("unknown member '" + std::string(m.key()) + "'", std::string(m.key()));
      const json::array* list = m.value().if_array();
      if (!list) throw Error::invalid_request("fields must be an array of properties, e.g. [\"reported/fw\"]", "fields");
      for (const json::value& f : *list) fields.push_back(text(f, "fields"));
    }
    if (!o.contains("fields")) throw Error::invalid_request("fields is required, e.g. {\"fields\":[\"reported/fw\"]}", "fields");
    if (!keeper) {
      throw Error::invalid_request("this server keeps no declared indexes", "fields");
    }
    states = keeper->declare(fields);
  } else if (keeper) {
    states = keeper->status();
  }
  std::string out = "{\"fields\":[";
  for (const IndexFieldState& f : states) {
    if (out.back() != '[') out += ',';
    out += "{\"field\":";
    append_json_string(out, f.field);
    out += f.ready ? ",\"state\":\"ready\"" : ",\"state\":\"building\"";
    out += ",\"indexed\":" + std::to_string(f.indexed) + "}";
  }
  return {200, "application/json", out + "]}", {}};
}

}  // namespace deviceshadow::api
