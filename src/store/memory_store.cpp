// The memory store's shadows (Store); its delivery state is in memory_delivery.cpp.
#include "store/memory_store.hpp"

#include "deviceshadow/memory_store.hpp"
#include "store/conditions.hpp"

#include <algorithm>
#include <limits>
#include <mutex>
#include <tuple>

namespace deviceshadow {

std::vector<ShadowRecord> MemoryStore::read(std::span<const ShadowKey> keys) {
  std::shared_lock lock(mutex_);
  std::vector<ShadowRecord> out;
  out.reserve(keys.size());
  for (const ShadowKey& key : keys) {
    auto it = shadows_.find(key);
    out.push_back(it == shadows_.end() ? ShadowRecord{} : it->second);
  }
  return out;
}

std::optional<ShadowRecord> MemoryStore::try_read(const ShadowKey& key) {
  std::shared_lock lock(mutex_, std::try_to_lock);
  if (!lock) return std::nullopt;
  auto it = shadows_.find(key);
  return it == shadows_.end() ? ShadowRecord{} : it->second;
}

void MemoryStore::write(const ShadowWrite& write) {
  {
    std::unique_lock lock(mutex_);
    auto it = shadows_.find(write.key);
    const ShadowRecord current = it == shadows_.end() ? ShadowRecord{} : it->second;
    check_conditions(current, write);
    ShadowRecord& stored = shadows_[write.key];
    for (const SectionPut& put : write.sections) stored.section(put.section) = put.record;
    if (write.event) history_[write.key][write.event->id] = *write.event;
    if (write.image) images_[write.key][write.image->event_id] = *write.image;
    if (write.feed) feed_.push_back({++last_seq_, write.key, *write.feed});
    apply_index_updates(write.key, write.index);
  }
  if (write.feed) feed_listener_.call();
}

void MemoryStore::append_history(std::span<const ShadowHistoryEvent> events) {
  std::unique_lock lock(mutex_);
  for (const ShadowHistoryEvent& e : events) history_[e.key].try_emplace(e.event.id, e.event);
}

std::optional<StateImage> MemoryStore::image_before(const ShadowKey& key, std::string_view event_id) {
  std::shared_lock lock(mutex_);
  auto images = images_.find(key);
  if (images == images_.end()) return std::nullopt;
  auto it = images->second.upper_bound(event_id);
  if (it == images->second.begin()) return std::nullopt;
  return std::prev(it)->second;
}

std::vector<ShadowSummary> MemoryStore::list_shadows(std::string_view thing, std::string_view after_name,
                                                     std::size_t limit) {
  std::shared_lock lock(mutex_);
  std::vector<ShadowSummary> out;
  for (auto it = shadows_.upper_bound(ShadowKey{std::string(thing), std::string(after_name)});
       it != shadows_.end() && it->first.thing == thing && out.size() < limit; ++it) {
    if (it->second.exists()) out.push_back(summarize(it->first.name, it->second));
  }
  return out;
}

std::vector<std::string> MemoryStore::list_things(std::string_view prefix, std::string_view after_thing,
                                                  std::size_t limit) {
  std::shared_lock lock(mutex_);
  std::vector<std::string> out;
  // Keys sort by thing first, so each thing's shadows are contiguous.
  ShadowKey start{std::string(std::max(prefix, after_thing)), ""};
  for (auto it = shadows_.lower_bound(start); it != shadows_.end() && out.size() < limit; ++it) {
    const std::string& thing = it->first.thing;
    if (thing.compare(0, prefix.size(), prefix) != 0) break;
    if (thing <= after_thing || !it->second.exists()) continue;
    if (out.empty() || out.back() != thing) out.push_back(thing);
  }
  return out;
}

std::vector<HistoryEvent> MemoryStore::history(const ShadowKey& key, const HistoryQuery& query) {
  std::shared_lock lock(mutex_);
  std::vector<HistoryEvent> out;
  auto h = history_.find(key);
  if (h == history_.end()) return out;
  std::size_t bytes = 0;
  auto accept = [&](const HistoryEvent& e) {
    if (e.timestamp_ns < query.since_ns || e.timestamp_ns > query.until_ns) return;
    out.push_back(e);
    bytes += e.json.size();
  };
  auto more = [&] { return out.size() < query.limit && bytes <= query.max_bytes; };
  const auto& events = h->second;
  const auto [low, high] = history_id_range(query);
  if (query.descending) {
    const std::string& before = query.after_id.empty() || query.after_id > high ? high : query.after_id;
    auto end = query.after_id.empty() || query.after_id > high ? events.upper_bound(before) : events.lower_bound(before);
    for (auto it = std::make_reverse_iterator(end); it != events.rend() && it->first >= low && more(); ++it) accept(it->second);
  } else {
    auto begin = query.after_id.empty() || query.after_id < low ? events.lower_bound(low) : events.upper_bound(query.after_id);
    for (auto it = begin; it != events.end() && it->first <= high && more(); ++it) accept(it->second);
  }
  return out;
}

std::vector<ShadowHistoryEvent> MemoryStore::history_since(std::int64_t since_ns, const ShadowHistoryEvent* after,
                                                          std::size_t limit) {
  auto position = [](const std::int64_t& ts, const ShadowKey& key, const std::string& id) {
    return std::tie(ts, key.thing, key.name, id);
  };
  std::shared_lock lock(mutex_);
  // Pointers to what comes after the position; only the first `limit` of them are copied.
  struct Candidate {
    const ShadowKey* key;
    const std::string* id;
    const HistoryEvent* event;
    auto position() const { return std::tie(event->timestamp_ns, key->thing, key->name, *id); }
  };
  std::vector<Candidate> candidates;
  for (const auto& [key, events] : history_) {
    for (const auto& [id, e] : events) {
      if (e.timestamp_ns < since_ns) continue;
      if (after && position(e.timestamp_ns, key, id) <= position(after->event.timestamp_ns, after->key, after->event.id)) {
        continue;
      }
      candidates.push_back({&key, &id, &e});
    }
  }
  const std::size_t n = std::min(limit, candidates.size());
  std::partial_sort(candidates.begin(), candidates.begin() + static_cast<std::ptrdiff_t>(n), candidates.end(),
                    [](const Candidate& a, const Candidate& b) { return a.position() < b.position(); });
  std::vector<ShadowHistoryEvent> out;
  out.reserve(n);
  for (std::size_t i = 0; i < n; ++i) out.push_back({*candidates[i].key, *candidates[i].event});
  return out;
}

std::size_t MemoryStore::purge(std::int64_t now_ns) {
  std::unique_lock lock(mutex_);
  std::size_t purged = 0;
  for (auto it = shadows_.begin(); it != shadows_.end();) {
    for (SectionRecord* s : {&it->second.reported, &it->second.desired}) {
      if (s->deleted && s->expires_ns <= now_ns) {
        *s = SectionRecord{};
        ++purged;
      }
    }
    it = it->second.reported.version == 0 && it->second.desired.version == 0 ? shadows_.erase(it) : std::next(it);
  }
  for (auto& [key, events] : history_) {
    purged += std::erase_if(events, [&](const auto& e) { return e.second.expires_ns <= now_ns; });
  }
  for (auto& [key, images] : images_) {
    purged += std::erase_if(images, [&](const auto& i) { return i.second.expires_ns <= now_ns; });
  }
  return purged;
}

bool MemoryStore::FieldIndex::Order::operator()(const IndexHit& a, const IndexHit& b) const noexcept {
  if (const int c = compare(a.value, b.value)) return c < 0;
  return std::tie(a.thing, a.name) < std::tie(b.thing, b.name);
}

void MemoryStore::apply_index_updates(const ShadowKey& key, std::span<const IndexUpdate> updates) {
  for (const IndexUpdate& u : updates) {
    auto index = indexes_.find(u.field);
    if (index == indexes_.end()) continue;  // no longer declared
    FieldIndex& f = index->second;
    for (const IndexValue& v : u.removed) f.entries.erase(IndexHit{v, key.thing, key.name});
    for (const IndexValue& v : u.added) f.entries.insert(IndexHit{v, key.thing, key.name});
  }
}

IndexDeclaration MemoryStore::index_fields() {
  std::shared_lock lock(mutex_);
  return {index_fields_, 0};
}

std::uint64_t MemoryStore::put_index_fields(std::span<const IndexFieldState> fields, std::uint64_t) {
  std::unique_lock lock(mutex_);
  index_fields_.assign(fields.begin(), fields.end());
  std::erase_if(indexes_, [&](const auto& i) {
    return std::none_of(fields.begin(), fields.end(), [&](const IndexFieldState& f) { return f.field == i.first; });
  });
  for (const IndexFieldState& f : fields) indexes_.try_emplace(f.field);
  return 0;
}

std::vector<ShadowKey> MemoryStore::put_index_entries(std::span<const IndexedShadow> shadows) {
  std::unique_lock lock(mutex_);
  std::vector<ShadowKey> moved;
  for (const IndexedShadow& s : shadows) {
    auto it = shadows_.find(s.key);
    const ShadowRecord now = it == shadows_.end() ? ShadowRecord{} : it->second;
    if (now.reported.version != s.reported_version || now.desired.version != s.desired_version) {
      moved.push_back(s.key);
      continue;
    }
    apply_index_updates(s.key, s.updates);
  }
  return moved;
}

std::vector<IndexHit> MemoryStore::index_range(std::string_view field, const IndexRange& range, const IndexHit* after,
                                               std::size_t limit) {
  if (range.descending) {  // the whole range, reversed (the memory store is for tests and demos)
    IndexRange ascending = range;
    ascending.descending = false;
    std::vector<IndexHit> all = index_range(field, ascending, nullptr, SIZE_MAX);
    std::vector<IndexHit> out;
    for (auto it = all.rbegin(); it != all.rend() && out.size() < limit; ++it) {
      if (!after || FieldIndex::Order()(*it, *after)) out.push_back(std::move(*it));
    }
    return out;
  }
  std::shared_lock lock(mutex_);
  std::vector<IndexHit> out;
  auto index = indexes_.find(field);
  if (index == indexes_.end()) return out;
  const auto& entries = index->second.entries;
  IndexValue least{range.type};  // the smallest value of the type
  if (range.type == IndexValue::Type::number) least.real = true, least.number = -std::numeric_limits<double>::infinity();
  if (range.type == IndexValue::Type::time) least.integer = std::numeric_limits<std::int64_t>::min();
  IndexHit start{range.low.value_or(least), "", ""};
  auto it = entries.lower_bound(start);
  if (after && FieldIndex::Order()(start, *after)) it = entries.upper_bound(*after);
  for (; it != entries.end() && out.size() < limit; ++it) {
    if (it->value.type != range.type || (range.end && !FieldIndex::Order()(*it, *range.end))) break;
    if (range.contains(it->value)) {
      out.push_back(*it);
    } else if (range.high && compare(it->value, *range.high) >= 0) {
      break;
    }
  }
  return out;
}

std::uint64_t MemoryStore::index_count(std::string_view field, const IndexRange& range, std::uint64_t cap) {
  std::uint64_t n = 0;
  for (const IndexHit& h : index_range(field, range, nullptr, cap)) n += range.contains(h.value);
  return n;
}

std::unique_ptr<StoreBackend> make_memory_store() { return std::make_unique<MemoryStore>(); }

}  // namespace deviceshadow
