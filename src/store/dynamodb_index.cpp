// The DynamoDB store's declared indexes (docs/storage.md, "Index items"): the declaration item,
// and one item per entry, written in the transaction of the write that changes it.
//
// | item        | PK                                   | SK                                    |
// |-------------|--------------------------------------|---------------------------------------|
// | declaration | IX                                   | FIELDS                                |
// | guard       | IX#G{shard 0-15}                     | G                                     |
// | entry       | IX#{since}#{field}#{shard 0-15}      | {type}{value, sortable}\x01{thing}\x01{name} |
//
// `since` is the generation that declared the field, so a field declared again never sees the
// entries of an earlier declaration that a failed removal left behind. An entry's shard is a
// stable hash of its shadow: no value, however common, sits on one partition. A range read
// queries the 16 partitions (strongly consistent) and merges them by sort key.
#include "store/dynamodb.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <future>

namespace deviceshadow {

using namespace dynamodb;

namespace {

constexpr int kIndexShards = 16;
constexpr std::string_view kDeclarationPk = "IX";
constexpr std::string_view kDeclarationSk = "FIELDS";
// The declaration's generation again in one guard item per shard, which writes check instead of
// the declaration itself: no item every write reads, and the declaration's progress (which
// writes do not check) is put without conflicting with the writes in flight.
constexpr std::string_view kGuardSk = "G";
std::string guard_pk(int shard) { return "IX#G" + std::to_string(shard); }
// A sort key holds at most 1024 bytes; a thing 512, a name 64. A string value's key part is cut
// at this many bytes and followed by kCut and a hash of the whole value (the item keeps the value).
constexpr std::size_t kMaxValueKeyBytes = 400;
constexpr std::string_view kCut = "\xF4\x8F\xBF\xBF";  // U+10FFFF, above every other character
constexpr char kSeparator = '\x01';                   // below every byte of a value's key part
// DynamoDB's limit on the items of one TransactWriteItems.
constexpr std::size_t kMaxTransactionItems = 100;

std::uint64_t fnv1a64(std::string_view text, std::uint64_t h = 14695981039346656037ull) {
  for (unsigned char c : text) h = (h ^ c) * 1099511628211ull;
  return h;
}

std::string entry_pk(std::uint64_t since, std::string_view field, int shard) {
  return "IX#" + std::to_string(since) + "#" + std::string(field) + "#" + std::to_string(shard);
}

int shard_of(std::string_view thing, std::string_view name) {
  return static_cast<int>(fnv1a64(name, fnv1a64("\x01", fnv1a64(thing))) % kIndexShards);
}

// The decimal digits of a whole double a >= 1, exactly (a = m × 2^e: m's digits doubled e times).
std::string whole_digits(double a) {
  int e = 0;
  std::uint64_t m = static_cast<std::uint64_t>(std::ldexp(std::frexp(a, &e), 53));
  for (e -= 53; e < 0; ++e) m >>= 1;  // whole: the bits shifted out are zeros
  constexpr std::uint32_t kBase = 1000000000;
  std::vector<std::uint32_t> limbs;  // base 10^9, least significant first
  for (; m != 0; m /= kBase) limbs.push_back(static_cast<std::uint32_t>(m % kBase));
  for (; e > 0; --e) {
    std::uint32_t carry = 0;
    for (std::uint32_t& limb : limbs) {
      const std::uint64_t twice = std::uint64_t{limb} * 2 + carry;
      limb = static_cast<std::uint32_t>(twice % kBase);
      carry = static_cast<std::uint32_t>(twice / kBase);
    }
    if (carry) limbs.push_back(carry);
  }
  std::string digits = std::to_string(limbs.back());
  for (auto it = limbs.rbegin() + 1; it != limbs.rend(); ++it) {
    const std::string part = std::to_string(*it);
    digits.append(9 - part.size(), '0').append(part);
  }
  return digits;
}

// A number's key part: a sign class ('1' negative, '2' zero, '3' positive), then for x = ±0.D×10^E
// the exponent E+400 in three digits and the digits D (trailing zeros dropped); a negative
// number's exponent and digits are complemented and end with '~', so that its key parts sort in
// reverse. Integers, and doubles holding a whole number, are exact (2^55 written 3.602879701896397e16
// is the key of 36028797018963968); other numbers use their shortest round-trip digits, which
// order the same as the doubles they stand for and never equal an integer (no integer rounds to
// a double with a fraction).
void append_number(std::string& out, const IndexValue& v) {
  bool negative = false;
  std::string digits;
  int exponent = 0;
  if (!v.real) {
    if (v.integer == 0) return void(out += '2');
    negative = v.integer < 0;
    digits = std::to_string(negative ? 0 - static_cast<std::uint64_t>(v.integer) : static_cast<std::uint64_t>(v.integer));
    exponent = static_cast<int>(digits.size());
  } else {
    if (v.number == 0) return void(out += '2');
    negative = v.number < 0;
    const double a = std::fabs(v.number);
    if (std::isinf(a)) return void(out += negative ? "1000" : "3999");
    if (a >= 1 && std::trunc(a) == a) {
      digits = whole_digits(a);
      exponent = static_cast<int>(digits.size());
    } else {
      char buffer[64];
      const auto end = std::to_chars(buffer, buffer + sizeof buffer, a, std::chars_format::scientific).ptr;
      const std::string_view text(buffer, static_cast<std::size_t>(end - buffer));  // "d.ddde+XX"
      const std::size_t e = text.find('e');
      for (char c : text.substr(0, e)) {
        if (c != '.') digits += c;
      }
      int power = 0;
      std::from_chars(text.data() + e + (text[e + 1] == '+' ? 2 : 1), text.data() + text.size(), power);
      exponent = power + 1;
    }
  }
  while (digits.size() > 1 && digits.back() == '0') digits.pop_back();
  int biased = exponent + 400;
  if (negative) biased = 999 - biased;
  char head[16];
  std::snprintf(head, sizeof head, "%c%03d", negative ? '1' : '3', biased);
  out += head;
  for (char c : digits) out += negative ? static_cast<char>('9' - (c - '0')) : c;
  if (negative) out += '~';
}

// A string's key part: bytes 0x00–0x02 escaped as 0x02 followed by the byte + 2, so that the part
// holds no byte below 0x02 and sorts as the string does. Returns whether it was cut.
bool append_string(std::string& out, std::string_view s) {
  const std::size_t start = out.size();
  for (std::size_t i = 0; i < s.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    const bool lead = c < 0x80 || c >= 0xC0;  // a character starts here
    if (lead && out.size() - start + 4 > kMaxValueKeyBytes) {
      out += kCut;
      char hash[20];
      std::snprintf(hash, sizeof hash, "%016llx", static_cast<unsigned long long>(fnv1a64(s)));
      out += hash;
      return true;
    }
    if (c <= 0x02) {
      out += '\x02';
      out += static_cast<char>(c + 2);
    } else {
      out += static_cast<char>(c);
    }
  }
  return false;
}

// The key part of a value: its type's digit, then its sortable form. Returns whether a string
// was cut.
bool append_value(std::string& out, const IndexValue& v) {
  out += static_cast<char>('0' + static_cast<int>(v.type));
  switch (v.type) {
    case IndexValue::Type::null:
    case IndexValue::Type::absent: break;
    case IndexValue::Type::boolean: out += v.integer ? '1' : '0'; break;
    case IndexValue::Type::number: append_number(out, v); break;
    case IndexValue::Type::string: return append_string(out, v.text);
    case IndexValue::Type::time: {
      char hex[20];
      std::snprintf(hex, sizeof hex, "%016llx",
                    static_cast<unsigned long long>(static_cast<std::uint64_t>(v.integer) ^ (1ull << 63)));
      out += hex;
      break;
    }
  }
  return false;
}

std::string entry_sk(const IndexValue& v, std::string_view thing, std::string_view name) {
  std::string sk;
  append_value(sk, v);
  sk += kSeparator;
  sk += thing;
  sk += kSeparator;
  sk += name;
  return sk;
}

// A number as the entry's `n` attribute: an integer's digits, else the shortest round trip in
// scientific notation (so that it is never mistaken for an integer, however large).
std::string number_text(const IndexValue& v) {
  if (!v.real) return std::to_string(v.integer);
  char buffer[64];
  return std::string(buffer, std::to_chars(buffer, buffer + sizeof buffer, v.number, std::chars_format::scientific).ptr);
}

// The entry an item is, from its sort key and attributes.
IndexHit decode_entry(const json::object& item) {
  const std::string sk = get_s(item, "SK");
  const std::size_t last = sk.rfind(kSeparator);
  const std::size_t middle = last == std::string::npos || last == 0 ? std::string::npos : sk.rfind(kSeparator, last - 1);
  if (middle == std::string::npos || middle == 0) throw Error(ErrorCode::internal, "dynamodb: a malformed index entry");
  IndexHit hit;
  hit.name = sk.substr(last + 1);
  hit.thing = sk.substr(middle + 1, last - middle - 1);
  const std::string_view part = std::string_view(sk).substr(1, middle - 1);
  IndexValue& v = hit.value;
  v.type = static_cast<IndexValue::Type>(sk[0] - '0');
  switch (v.type) {
    case IndexValue::Type::null:
    case IndexValue::Type::absent: break;
    case IndexValue::Type::boolean: v.integer = part == "1"; break;
    case IndexValue::Type::number: {
      const std::string text = get_s(item, "n");
      v.real = text.find_first_of(".eEn") != std::string::npos;
      if (!v.real && std::from_chars(text.data(), text.data() + text.size(), v.integer).ec != std::errc()) v.real = true;
      if (v.real) v.number = std::strtod(text.c_str(), nullptr);
      break;
    }
    case IndexValue::Type::string:
      if (item.contains("s")) {
        v.text = get_s(item, "s");
      } else {
        for (std::size_t i = 0; i < part.size(); ++i) v.text += part[i] == '\x02' ? static_cast<char>(part[++i] - 2) : part[i];
      }
      break;
    case IndexValue::Type::time: {
      std::uint64_t bits = 0;
      std::from_chars(part.data(), part.data() + part.size(), bits, 16);
      v.integer = static_cast<std::int64_t>(bits ^ (1ull << 63));
      break;
    }
  }
  return hit;
}

// The sort keys between which a range's entries lie (both inclusive), and whether the entries
// read must be checked against the range itself (a bound was cut, so the keys select more).
struct KeyRange {
  std::string low, high;
  bool check = false;
};

KeyRange key_range(const IndexRange& r) {
  const char type = static_cast<char>('0' + static_cast<int>(r.type));
  KeyRange k;
  if (r.low) {
    const bool cut = append_value(k.low, *r.low);
    k.check = cut;
    if (cut) {
      k.low.resize(k.low.size() - 16);  // below every hash after the cut
    } else {
      k.low += r.low_open ? '\x02' : kSeparator;
    }
  } else {
    k.low = std::string(1, type);
  }
  if (r.high) {
    const bool cut = append_value(k.high, *r.high);
    k.check = k.check || cut;
    if (cut) {
      k.high.resize(k.high.size() - 16);
      k.high += 'g';  // above every hash after the cut
    } else if (!r.high_open) {
      k.high += '\x02';
    }
  } else {
    k.high = std::string(1, static_cast<char>(type + 1));
  }
  return k;
}

}  // namespace

// ---- the declaration -------------------------------------------------------------------

DynamoDbStore::Declared DynamoDbStore::read_declaration() {
  json::object request{{"TableName", options_.table},
                       {"Key", json::object{{"PK", S(kDeclarationPk)}, {"SK", S(kDeclarationSk)}}},
                       {"ConsistentRead", true}};
  const json::value response = call("GetItem", request, true);
  Declared d;
  if (const json::value* item = response.as_object().if_contains("Item")) {
    d.generation = static_cast<std::uint64_t>(get_n(item->as_object(), "generation"));
    const json::value list = parse_json(get_s(item->as_object(), "fields"));
    for (const json::value& f : list.as_array()) {
      const json::object& o = f.as_object();
      // A field declared before shadows lacking it had an `absent` entry is built again.
      const bool current = o.contains("absentEntries");
      d.fields.push_back({std::string(o.at("field").as_string()), current && o.at("ready").as_bool(),
                          current ? static_cast<std::uint64_t>(o.at("indexed").to_number<std::int64_t>()) : 0});
      d.since[d.fields.back().field] = static_cast<std::uint64_t>(o.at("since").to_number<std::int64_t>());
    }
  }
  std::lock_guard lock(declared_mutex_);
  if (d.generation >= declared_.generation) declared_ = d;
  return d;
}

IndexDeclaration DynamoDbStore::index_fields() {
  Declared d = read_declaration();
  return {std::move(d.fields), d.generation};
}

std::uint64_t DynamoDbStore::put_index_fields(std::span<const IndexFieldState> fields, std::uint64_t generation) {
  const Declared stored = read_declaration();
  if (stored.generation != generation) throw IndexDeclarationChanged();
  const bool same_list = std::equal(fields.begin(), fields.end(), stored.fields.begin(), stored.fields.end(),
                                    [](const IndexFieldState& a, const IndexFieldState& b) { return a.field == b.field; });
  if (same_list && generation == 0) return 0;  // nothing declared, nothing to store
  Declared next;
  next.generation = same_list ? generation : generation + 1;
  json::array list;
  for (const IndexFieldState& f : fields) {
    auto kept = stored.since.find(f.field);
    const std::uint64_t since = kept != stored.since.end() ? kept->second : next.generation;
    next.fields.push_back(f);
    next.since[f.field] = since;
    list.push_back(json::object{
        {"field", f.field}, {"ready", f.ready}, {"indexed", f.indexed}, {"since", since}, {"absentEntries", true}});
  }
  json::object put{{"TableName", options_.table},
                   {"Item", json::object{{"PK", S(kDeclarationPk)},
                                         {"SK", S(kDeclarationSk)},
                                         {"generation", N(static_cast<std::int64_t>(next.generation))},
                                         {"fields", S(to_json(list))}}}};
  if (generation == 0) {
    put["ConditionExpression"] = "attribute_not_exists(PK)";
  } else {
    put["ConditionExpression"] = "generation = :g";
    put["ExpressionAttributeValues"] = json::object{{":g", N(static_cast<std::int64_t>(generation))}};
  }
  if (same_list) {  // progress: the guards stay
    try {
      client_->call("PutItem", to_json(put), false);
    } catch (const AwsError& e) {
      if (e.type() == "ConditionalCheckFailedException") throw IndexDeclarationChanged();
      throw translate(e);
    }
  } else {  // a new list: the declaration and every guard at once
    json::array items{json::object{{"Put", put}}};
    for (int shard = 0; shard < kIndexShards; ++shard) {
      items.push_back(json::object{
          {"Put", json::object{{"TableName", options_.table},
                               {"Item", json::object{{"PK", S(guard_pk(shard))},
                                                     {"SK", S(kGuardSk)},
                                                     {"generation", N(static_cast<std::int64_t>(next.generation))}}}}}});
    }
    // Writes in flight check the guards: their transactions and this one may cancel each other.
    if (!transact(transaction(std::move(items)), false, 4 * options_.max_attempts).empty()) {
      throw IndexDeclarationChanged();
    }
  }
  {
    std::lock_guard lock(declared_mutex_);
    if (next.generation >= declared_.generation) declared_ = next;
  }
  // The entries of the fields left out: no write adds to them any more (a write by the old list
  // fails its check), and a field declared again has new partitions.
  std::lock_guard lock(declared_mutex_);
  for (const auto& [field, since] : stored.since) {
    if (!next.since.contains(field)) undeclared_.emplace_back(field, since);
  }
  return next.generation;
}

void DynamoDbStore::remove_undeclared_entries() {
  for (;;) {
    std::pair<std::string, std::uint64_t> next;
    {
      std::lock_guard lock(declared_mutex_);
      if (undeclared_.empty()) return;
      next = undeclared_.back();
    }
    const auto& [field, since] = next;
    for (int shard = 0; shard < kIndexShards; ++shard) delete_partition(entry_pk(since, field, shard), "index entries");
    std::lock_guard lock(declared_mutex_);
    std::erase(undeclared_, next);
  }
}

// ---- entries written with their shadows ------------------------------------------------

std::string DynamoDbStore::entry_operation(std::uint64_t since, std::string_view field, const ShadowKey& key,
                                           const IndexValue& v, bool put) const {
  const std::string pk = entry_pk(since, field, shard_of(key.thing, key.name));
  const std::string sk = entry_sk(v, key.thing, key.name);
  std::string op = begin_body();
  if (!put) {
    member_key(op, pk, sk);
    return finish(std::move(op));
  }
  open(op, "Item", '{');
  member_s(op, "PK", pk);
  member_s(op, "SK", sk);
  if (v.type == IndexValue::Type::number) member_s(op, "n", number_text(v));
  if (v.type == IndexValue::Type::string && sk.find(kCut) != std::string::npos) member_s(op, "s", v.text);
  close(op, '}');
  return finish(std::move(op));
}

void DynamoDbStore::append_index_operations(const ShadowWrite& w, std::vector<Operation>& ops) {
  if (w.index_generation == 0) return;
  // Each update's field's `since`, from the declaration at the write's generation.
  std::vector<std::uint64_t> since(w.index.size());
  auto look_up = [&] {
    std::lock_guard lock(declared_mutex_);
    if (declared_.generation != w.index_generation) return false;
    for (std::size_t i = 0; i < w.index.size(); ++i) {
      auto f = declared_.since.find(w.index[i].field);
      if (f == declared_.since.end()) return false;
      since[i] = f->second;
    }
    return true;
  };
  if (!look_up() && (read_declaration(), !look_up())) throw IndexDeclarationChanged();
  std::string check = begin_body();
  member_key(check, guard_pk(shard_of(w.key.thing, w.key.name)), kGuardSk);
  member(check, "ConditionExpression", "generation = :g");
  open(check, "ExpressionAttributeValues", '{');
  member_n(check, ":g", w.index_generation);
  close(check, '}');
  ops.push_back({"ConditionCheck", finish(std::move(check)), true});
  std::vector<Operation> deletes;
  for (std::size_t i = 0; i < w.index.size(); ++i) {
    const IndexUpdate& u = w.index[i];
    for (const IndexValue& v : u.removed) deletes.push_back({"Delete", entry_operation(since[i], u.field, w.key, v, false)});
    for (const IndexValue& v : u.added) ops.push_back({"Put", entry_operation(since[i], u.field, w.key, v, true)});
  }
  if (ops.size() > kMaxTransactionItems) {
    throw Error::invalid_request("this write adds " + std::to_string(ops.size() - 1) +
                                 " items with its index entries; a DynamoDB transaction holds at most " +
                                 std::to_string(kMaxTransactionItems) + " (declare fields holding fewer values)");
  }
  // Deletes past the transaction's limit follow the commit (a shadow losing many values, a
  // deleted shadow): until they do, or if the process stops first, a search skips the entries
  // (it tests the filter on the shadow) but a count from the index may include them.
  for (Operation& d : deletes) {
    d.after_commit = ops.size() >= kMaxTransactionItems;
    ops.push_back(std::move(d));
  }
}

void DynamoDbStore::delete_after_commit(const std::vector<Operation>& ops) noexcept {
  std::vector<const Operation*> late;
  try {
    for (const Operation& op : ops) {
      if (op.after_commit) late.push_back(&op);
    }
    batch_write_chunks(
        late.size(),
        [&](std::string& out, std::size_t i) {
          open(out, "DeleteRequest", '{');
          // The operation's body is {"TableName":…,"Key":{…}}: its key, without the table name.
          const json::value body = parse_json(late[i]->body);
          out += "\"Key\":" + to_json(body.at("Key")) + ",";
          close(out, '}');
        },
        "index entries");
  } catch (const std::exception&) {
    // Left behind (docs/storage.md, "Index"): a search tests the filter on the shadow.
  }
}

std::vector<ShadowKey> DynamoDbStore::put_index_entries(std::span<const IndexedShadow> shadows) {
  const Declared d = read_declaration();
  std::vector<ShadowKey> moved;
  for (const IndexedShadow& s : shadows) {
    // The shadow's sections must still be at the versions read: conditions, then the entries,
    // in transactions of at most kMaxTransactionItems items.
    std::vector<std::string> conditions;
    for (const std::string& sk : section_sks(s.key.name)) {
      std::uint64_t expected = s.reported_version;
      if (options_.layout == DynamoDbLayout::separate && sk.starts_with("DSD#")) expected = s.desired_version;
      if (options_.layout == DynamoDbLayout::combined) expected = std::max(s.reported_version, s.desired_version);
      std::string op = begin_body();
      member_key(op, "DS#" + s.key.thing, sk);
      conditions.push_back(conditional(std::move(op), expected));
    }
    std::vector<std::string> puts;
    for (const IndexUpdate& u : s.updates) {
      auto since = d.since.find(u.field);
      if (since == d.since.end()) continue;  // no longer declared
      for (const IndexValue& v : u.added) puts.push_back(entry_operation(since->second, u.field, s.key, v, true));
    }
    bool current = true;
    for (std::size_t next = 0; current && next < puts.size();) {
      std::string request = "{";
      open(request, "TransactItems", '[');
      for (const std::string& c : conditions) request += R"({"ConditionCheck":)" + c + "},";
      for (std::size_t n = conditions.size(); next < puts.size() && n < kMaxTransactionItems; ++n, ++next) {
        request += R"({"Put":)" + puts[next] + "},";
      }
      close(request, ']');
      current = transact(finish(request), true, options_.max_attempts).empty();  // else written since it was read
    }
    if (!current) moved.push_back(s.key);
  }
  return moved;
}

// ---- range reads -----------------------------------------------------------------------

std::vector<IndexHit> DynamoDbStore::index_range(std::string_view field, const IndexRange& range, const IndexHit* after,
                                                 std::size_t limit) {
  return read_index(field, range, after, limit, nullptr);
}

std::uint64_t DynamoDbStore::index_count(std::string_view field, const IndexRange& range, std::uint64_t cap) {
  std::uint64_t n = 0;
  read_index(field, range, nullptr, cap, &n);
  return n;
}

// Reads `range` of `field` from every shard in parallel and merges them by sort key. With
// `count`, counts (at most `limit`) instead of returning the entries.
std::vector<IndexHit> DynamoDbStore::read_index(std::string_view field, const IndexRange& range, const IndexHit* after,
                                                std::size_t limit, std::uint64_t* count) {
  std::optional<std::uint64_t> since;
  {
    std::lock_guard lock(declared_mutex_);
    if (auto f = declared_.since.find(field); f != declared_.since.end()) since = f->second;
  }
  if (!since) {  // declared by another process since this one last read the declaration
    const Declared d = read_declaration();
    if (auto f = d.since.find(field); f != d.since.end()) since = f->second;
  }
  if (!since || limit == 0) return {};
  KeyRange keys = key_range(range);
  std::string after_sk;
  if (after) {
    after_sk = entry_sk(after->value, after->thing, after->name);
    if (!range.descending) {
      keys.low = std::max(keys.low, after_sk + kSeparator);
    } else {
      keys.high = std::min(keys.high, after_sk);  // the entry itself is dropped below
    }
  }
  std::string end_sk;  // BETWEEN holds its bound: that entry is dropped below
  if (range.end) keys.high = std::min(keys.high, end_sk = entry_sk(range.end->value, range.end->thing, range.end->name));
  if (keys.low > keys.high) return {};
  const bool select_count = count && !keys.check && !range.end;
  struct Read {
    std::vector<std::pair<std::string, IndexHit>> hits;  // by sort key
    std::uint64_t counted = 0;
  };
  auto read_shard = [&](int shard) {
    json::object q = base_query(entry_pk(*since, field, shard));
    q["KeyConditionExpression"] = "PK = :pk AND SK BETWEEN :lo AND :hi";
    json::object& values = q["ExpressionAttributeValues"].as_object();
    values[":lo"] = S(keys.low);
    values[":hi"] = S(keys.high);
    q["ScanIndexForward"] = !range.descending;
    if (select_count) q["Select"] = "COUNT";
    Read out;
    for (;;) {
      if (!select_count) q["Limit"] = static_cast<std::int64_t>(std::min<std::size_t>(limit - out.hits.size(), 999) + 1);
      const json::value page = call("Query", q, true);
      if (select_count) {
        out.counted += static_cast<std::uint64_t>(page.at("Count").to_number<std::int64_t>());
        if (out.counted >= limit) return out;
      } else {
        for (const json::value& v : page.at("Items").as_array()) {
          IndexHit hit = decode_entry(v.as_object());
          std::string sk = get_s(v.as_object(), "SK");
          if (sk == after_sk || sk == end_sk || (keys.check && !range.contains(hit.value))) continue;
          out.hits.emplace_back(std::move(sk), std::move(hit));
          if (out.hits.size() >= limit) return out;
        }
      }
      const json::value* last = page.as_object().if_contains("LastEvaluatedKey");
      if (!last) return out;
      q["ExclusiveStartKey"] = *last;
    }
  };
  std::vector<std::future<Read>> shards;
  for (int shard = 0; shard < kIndexShards; ++shard) shards.push_back(std::async(std::launch::async, read_shard, shard));
  std::vector<std::pair<std::string, IndexHit>> merged;
  std::uint64_t counted = 0;
  for (auto& f : shards) {
    Read part = f.get();
    counted += part.counted + part.hits.size();
    std::move(part.hits.begin(), part.hits.end(), std::back_inserter(merged));
  }
  if (count) {
    *count = std::min<std::uint64_t>(counted, limit);
    return {};
  }
  std::sort(merged.begin(), merged.end(), [&](const auto& a, const auto& b) {
    return range.descending ? a.first > b.first : a.first < b.first;
  });
  if (merged.size() > limit) merged.resize(limit);
  std::vector<IndexHit> out;
  out.reserve(merged.size());
  for (auto& [sk, hit] : merged) out.push_back(std::move(hit));
  return out;
}

}  // namespace deviceshadow
