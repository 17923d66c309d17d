#include "deviceshadow/engine.hpp"

#include "deviceshadow/backoff.hpp"
#include "deviceshadow/event_id.hpp"

#include "deviceshadow/arena.hpp"
#include "deviceshadow/leaf_times.hpp"
#include "deviceshadow/render.hpp"
#include "deviceshadow/time_travel.hpp"
#include "deviceshadow/validation.hpp"

#include <algorithm>
#include <utility>
#include <array>
#include <atomic>
#include <limits>
#include <list>
#include <unordered_map>
#include <cstdio>
#include <mutex>
#include <random>
#include <thread>

namespace deviceshadow {
namespace {

// A pinned version that differs from the one a fresh read gives: the write is refused, not tried
// again (a store's version_conflict is, since it may come from the section a write does not store).
struct PinnedConflict {
  Error error;
};

std::mt19937_64& rng() {
  thread_local std::mt19937_64 generator{std::random_device{}()};
  return generator;
}

// 128 random bits as hex: identifies the write that produced a record.
std::string random_write_id() {
  char buf[33];
  std::snprintf(buf, sizeof buf, "%016llx%016llx", static_cast<unsigned long long>(rng()()),
                static_cast<unsigned long long>(rng()()));
  return buf;
}


std::size_t checked_limit(std::size_t limit) {
  if (limit < 1 || limit > kMaxPageLimit) {
    throw Error::invalid_request("limit must be between 1 and " + std::to_string(kMaxPageLimit), "limit");
  }
  return limit;
}

constexpr char kBase64Url[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

// `retention` after ts, in ns since the epoch; saturates, so a retention of centuries never
// expires rather than overflowing.
std::int64_t expiry(std::int64_t ts, std::chrono::seconds retention) {
  constexpr std::int64_t kMax = std::numeric_limits<std::int64_t>::max();
  constexpr std::int64_t kNanosPerSecond = 1'000'000'000;
  if (retention.count() >= kMax / kNanosPerSecond) return kMax;
  const std::int64_t ns = retention.count() * kNanosPerSecond;
  return ts > kMax - ns ? kMax : ts + ns;
}

// A write's change-feed entry (FeedEntry): its change event and each stored section's old and
// new state. `before` is the shadow as the write read it.
std::string feed_entry(const HistoryEvent& event, const ShadowWrite& write, const ShadowRecord& before) {
  std::string entry = "{\"event\":" + event.json;
  for (const SectionPut& put : write.sections) {
    const SectionRecord& old = before.section(put.section);
    entry += ",\"";
    entry += to_string(put.section);
    entry += "\":{\"old\":";
    entry += old.exists() ? old.state_json : "{}";
    entry += ",\"new\":";
    entry += put.record.state_json;  // "{}" for a tombstone
    entry += '}';
  }
  entry += '}';
  return entry;
}

// Images are also taken when the history events written since the last one outweigh the state
// and this many bytes: replaying more than that costs more than reading an image, and the floor
// keeps the images of a small state to a fraction of its history's bytes (state / floor).
constexpr std::size_t kImageFloorBytes = 4 << 10;

// Adds a write's change event to it: as its history event when history is on (with an image of
// the shadow after it about every history_image_every events, and when the events since the
// last image outweigh the state), inside its feed entry while the change feed is on. Returns the
// feed entry when a write listener (`told`) wants it, "" otherwise. `before` is the shadow as the
// write read it; `shared`: the store's sections share one version; `unimaged_bytes`: the bytes of
// events since the shadow's last image as far as this process knows, updated.
std::string attach_event(ShadowWrite& write, HistoryEvent event, const ShadowRecord& before, const EngineOptions& options,
                         bool shared, bool feed, bool told, std::size_t& unimaged_bytes) {
  std::string entry = feed || told ? feed_entry(event, write, before) : std::string();
  if (feed) write.feed = told ? entry : std::move(entry);
  if (options.history) {
    // Every event moves the sum of the section versions (the one version when they share it) by
    // one or two: an image at the shadow's first event and each time the sum passes a multiple of
    // K, so about every K events, and every moment has an image at most about K events before it.
    const std::size_t k = options.history_image_every;
    std::uint64_t versions_before[2] = {before.reported.version, before.desired.version};
    std::uint64_t versions_after[2] = {versions_before[0], versions_before[1]};
    for (const SectionPut& put : write.sections) versions_after[put.section == Section::reported ? 0 : 1] = put.record.version;
    auto count = [&](const std::uint64_t (&v)[2]) { return shared ? std::max(v[0], v[1]) : v[0] + v[1]; };
    std::size_t state_bytes = before.reported.state_json.size() + before.desired.state_json.size();
    for (const SectionPut& put : write.sections) {
      state_bytes = state_bytes - before.section(put.section).state_json.size() + put.record.state_json.size();
    }
    unimaged_bytes += event.json.size();
    if (k > 0 && (count(versions_before) == 0 || count(versions_after) / k != count(versions_before) / k ||
                  (unimaged_bytes > state_bytes && unimaged_bytes > kImageFloorBytes))) {
      ShadowRecord after = before;
      for (const SectionPut& put : write.sections) after.section(put.section) = put.record;
      write.image = StateImage{event.id, event.expires_ns, encode_image(after)};
      unimaged_bytes = 0;
    }
    write.event = std::move(event);
  }
  return told ? entry : std::string();
}

// The section a one-section write leaves alone, as the writer read it (ShadowWrite::unchanged).
const SectionRecord* unchanged_section(const ShadowWrite& write, const ShadowRecord& read) {
  return write.sections.size() == 1 ? &read.section(other(write.sections.front().section)) : nullptr;
}

// After a write to a store whose sections share one version (DynamoDB's combined layout): both
// sections show `version`; one never written stays absent, as the store reads it back.
void share_version(ShadowRecord& record, std::uint64_t version) {
  for (Section s : {Section::reported, Section::desired}) {
    SectionRecord& r = record.section(s);
    if (r.version == 0) r.deleted = true;
    r.version = version;
  }
}

}  // namespace

std::string encode_cursor(std::string_view key) {
  std::string out;
  std::uint32_t buffer = 0;
  int bits = 0;
  for (unsigned char c : key) {
    buffer = (buffer << 8) | c;
    bits += 8;
    while (bits >= 6) {
      bits -= 6;
      out += kBase64Url[(buffer >> bits) & 0x3F];
    }
  }
  if (bits > 0) out += kBase64Url[(buffer << (6 - bits)) & 0x3F];
  return out;
}

std::string decode_cursor(std::string_view cursor) {
  std::string out;
  std::uint32_t buffer = 0;
  int bits = 0;
  for (char c : cursor) {
    const char* p = std::char_traits<char>::find(kBase64Url, 64, c);
    if (!p) throw Error::invalid_request("malformed cursor", "cursor");
    buffer = (buffer << 6) | static_cast<std::uint32_t>(p - kBase64Url);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out += static_cast<char>((buffer >> bits) & 0xFF);
    }
  }
  if (bits >= 6 || (buffer & ((1u << bits) - 1)) != 0) throw Error::invalid_request("malformed cursor", "cursor");
  return out;
}

struct ShadowKeyHash {
  std::size_t operator()(const ShadowKey& k) const noexcept {
    return std::hash<std::string>{}(k.thing) * 31 + std::hash<std::string>{}(k.name);
  }
};

// A bounded LRU map of the last known record of each shadow. Thread-safe.
class RecordCache {
 public:
  explicit RecordCache(std::size_t capacity) : capacity_(capacity) {}

  std::optional<ShadowRecord> get(const ShadowKey& key) {
    std::lock_guard lock(mutex_);
    auto it = index_.find(key);
    if (it == index_.end()) return std::nullopt;
    entries_.splice(entries_.begin(), entries_, it->second);
    return it->second->record;
  }
  // Bytes of history events this process wrote for the shadow since its last image (0 when
  // not cached: the count then starts again).
  std::size_t unimaged_bytes(const ShadowKey& key) {
    std::lock_guard lock(mutex_);
    auto it = index_.find(key);
    return it == index_.end() ? 0 : it->second->unimaged_bytes;
  }
  // `unimaged_bytes`: nullopt keeps the count.
  void put(const ShadowKey& key, const ShadowRecord& record, std::optional<std::size_t> unimaged_bytes = std::nullopt) {
    if (capacity_ == 0) return;
    std::lock_guard lock(mutex_);
    if (auto it = index_.find(key); it != index_.end()) {
      it->second->record = record;
      if (unimaged_bytes) it->second->unimaged_bytes = *unimaged_bytes;
      entries_.splice(entries_.begin(), entries_, it->second);
      return;
    }
    entries_.push_front({key, record, unimaged_bytes.value_or(0)});
    index_[key] = entries_.begin();
    if (entries_.size() > capacity_) {
      index_.erase(entries_.back().key);
      entries_.pop_back();
    }
  }
  void erase(const ShadowKey& key) {
    std::lock_guard lock(mutex_);
    if (auto it = index_.find(key); it != index_.end()) {
      entries_.erase(it->second);
      index_.erase(it);
    }
  }

 private:
  struct Entry {
    ShadowKey key;
    ShadowRecord record;
    std::size_t unimaged_bytes = 0;
  };
  std::size_t capacity_;
  std::mutex mutex_;
  std::list<Entry> entries_;  // most recently used first
  std::unordered_map<ShadowKey, std::list<Entry>::iterator, ShadowKeyHash> index_;
};

class Engine::Impl {
 public:
  RecordCache cache;

  Impl(const EngineOptions& options, EngineStats& stats)
      : cache(options.cache_entries), options_(options), stats_(stats) {}

  // Writers to one shadow hold its stripe; 4096 stripes keep unrelated shadows apart.
  std::mutex& lock_for(const ShadowKey& key) {
    return stripes_[ShadowKeyHash{}(key) % stripes_.size()];
  }

  // A write's time: the server's clock made strictly increasing within this process, or just
  // after the newest section of `record` (the shadow as the write read it) when that is later,
  // for this write alone: a shadow written by a process whose clock runs ahead moves only its own
  // writes' times. With the write's condition that the section it does not store is still as
  // read (made whenever history is written with the write), one shadow's event ids then grow with
  // its commits even when several processes, their clocks a little apart, write its sections.
  std::int64_t next_timestamp(const ShadowRecord& record) {
    const std::int64_t now = options_.clock();
    std::int64_t last = last_timestamp_.load();
    std::int64_t next;
    do {
      next = std::max(now, last + 1);
    } while (!last_timestamp_.compare_exchange_weak(last, next));
    const std::int64_t newest = std::max(record.reported.timestamp_ns, record.desired.timestamp_ns);
    return newest < next || newest == std::numeric_limits<std::int64_t>::max() ? next : newest + 1;
  }

  // Runs fn (one read-merge-write attempt), again on a version conflict (a store's condition
  // failed: fn reads afresh and decides again), up to max_attempts; a pinned version that
  // differs from a fresh read (PinnedConflict) is final.
  template <class F>
  auto with_retries(F&& fn) {
    for (int attempt = 1;; ++attempt) {
      try {
        return fn();
      } catch (const PinnedConflict& c) {
        ++stats_.conflicts;
        throw c.error;
      } catch (const Error& e) {
        if (e.code() != ErrorCode::version_conflict) throw;
        if (attempt >= options_.max_attempts) {
          ++stats_.conflicts;
          throw;
        }
      }
      ++stats_.retries;
      sleep_before_retry(attempt, options_.backoff_base, options_.backoff_max);
    }
  }

 private:
  const EngineOptions& options_;
  EngineStats& stats_;
  std::array<std::mutex, 4096> stripes_;
  std::atomic<std::int64_t> last_timestamp_{0};
};

Engine::Engine(Store& store, EngineOptions options) : store_(store), options_(std::move(options)) {
  if (!options_.clock) {
    options_.clock = [] { return now().unix_nanos(); };
  }
  if (options_.max_attempts < 1) options_.max_attempts = 1;
  if (options_.batch_parallelism < 1) options_.batch_parallelism = 1;
  impl_ = std::make_unique<Impl>(options_, stats_);
}

Engine::~Engine() = default;

ShadowView Engine::get(const ShadowKey& key) {
  validate_key(key);
  return view_of(key, store_.read(key));
}

std::optional<ShadowView> Engine::try_get(const ShadowKey& key) {
  validate_key(key);
  std::optional<ShadowRecord> record = store_.try_read(key);
  if (!record) return std::nullopt;
  return view_of(key, std::move(*record));
}

ShadowView Engine::view_of(const ShadowKey& key, ShadowRecord record) {
  impl_->cache.put(key, record);
  if (!record.exists()) throw Error::not_found("no shadow " + key.name + " for thing " + key.thing);
  json::object delta = compute_delta(section_state(record.desired), section_state(record.reported),
                                     options_.document.timestamp_keys);
  return {key, std::move(record), std::move(delta)};
}

std::uint64_t shadow_version(const ShadowRecord& record, bool shared_versions) noexcept {
  return shared_versions ? std::max(record.reported.version, record.desired.version)
                         : record.reported.version + record.desired.version;
}

void validate_key(const ShadowKey& key) {
  validate_thing(key.thing);
  validate_shadow_name(key.name);
}

json::object section_state(const SectionRecord& section, json::storage_ptr sp) {
  if (!section.exists()) return json::object(std::move(sp));
  json::value v = parse_stored_json(section.state_json, std::move(sp));
  if (!v.is_object()) throw Error(ErrorCode::internal, "stored state is not a JSON object");
  return std::move(v.get_object());
}

// What both forms of update come down to: one or two sections, each with its incoming state.
struct Engine::UpdatePlan {
  struct Part {
    Section section;
    const json::object* state;
    MergeMode mode;
    bool remove;
    const std::optional<std::string>* tz;  // a time zone to set, if it holds one
  };
  const ShadowKey& key;
  std::array<Part, 2> parts;
  std::size_t count;
  std::optional<std::uint64_t> section_pin;  // the version of parts[0]'s section
  std::optional<std::uint64_t> shadow_pin;   // the shadow version
  const std::string& client_token;
  bool acknowledge;
  bool replace_arrays;
  bool always_store;
  bool keep_previous;
  WriteSource source;
  const ShadowRecord* base = nullptr;  // ShadowUpdate::base

  std::span<const Part> named() const { return {parts.data(), count}; }
  const Part* part(Section s) const {
    for (const Part& p : named()) {
      if (p.section == s) return &p;
    }
    return nullptr;
  }
};

UpdateResult Engine::update(const UpdateRequest& request) {
  return run(UpdatePlan{request.key,
                        {{{request.section, &request.state, request.mode, false, &request.tz}}},
                        1,
                        request.version,
                        std::nullopt,
                        request.client_token,
                        request.acknowledge,
                        false,
                        false,
                        false,
                        WriteSource::api});
}

UpdateResult Engine::update(const ShadowUpdate& request) {
  static const std::optional<std::string> no_tz;  // AWS IoT writes set none
  UpdatePlan plan{request.key, {}, 0, std::nullopt, request.version, request.client_token,
                  request.acknowledge, request.replace_arrays, request.always_store, request.keep_previous,
                  request.source};
  for (Section s : {Section::reported, Section::desired}) {
    const std::optional<SectionUpdate>& part = s == Section::reported ? request.reported : request.desired;
    if (part) plan.parts[plan.count++] = {s, &part->state, part->mode, part->remove, &no_tz};
  }
  plan.base = request.base;
  if (plan.count == 0) throw Error::invalid_request("an update names reported, desired or both");
  return run(plan);
}

UpdateResult Engine::run(const UpdatePlan& plan) {
  validate_key(plan.key);
  validate_client_token(plan.client_token);
  for (const UpdatePlan::Part& part : plan.named()) {
    if (*part.tz) validate_tz(**part.tz);
  }
  const DocumentOptions& doc = options_.document;
  const bool shared = store_.shares_versions();
  std::lock_guard guard(impl_->lock_for(plan.key));

  // One read-merge-write on `record`; nullopt when a cached record cannot decide (a pinned
  // version differs, or nothing would be written) and a fresh read must.
  auto attempt_on = [&](ShadowRecord record, bool fresh) -> std::optional<UpdateResult> {
    std::size_t unimaged_bytes = impl_->cache.unimaged_bytes(plan.key);
    const std::uint64_t pinned_now = plan.section_pin ? record.section(plan.parts[0].section).version
                                                      : shadow_version(record, shared);
    if (const auto& pin = plan.section_pin ? plan.section_pin : plan.shadow_pin; pin && *pin != pinned_now) {
      if (!fresh) return std::nullopt;
      throw PinnedConflict{Error::version_conflict(pinned_now)};
    }
    // One arena per attempt; the values in the result keep it alive.
    json::storage_ptr arena = json::make_shared_resource<Arena>();
    std::vector<SectionInput> inputs;  // built in place: assigning would copy out of the arena
    inputs.reserve(plan.count);
    for (const UpdatePlan::Part& part : plan.named()) {
      // A removal merges nothing with client_is_master: every leaf goes, as a change.
      if (part.remove) {
        inputs.push_back({part.section, json::object(arena), MergeMode::client_is_master});
      } else {
        inputs.push_back({part.section, json::object(*part.state, arena), part.mode});
      }
    }
    UpdateOutcome outcome = apply_update(section_state(record.reported, arena), section_state(record.desired, arena), inputs,
                                         {plan.acknowledge, plan.replace_arrays}, doc);
    // Whether section s is stored, and why beyond a change of its state: setting the time zone
    // is a change even when the state is unchanged, and so is removing a live section.
    auto stores = [&](Section s) {
      if (s == Section::reported ? outcome.reported_changed : outcome.desired_changed) return true;
      const UpdatePlan::Part* part = plan.part(s);
      if (!part) return false;
      const SectionRecord& old = record.section(s);
      return plan.always_store || (part->remove && old.exists()) ||
             (*part->tz && (**part->tz != old.tz || !old.exists()));
    };
    const bool store_reported = stores(Section::reported), store_desired = stores(Section::desired);

    UpdateResult result;
    result.changed = store_reported || store_desired;
    if (!result.changed && !fresh) return std::nullopt;
    if (result.changed) {
      const std::int64_t ts = impl_->next_timestamp(record);
      ShadowWrite write{plan.key, {}, std::nullopt, {}};
      for (Section s : {Section::reported, Section::desired}) {
        const SectionRecord& old = record.section(s);
        if (!(s == Section::reported ? store_reported : store_desired)) {
          // The section this write does not store must still be as read when a cached record
          // may be stale, when a shadow pin covers both sections, and when history is written
          // with the write: its images hold both sections, which must agree with the events'
          // time order (see next_timestamp).
          if (!fresh || plan.shadow_pin || options_.history) write.checks.push_back({s, old.version});
          continue;
        }
        const UpdatePlan::Part* part = plan.part(s);
        const bool state_changed = s == Section::reported ? outcome.reported_changed : outcome.desired_changed;
        SectionRecord next;
        next.version = old.version + 1;
        next.timestamp_ns = ts;
        if (part && part->remove) {
          next.deleted = true;
          next.expires_ns = expiry(ts, options_.tombstone_retention);
        } else {
          next.client_token = plan.client_token;
          next.tz = part && *part->tz ? **part->tz : (old.exists() ? old.tz : "");
          std::string& new_json = s == Section::reported ? outcome.reported_json : outcome.desired_json;
          next.state_json = state_changed ? std::move(new_json) : (old.exists() ? old.state_json : "{}");
          next.times_json = update_leaf_times(old.exists() ? std::string_view(old.times_json) : "{}", old.timestamp_ns,
                                              s == Section::reported ? outcome.reported : outcome.desired,
                                              outcome.changes, s, ts);
        }
        next.write_id = random_write_id();
        write.sections.push_back({s, old.version, std::move(next), old.exists()});
      }
      std::string change;  // the feed entry, for the write listeners
      if (const bool feed = change_feed(); options_.history || feed || !write_listeners_.empty()) {
        std::optional<std::uint64_t> versions[2];
        for (const SectionPut& put : write.sections) versions[put.section == Section::reported ? 0 : 1] = put.record.version;
        const char letter = write.sections.size() == 2 ? 'C' : write.sections.front().section == Section::reported ? 'R' : 'D';
        const std::string_view op = plan.count == 2 ? "update" : plan.parts[0].section == Section::reported ? "report" : "desire";
        HistoryEvent event;
        event.id = make_event_id(ts, letter, write.sections.front().record.version);
        event.timestamp_ns = ts;
        event.expires_ns = expiry(ts, options_.history_retention);
        ChangeEventParts parts{&plan.key, event.id, op, ts, plan.client_token, versions[0], versions[1]};
        for (const UpdatePlan::Part& part : plan.named()) {
          if (versions[part.section == Section::reported ? 0 : 1] && *part.tz) {
            (part.section == Section::reported ? parts.reported_tz : parts.desired_tz) = **part.tz;
          }
        }
        parts.changes = &outcome.changes;
        parts.acknowledged = &outcome.acknowledged;
        event.json = render_change_event(parts);
        change = attach_event(write, std::move(event), record, options_, store_.shares_versions(), feed,
                              !write_listeners_.empty(), unimaged_bytes);
      }
      write.unchanged = unchanged_section(write, record);
      store_write(write, record, outcome.changes);
      std::optional<ShadowRecord> before;
      if (plan.keep_previous || !write_listeners_.empty()) before = record;
      const std::uint64_t new_version = write.sections.front().record.version;
      for (SectionPut& put : write.sections) record.section(put.section) = std::move(put.record);
      if (shared) share_version(record, new_version);
      if (!write_listeners_.empty()) {
        WriteNotice notice{plan.key, *before, record};
        for (const UpdatePlan::Part& part : plan.named()) {
          if (!part.remove) notice.requested[part.section == Section::reported ? 0 : 1] = part.state;
        }
        notice.client_token = plan.client_token;
        notice.source = plan.source;
        notice.change = change;
        for (WriteListener* listener : write_listeners_) listener->on_write(notice);
      }
      if (plan.keep_previous) result.previous = std::move(before);
    } else if (plan.keep_previous) {
      result.previous = record;
    }
    impl_->cache.put(plan.key, record, unimaged_bytes);
    ++(result.changed ? stats_.stored_writes : stats_.unchanged_writes);
    stats_.stale_values += outcome.stale.size();
    stats_.acknowledgements += outcome.acknowledged.size();
    result.shadow = {plan.key, std::move(record), compute_delta(outcome.desired, outcome.reported, doc.timestamp_keys)};
    result.changes = std::move(outcome.changes);
    result.acknowledged = std::move(outcome.acknowledged);
    result.stale = std::move(outcome.stale);
    return result;
  };

  const ShadowRecord* base = plan.base;
  return impl_->with_retries([&] {
    if (base) {  // the caller's read, for the first attempt only
      ShadowRecord record = *std::exchange(base, nullptr);
      try {
        return std::move(*attempt_on(std::move(record), true));
      } catch (const Error& e) {
        if (e.code() == ErrorCode::version_conflict) impl_->cache.erase(plan.key);
        throw;
      }
    }
    if (std::optional<ShadowRecord> cached = impl_->cache.get(plan.key)) {
      try {
        if (auto result = attempt_on(std::move(*cached), false)) return std::move(*result);
      } catch (const Error& e) {
        if (e.code() != ErrorCode::version_conflict) throw;  // stale cache: decide on a fresh read
      }
    }
    try {
      return std::move(*attempt_on(store_.read(plan.key), true));
    } catch (const Error& e) {
      if (e.code() == ErrorCode::version_conflict) impl_->cache.erase(plan.key);
      throw;
    }
  });
}

void Engine::store_write(ShadowWrite& write, const ShadowRecord& before, std::span<const Change> changes) {
  if (!indexer_) return store_.write(write);
  for (;;) {
    {
      std::shared_lock<std::shared_mutex> hold = indexer_->hold();
      write.index = indexer_->updates(write.key, before, write, changes);
      write.index_generation = indexer_->generation();
      // Entries are decided from both sections as read (whether the shadow exists, pseudo
      // fields): on a store that processes share, the section not written must still be so.
      if (write.index_generation != 0 && !write.index.empty()) {
        for (Section s : {Section::reported, Section::desired}) {
          const auto is = [s](const auto& x) { return x.section == s; };
          if (std::none_of(write.sections.begin(), write.sections.end(), is) && std::none_of(write.checks.begin(), write.checks.end(), is)) {
            write.checks.push_back({s, before.section(s).version});
          }
        }
      }
      try {
        return store_.write(write);
      } catch (const IndexDeclarationChanged&) {  // another process declared: decide again
      }
    }
    indexer_->reload();
    // A new attempt with other items: new ids (DynamoDB's request token is the write id).
    for (SectionPut& put : write.sections) put.record.write_id = random_write_id();
  }
}

DeleteResult Engine::remove(const ShadowKey& key, std::optional<Section> section, std::optional<std::uint64_t> version,
                            WriteSource source) {
  validate_key(key);
  if (version && !section) {
    throw Error::invalid_request("version applies to a single-section delete: name reported or desired", "version");
  }
  const DocumentOptions& doc = options_.document;
  std::lock_guard guard(impl_->lock_for(key));
  return impl_->with_retries([&] {
    const bool feed = change_feed();
    std::size_t unimaged_bytes = impl_->cache.unimaged_bytes(key);
    ShadowRecord record = store_.read(key);
    if (version && *version != record.section(*section).version) {
      throw PinnedConflict{Error::version_conflict(record.section(*section).version)};
    }
    DeleteResult result{key, {}, record};
    for (Section s : {Section::reported, Section::desired}) {
      if ((!section || *section == s) && record.section(s).exists()) result.deleted.push_back(s);
    }
    if (result.deleted.empty()) {
      throw Error::not_found("nothing to delete: " + std::string(section ? to_string(*section) : "shadow " + key.name) +
                             " of thing " + key.thing + " does not exist");
    }
    const std::int64_t ts = impl_->next_timestamp(record);
    ShadowWrite write{key, {}, std::nullopt, {}};
    std::vector<Change> changes;
    std::optional<std::uint64_t> versions[2];
    for (Section s : {Section::reported, Section::desired}) {  // the section kept, as for an update
      if (options_.history && std::find(result.deleted.begin(), result.deleted.end(), s) == result.deleted.end()) {
        write.checks.push_back({s, record.section(s).version});
      }
    }
    for (Section s : result.deleted) {
      const SectionRecord& old = record.section(s);
      SectionRecord tombstone;
      tombstone.version = old.version + 1;
      tombstone.deleted = true;
      tombstone.timestamp_ns = ts;
      tombstone.write_id = random_write_id();
      tombstone.expires_ns = expiry(ts, options_.tombstone_retention);
      versions[s == Section::reported ? 0 : 1] = tombstone.version;
      if (options_.history || feed || !write_listeners_.empty()) {  // every leaf of the deleted state is a remove
        json::object state = section_state(old);
        MergeResult removed = merge_section(state, json::object(), MergeMode::client_is_master, s, doc.timestamp_keys);
        for (Change& c : removed.changes) changes.push_back(std::move(c));
      }
      write.sections.push_back({s, old.version, tombstone, true});
      result.record.section(s) = std::move(tombstone);
    }
    std::string change;  // the feed entry, for the write listeners
    if (options_.history || feed || !write_listeners_.empty()) {
      HistoryEvent event;
      event.id = make_event_id(ts, 'X', write.sections.front().record.version);
      event.timestamp_ns = ts;
      event.expires_ns = expiry(ts, options_.history_retention);
      event.json = render_change_event({&key, event.id, "delete", ts, "", versions[0], versions[1], {}, {}, &changes, nullptr});
      change = attach_event(write, std::move(event), record, options_, store_.shares_versions(), feed,
                            !write_listeners_.empty(), unimaged_bytes);
    }
    write.unchanged = unchanged_section(write, record);
    impl_->cache.erase(key);
    store_write(write, record, {});  // removed sections: every leaf changed
    if (store_.shares_versions()) share_version(result.record, write.sections.front().record.version);
    if (!write_listeners_.empty()) {
      WriteNotice notice{key, record, result.record};
      notice.shadow_deleted = !section;
      notice.source = source;
      notice.change = change;
      for (WriteListener* listener : write_listeners_) listener->on_write(notice);
    }
    impl_->cache.put(key, result.record, unimaged_bytes);
    ++stats_.stored_writes;
    return result;
  });
}

ShadowList Engine::list_shadows(const std::string& thing, std::size_t limit, const std::string& cursor) {
  validate_thing(thing);
  ShadowList list;
  list.shadows = store_.list_shadows(thing, decode_cursor(cursor), checked_limit(limit) + 1);
  if (list.shadows.size() > limit) {
    list.shadows.resize(limit);
    list.cursor = encode_cursor(list.shadows.back().name);
  }
  return list;
}

ThingList Engine::list_things(const std::string& prefix, std::size_t limit, const std::string& cursor) {
  if (!prefix.empty()) validate_thing(prefix);
  ThingList list;
  list.things = store_.list_things(prefix, decode_cursor(cursor), checked_limit(limit) + 1);
  if (list.things.size() > limit) {
    list.things.resize(limit);
    list.cursor = encode_cursor(list.things.back());
  }
  return list;
}

ThingList Engine::list_things(const std::string& prefix, std::size_t limit, const std::string& cursor,
                              std::span<const ThingPattern> scope) {
  if (!prefix.empty()) validate_thing(prefix);
  checked_limit(limit);
  const std::string after = decode_cursor(cursor);
  ThingList list;
  for (const ThingPattern& p : scope) {
    if (p.prefix) {
      // Names starting with both prefixes: those starting with the longer, if it extends the other.
      const std::string& longer = p.text.size() > prefix.size() ? p.text : prefix;
      const std::string& shorter = p.text.size() > prefix.size() ? prefix : p.text;
      if (longer.compare(0, shorter.size(), shorter) != 0) continue;
      std::vector<std::string> things = store_.list_things(longer, after, limit + 1);
      list.things.insert(list.things.end(), std::make_move_iterator(things.begin()), std::make_move_iterator(things.end()));
    } else if (p.text.compare(0, prefix.size(), prefix) == 0 && p.text > after) {
      // The name itself is the least one starting with it, so it comes first if it exists.
      std::vector<std::string> things = store_.list_things(p.text, after, 1);
      if (!things.empty() && things.front() == p.text) list.things.push_back(p.text);
    }
  }
  std::sort(list.things.begin(), list.things.end());
  list.things.erase(std::unique(list.things.begin(), list.things.end()), list.things.end());
  if (list.things.size() > limit) {
    list.things.resize(limit);
    list.cursor = encode_cursor(list.things.back());
  }
  return list;
}

HistoryEvent history_event_of(std::string_view change_event, std::chrono::seconds retention) {
  const json::value event = parse_json(change_event);
  const json::value* member = event.is_object() ? event.as_object().if_contains("id") : nullptr;
  const json::string* id = member ? member->if_string() : nullptr;
  const std::optional<std::int64_t> ts = id ? event_id_time(*id) : std::nullopt;
  if (!ts) throw Error(ErrorCode::internal, "not a change event of the engine: " + std::string(change_event.substr(0, 80)));
  return {std::string(*id), *ts, expiry(*ts, retention), std::string(change_event)};
}

HistoryPage Engine::history(const ShadowKey& key, const HistoryRequest& request) {
  validate_key(key);
  HistoryQuery query;
  query.limit = checked_limit(request.limit) + 1;
  query.descending = request.descending;
  if (request.since_ns) query.since_ns = *request.since_ns;
  if (request.until_ns) query.until_ns = *request.until_ns;
  query.after_id = decode_cursor(request.cursor);
  query.max_bytes = options_.max_page_bytes;
  HistoryPage page;
  page.events = store_.history(key, query);
  // Keep what fits the limit and the byte budget (at least one event); the store read one
  // event past either, which tells whether more follow.
  std::size_t kept = 0, bytes = 0;
  for (; kept < page.events.size() && kept < request.limit; ++kept) {
    std::size_t with_next = bytes + page.events[kept].json.size();
    if (kept > 0 && with_next > options_.max_page_bytes) break;
    bytes = with_next;
  }
  const bool more = kept < page.events.size() || bytes > options_.max_page_bytes;
  page.events.resize(kept);
  if (more && !page.events.empty()) page.cursor = encode_cursor(page.events.back().id);
  return page;
}

namespace {

void check_batch_size(std::size_t n, const Limits& limits) {
  if (n > limits.max_batch_items) {
    throw Error::invalid_request("a batch holds at most " + std::to_string(limits.max_batch_items) + " items");
  }
}

template <class T>
Outcome<T> capture(const std::function<T()>& fn) {
  try {
    return fn();
  } catch (const Error& e) {
    return e;
  } catch (const std::exception& e) {
    return Error(ErrorCode::internal, e.what());
  }
}

}  // namespace

std::vector<Outcome<ShadowView>> Engine::batch_get(const std::vector<ShadowKey>& keys) {
  check_batch_size(keys.size(), options_.document.limits);
  std::vector<Outcome<ShadowView>> out;
  out.reserve(keys.size());
  for (const ShadowKey& key : keys) out.push_back(capture<ShadowView>([&] { return get(key); }));
  return out;
}

std::vector<Outcome<UpdateResult>> Engine::batch_update(const std::vector<UpdateRequest>& requests) {
  check_batch_size(requests.size(), options_.document.limits);
  std::vector<std::optional<Outcome<UpdateResult>>> slots(requests.size());
  std::atomic<std::size_t> next{0};
  auto work = [&] {
    for (std::size_t i; (i = next.fetch_add(1)) < requests.size();) {
      slots[i] = capture<UpdateResult>([&] { return update(requests[i]); });
    }
  };
  std::size_t helpers = std::min(options_.batch_parallelism, requests.size());
  std::vector<std::jthread> threads;
  for (std::size_t t = 1; t < helpers; ++t) threads.emplace_back(work);
  work();
  threads.clear();  // joins
  std::vector<Outcome<UpdateResult>> out;
  out.reserve(requests.size());
  for (auto& slot : slots) out.push_back(std::move(*slot));
  return out;
}

std::size_t Engine::purge() { return store_.purge(options_.clock()); }

}  // namespace deviceshadow
