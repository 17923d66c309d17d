#include "query/index.hpp"

#include "deviceshadow/error.hpp"

#include <algorithm>
#include <chrono>

namespace deviceshadow::query {
namespace {

constexpr std::size_t kBuildChunk = 100;       // shadows a build reads and indexes at once
constexpr std::size_t kPersistEvery = 10000;   // a build stores its progress every so many shadows

bool is_pseudo(const Property& p) { return !p.in_section(); }

// The first reference token of a JSON Pointer, decoded ("" for the root).
std::string first_token(std::string_view pointer) {
  if (pointer.empty()) return {};
  pointer.remove_prefix(1);
  std::string out;
  for (std::size_t i = 0; i < pointer.size() && pointer[i] != '/'; ++i) {
    if (pointer[i] == '~' && i + 1 < pointer.size()) {
      out += pointer[++i] == '1' ? '/' : '~';
    } else {
      out += pointer[i];
    }
  }
  return out;
}

Section section_of(const Property& p) { return p.kind == Property::Kind::desired ? Section::desired : Section::reported; }

// Whether the shadow exists after `write` (a section it does not put stays as it was).
bool exists_after(const ShadowRecord& before, const ShadowWrite& write) {
  bool reported = before.reported.exists(), desired = before.desired.exists();
  for (const SectionPut& put : write.sections) (put.section == Section::reported ? reported : desired) = put.record.exists();
  return reported || desired;
}

// Whether `write` may change what `p` holds: anything when the shadow comes to exist or ceases
// to (its entries come or go, `absent` ones included); else `name` never, any other pseudo field
// with every write, a section path when the write changes a leaf under the same top-level member
// or removes the section.
bool affected(const Property& p, const ShadowRecord& before, const ShadowWrite& write, std::span<const Change> changes) {
  if (before.exists() != exists_after(before, write)) return true;
  if (p.kind == Property::Kind::name) return false;
  if (is_pseudo(p)) return true;
  const Section section = section_of(p);
  for (const SectionPut& put : write.sections) {
    if (put.section == section && put.record.deleted) return true;
  }
  return std::any_of(changes.begin(), changes.end(),
                     [&](const Change& c) { return c.section == section && first_token(c.path) == p.path.front(); });
}

}  // namespace

Property parse_index_field(std::string_view text) {
  Property p = parse_property(text, "fields");
  if (!indexable(p)) {
    throw Error::invalid_request("fields: '" + std::string(text) +
                                     "' cannot be indexed: declare reported/<path> or desired/<path> (optionally @ts "
                                     "or @changed), name, _modified, _reportedVersion, _desiredVersion or _pending",
                                 "fields");
  }
  return p;
}

namespace {

std::vector<IndexValue> to_index_values(const std::vector<Sample>& samples) {
  using T = IndexValue::Type;
  std::vector<IndexValue> out;
  for (const Sample& s : samples) {
    switch (s.type) {
      case Sample::Type::null: out.push_back({T::null}); break;
      case Sample::Type::boolean: out.push_back({T::boolean, s.json.get_bool() ? 1 : 0}); break;
      case Sample::Type::number: out.push_back(index_number(s.json)); break;
      case Sample::Type::string: {
        const std::string_view text = s.json.get_string();
        if (auto t = parse_rfc3339(text)) out.push_back(IndexValue::of_time(t->unix_nanos()));
        out.push_back({T::string, 0, 0, false, std::string(text)});
        break;
      }
      case Sample::Type::time: out.push_back(IndexValue::of_time(s.time.unix_nanos())); break;
      case Sample::Type::other: break;
    }
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

// The JSON Pointer of a section path without a suffix ("" for anything else): a change of
// exactly that leaf tells what the field held and holds.
std::string leaf_pointer(const Property& p) {
  if (is_pseudo(p) || p.suffix != Property::Suffix::none) return {};
  std::string out;
  for (const std::string& token : p.path) {
    out += '/';
    for (char c : token) out += c == '~' ? "~0" : c == '/' ? "~1" : std::string(1, c);
  }
  return out;
}

}  // namespace

// A shadow's entries of a field from the values it holds: those, or `absent` when it holds
// none; none when it does not exist.
std::vector<IndexValue> entries(std::vector<IndexValue> values, bool exists) {
  if (!exists) return {};
  if (values.empty()) values.push_back({IndexValue::Type::absent});
  return values;
}

std::vector<IndexValue> index_values(const Subject& subject, const Property& property) {
  return entries(to_index_values(samples(subject, property)), subject.record().exists());
}

IndexKeeper::IndexKeeper(Store& store, const TimestampKeys& keys, IndexKeeperOptions options)
    : store_(store), keys_(keys), options_(options) {
  try {
    // A field still building may be new to processes that have not read it yet: its build waits too.
    adopt(store_.index_fields(), true);
  } catch (const std::exception&) {
    if (options_.refresh.count() == 0) throw;  // a shared store is read again at the next refresh
  }
  builder_ = std::thread([this] { build_loop(); });
}

// Under fields_mutex_: shared for the same generation (the ready flags only), else exclusive.
void IndexKeeper::adopt(const IndexDeclaration& stored, bool grace) {
  if (stored.generation < generation_) return;  // read before a declaration of ours
  if (stored.generation == generation_ && stored.generation != 0) {  // the same list: another process's progress
    for (const IndexFieldState& s : stored.fields) {
      for (const auto& f : fields_) {
        if (f->property.text == s.field && s.ready) f->ready = true;
      }
    }
    return;
  }
  std::vector<std::shared_ptr<Field>> next;
  bool building = false;
  for (const IndexFieldState& s : stored.fields) {
    auto kept = std::find_if(fields_.begin(), fields_.end(), [&](const auto& f) { return f->property.text == s.field; });
    if (kept != fields_.end()) {
      next.push_back(*kept);
    } else {
      auto f = std::make_shared<Field>();
      f->property = parse_index_field(s.field);
      f->pointer = leaf_pointer(f->property);
      f->indexed = s.indexed;
      if (grace) f->build_after = std::chrono::steady_clock::now() + options_.grace;
      next.push_back(std::move(f));
    }
    next.back()->ready = s.ready;  // as stored: a field declared again is not the one built before
    building = building || !next.back()->ready;
  }
  fields_ = std::move(next);
  generation_ = stored.generation;
  std::lock_guard lock(build_mutex_);
  ++changes_;
  building_ = building_ || building;
  build_cv_.notify_all();
}

void IndexKeeper::reload() {
  const IndexDeclaration stored = store_.index_fields();
  {
    std::shared_lock lock(fields_mutex_);
    if (stored.generation == generation_ && stored.generation != 0) return adopt(stored, true);  // progress only
  }
  std::unique_lock lock(fields_mutex_);
  adopt(stored, true);
}

IndexKeeper::~IndexKeeper() {
  {
    std::lock_guard lock(build_mutex_);
    stopping_ = true;
  }
  build_cv_.notify_all();
  builder_.join();
}

std::vector<IndexFieldState> IndexKeeper::states() const {
  std::vector<IndexFieldState> out;
  for (const auto& f : fields_) out.push_back({f->property.text, f->ready.load(), f->indexed.load()});
  return out;
}

void IndexKeeper::persist() {
  std::lock_guard lock(persist_mutex_);
  const std::vector<IndexFieldState> now = states();
  generation_ = store_.put_index_fields(now, generation_);
}

std::vector<IndexFieldState> IndexKeeper::declare(const std::vector<std::string>& fields) {
  if (fields.size() > kMaxIndexFields) {
    throw Error::invalid_request("fields: at most " + std::to_string(kMaxIndexFields) + " fields may be declared", "fields");
  }
  std::vector<Property> wanted;
  for (const std::string& text : fields) {
    wanted.push_back(parse_index_field(text));
    if (std::count(fields.begin(), fields.end(), text) > 1) {
      throw Error::invalid_request("fields: '" + text + "' is declared twice", "fields");
    }
  }
  // Exclusive: the writes in flight end first, and every later one sees the new list.
  std::unique_lock lock(fields_mutex_);
  for (int attempt = 1;; ++attempt) {
    std::vector<std::shared_ptr<Field>> next;
    for (const Property& p : wanted) {
      auto kept = std::find_if(fields_.begin(), fields_.end(), [&](const auto& f) { return f->property.text == p.text; });
      if (kept != fields_.end()) {
        next.push_back(*kept);
      } else {
        next.push_back(std::make_shared<Field>());
        next.back()->pointer = leaf_pointer(p);
        next.back()->property = p;
        next.back()->build_after = std::chrono::steady_clock::now() + options_.grace;
      }
    }
    std::swap(fields_, next);
    try {
      persist();  // drops the entries of the fields left out
    } catch (const IndexDeclarationChanged&) {  // another process declared since we read: read it, then replace it
      std::swap(fields_, next);
      if (attempt == 3) throw Error(ErrorCode::unavailable, "fields: other processes keep changing the declared indexes; try again");
      adopt(store_.index_fields(), true);
      continue;
    } catch (...) {
      std::swap(fields_, next);
      throw;
    }
    {
      std::lock_guard build_lock(build_mutex_);
      ++changes_;
      building_ = building_ || std::any_of(fields_.begin(), fields_.end(), [](const auto& f) { return !f->ready; });
    }
    build_cv_.notify_all();
    std::vector<IndexFieldState> out = states();
    lock.unlock();  // writes go on while the entries of the fields left out are deleted
    store_.remove_undeclared_entries();
    return out;
  }
}

std::vector<IndexFieldState> IndexKeeper::status() const {
  std::shared_lock lock(fields_mutex_);
  return states();
}

bool IndexKeeper::ready(std::string_view text) const {
  std::shared_lock lock(fields_mutex_);
  return std::any_of(fields_.begin(), fields_.end(), [&](const auto& f) { return f->property.text == text && f->ready; });
}

void IndexKeeper::wait_until_built() {
  for (;;) {
    {
      std::lock_guard lock(build_mutex_);
      if (!building_) return;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

std::vector<IndexUpdate> IndexKeeper::updates(const ShadowKey& key, const ShadowRecord& before, const ShadowWrite& write,
                                              std::span<const Change> changes) {
  std::vector<IndexUpdate> out;
  std::optional<ShadowRecord> after;
  std::optional<Subject> old_subject, new_subject;
  for (const auto& f : fields_) {  // the caller holds hold()
    if (!affected(f->property, before, write, changes)) continue;
    std::vector<IndexValue> was, is;
    if (const Change* c = only_change(*f, write, changes)) {
      // The common case, a write of exactly the declared leaf: its change has both values (the
      // shadow exists after it).
      was = entries(c->old_value ? to_index_values(samples_of(*c->old_value, keys_)) : std::vector<IndexValue>(), before.exists());
      is = entries(c->new_value ? to_index_values(samples_of(*c->new_value, keys_)) : std::vector<IndexValue>(), true);
    } else {
      if (!new_subject) {
        after = before;
        for (const SectionPut& put : write.sections) after->section(put.section) = put.record;
        old_subject.emplace(key, before, keys_);
        new_subject.emplace(key, *after, keys_);
      }
      was = index_values(*old_subject, f->property);
      is = index_values(*new_subject, f->property);
    }
    IndexUpdate u{f->property.text, {}, {}};
    std::set_difference(was.begin(), was.end(), is.begin(), is.end(), std::back_inserter(u.removed));
    std::set_difference(is.begin(), is.end(), was.begin(), was.end(), std::back_inserter(u.added));
    if (!u.removed.empty() || !u.added.empty()) out.push_back(std::move(u));
  }
  return out;
}

// The one change that decides what a leaf field holds after `write`, if there is one: the
// write's only change under the field's top-level member, of exactly the field's leaf, in a
// section the write does not delete.
const Change* IndexKeeper::only_change(const Field& f, const ShadowWrite& write, std::span<const Change> changes) {
  if (f.pointer.empty()) return nullptr;
  const Section section = section_of(f.property);
  for (const SectionPut& put : write.sections) {
    if (put.section == section && put.record.deleted) return nullptr;
  }
  const Change* only = nullptr;
  for (const Change& c : changes) {
    if (c.section != section || first_token(c.path) != f.property.path.front()) continue;
    if (only || c.path != f.pointer) return nullptr;
    only = &c;
  }
  return only;
}

void IndexKeeper::build_loop() {
  std::string last_build_error;  // the reason last told (on_build_error) since the build last passed
  std::chrono::steady_clock::time_point last_told;
  for (;;) {
    std::uint64_t seen = 0;
    {
      std::unique_lock lock(build_mutex_);
      const auto wake = [&] { return stopping_ || building_; };
      if (options_.refresh.count() == 0) {
        build_cv_.wait(lock, wake);
      } else if (!build_cv_.wait_for(lock, options_.refresh, wake)) {
        lock.unlock();
        try {
          reload();
        } catch (const std::exception&) {  // the store failed: the next refresh tries again
        }
        continue;
      }
      if (stopping_) return;
      seen = changes_;
    }
    bool done = false;
    try {
      done = build_pass(seen);
      last_build_error.clear();
    } catch (const IndexDeclarationChanged&) {  // another process declared: build what it declared
      try {
        reload();
      } catch (const std::exception&) {
      }
      continue;
    } catch (const std::exception& e) {  // the store failed: try again a little later
      // Told when the reason changes, and at most once a minute (a store's message may carry a
      // request id of its own each time).
      const auto now = std::chrono::steady_clock::now();
      if (e.what() != last_build_error && (last_build_error.empty() || now - last_told >= std::chrono::minutes(1))) {
        last_build_error = e.what();
        last_told = now;
        if (options_.on_build_error) options_.on_build_error(last_build_error);
      }
      std::unique_lock lock(build_mutex_);
      build_cv_.wait_for(lock, std::chrono::seconds(1), [&] { return stopping_; });
      continue;
    }
    std::lock_guard lock(build_mutex_);
    if (done && changes_ == seen) building_ = false;
  }
}

// Indexes every live shadow for the fields still building, then marks them ready. False when a
// declaration or the destructor interrupted it (the next pass starts over).
bool IndexKeeper::build_pass(std::uint64_t seen) {
  std::vector<std::shared_ptr<Field>> todo;
  std::chrono::steady_clock::time_point build_after;
  {
    std::shared_lock lock(fields_mutex_);
    for (const auto& f : fields_) {
      if (!f->ready) todo.push_back(f), f->indexed = 0, build_after = std::max(build_after, f->build_after);
    }
  }
  auto interrupted = [&] {
    std::lock_guard lock(build_mutex_);
    return stopping_ || changes_ != seen;
  };
  {
    std::unique_lock lock(build_mutex_);
    if (build_cv_.wait_until(lock, build_after, [&] { return stopping_ || changes_ != seen; })) return false;
  }
  std::size_t since_persist = 0;
  std::vector<ShadowKey> pending;  // read and indexed kBuildChunk at a time, across things
  auto flush = [&] {
    // A shadow written after it was read is read again: that write stored only the entries it
    // changed, which need not be all of them.
    while (!pending.empty()) {
      const std::vector<ShadowRecord> records = store_.read(pending);
      std::vector<IndexedShadow> batch;
      for (std::size_t i = 0; i < pending.size(); ++i) {
        if (!records[i].exists()) continue;
        IndexedShadow& s = batch.emplace_back(IndexedShadow{pending[i], records[i].reported.version, records[i].desired.version, {}});
        Subject subject(pending[i], records[i], keys_);
        for (const auto& f : todo) s.updates.push_back({f->property.text, {}, index_values(subject, f->property)});
      }
      std::vector<ShadowKey> moved;
      {
        std::shared_lock lock(fields_mutex_);  // a declaration in between drops nothing we add back
        if (interrupted()) return false;
        moved = store_.put_index_entries(batch);
      }
      for (const auto& f : todo) f->indexed += batch.size() - moved.size();
      since_persist += batch.size() - moved.size();
      pending = std::move(moved);
    }
    if (since_persist >= kPersistEvery) {
      since_persist = 0;
      std::shared_lock lock(fields_mutex_);
      persist();
    }
    return true;
  };
  std::optional<ShadowKey> last;
  for (bool more = !todo.empty(); more;) {
    const std::vector<ShadowKey> keys = store_.list_shadow_keys(last ? &*last : nullptr, kBuildChunk);
    for (const ShadowKey& key : keys) {
      pending.push_back(key);
      if (pending.size() == kBuildChunk && !flush()) return false;
    }
    more = keys.size() == kBuildChunk;
    if (more) last = keys.back();
  }
  if (!pending.empty() && !flush()) return false;
  std::shared_lock lock(fields_mutex_);
  if (interrupted()) return false;
  for (const auto& f : todo) f->ready = true;
  persist();
  return true;
}

}  // namespace deviceshadow::query
