#include "deviceshadow/memory_store.hpp"

#include "deviceshadow/error.hpp"
#include "store/conditions.hpp"
#include "store/feed_listener.hpp"

#include <algorithm>
#include <deque>
#include <map>
#include <mutex>
#include <shared_mutex>

namespace deviceshadow {
namespace {

class MemoryStore final : public Store {
 public:
  std::vector<ShadowRecord> read(std::span<const ShadowKey> keys) override {
    std::shared_lock lock(mutex_);
    std::vector<ShadowRecord> out;
    out.reserve(keys.size());
    for (const ShadowKey& key : keys) {
      auto it = shadows_.find(key);
      out.push_back(it == shadows_.end() ? ShadowRecord{} : it->second);
    }
    return out;
  }

  void write(const ShadowWrite& write) override {
    {
      std::unique_lock lock(mutex_);
      auto it = shadows_.find(write.key);
      const ShadowRecord current = it == shadows_.end() ? ShadowRecord{} : it->second;
      check_conditions(current, write);
      ShadowRecord& stored = shadows_[write.key];
      for (const SectionPut& put : write.sections) stored.section(put.section) = put.record;
      if (write.event) history_[write.key][write.event->id] = *write.event;
      if (write.feed) feed_.push_back({++last_seq_, write.key, *write.feed});
    }
    if (write.feed) feed_listener_.call();
  }

  void append_history(std::span<const ShadowHistoryEvent> events) override {
    std::unique_lock lock(mutex_);
    for (const ShadowHistoryEvent& e : events) history_[e.key].try_emplace(e.event.id, e.event);
  }

  std::vector<ShadowSummary> list_shadows(std::string_view thing, std::string_view after_name,
                                          std::size_t limit) override {
    std::shared_lock lock(mutex_);
    std::vector<ShadowSummary> out;
    for (auto it = shadows_.upper_bound(ShadowKey{std::string(thing), std::string(after_name)});
         it != shadows_.end() && it->first.thing == thing && out.size() < limit; ++it) {
      if (it->second.exists()) out.push_back(summarize(it->first.name, it->second));
    }
    return out;
  }

  std::vector<std::string> list_things(std::string_view prefix, std::string_view after_thing,
                                       std::size_t limit) override {
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

  std::vector<HistoryEvent> history(const ShadowKey& key, const HistoryQuery& query) override {
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
    if (query.descending) {
      auto end = query.after_id.empty() ? events.end() : events.lower_bound(query.after_id);
      for (auto it = std::make_reverse_iterator(end); it != events.rend() && more(); ++it) accept(it->second);
    } else {
      auto begin = query.after_id.empty() ? events.begin() : events.upper_bound(query.after_id);
      for (auto it = begin; it != events.end() && more(); ++it) accept(it->second);
    }
    return out;
  }

  std::vector<ShadowHistoryEvent> history_since(std::int64_t since_ns, const ShadowHistoryEvent* after,
                                                std::size_t limit) override {
    auto position = [](const std::int64_t& ts, const ShadowKey& key, const std::string& id) { return std::tie(ts, key.thing, key.name, id); };
    std::shared_lock lock(mutex_);
    std::vector<ShadowHistoryEvent> out;
    for (const auto& [key, events] : history_) {
      for (const auto& [id, e] : events) {
        if (e.timestamp_ns < since_ns) continue;
        if (after && position(e.timestamp_ns, key, id) <= position(after->event.timestamp_ns, after->key, after->event.id)) continue;
        out.push_back({key, e});
      }
    }
    std::sort(out.begin(), out.end(), [&](const ShadowHistoryEvent& a, const ShadowHistoryEvent& b) {
      return position(a.event.timestamp_ns, a.key, a.event.id) < position(b.event.timestamp_ns, b.key, b.event.id);
    });
    if (out.size() > limit) out.resize(limit);
    return out;
  }

  std::size_t purge(std::int64_t now_ns) override {
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
    for (auto& [registration, letters] : dead_letters_) {
      purged += std::erase_if(letters, [&](const auto& l) { return l.second.expires_ns <= now_ns; });
    }
    return purged;
  }

  std::optional<std::string> unready() override { return std::nullopt; }
  // One process uses this store: every claim is granted.
  bool claim(std::string_view, std::string_view, std::int64_t, std::int64_t) override { return true; }

  void put_registration(const RegistrationRecord& r) override {
    std::unique_lock lock(mutex_);
    registrations_[r.id] = r;
  }
  std::vector<RegistrationRecord> list_registrations() override {
    std::shared_lock lock(mutex_);
    std::vector<RegistrationRecord> out;
    for (const auto& [id, r] : registrations_) out.push_back(r);
    return out;
  }
  bool remove_registration(std::string_view id) override {
    std::unique_lock lock(mutex_);
    checkpoints_.erase(std::string(id));
    dead_letters_.erase(std::string(id));
    return registrations_.erase(std::string(id)) > 0;
  }

  std::optional<std::uint64_t> checkpoint(std::string_view registration) override {
    std::shared_lock lock(mutex_);
    auto it = checkpoints_.find(std::string(registration));
    return it == checkpoints_.end() ? std::nullopt : std::optional(it->second);
  }
  void put_checkpoint(std::string_view registration, std::uint64_t seq) override {
    std::unique_lock lock(mutex_);
    if (registrations_.count(std::string(registration))) checkpoints_[std::string(registration)] = seq;
  }
  void put_dead_letters(std::span<const DeadLetter> letters) override {
    std::unique_lock lock(mutex_);
    for (const DeadLetter& letter : letters) dead_letters_[letter.registration][letter.event_id] = letter;
  }
  std::vector<DeadLetter> dead_letters(std::string_view registration, std::string_view after, std::size_t limit) override {
    std::shared_lock lock(mutex_);
    std::vector<DeadLetter> out;
    auto letters = dead_letters_.find(std::string(registration));
    if (letters == dead_letters_.end()) return out;
    for (auto it = letters->second.upper_bound(std::string(after)); it != letters->second.end() && out.size() < limit; ++it) {
      out.push_back(it->second);
    }
    return out;
  }
  std::uint64_t count_dead_letters(std::string_view registration) override {
    std::shared_lock lock(mutex_);
    auto letters = dead_letters_.find(std::string(registration));
    return letters == dead_letters_.end() ? 0 : letters->second.size();
  }
  std::size_t remove_dead_letters(std::string_view registration,
                                  std::optional<std::span<const std::string>> event_ids) override {
    std::unique_lock lock(mutex_);
    auto letters = dead_letters_.find(std::string(registration));
    if (letters == dead_letters_.end()) return 0;
    std::size_t removed = 0;
    if (event_ids) {
      for (const std::string& id : *event_ids) removed += letters->second.erase(id);
    } else {
      removed = letters->second.size();
      letters->second.clear();
    }
    if (letters->second.empty()) dead_letters_.erase(letters);
    return removed;
  }

  std::vector<FeedEntry> read_feed(std::uint64_t after, std::size_t limit) override {
    std::shared_lock lock(mutex_);
    auto first = std::upper_bound(feed_.begin(), feed_.end(), after,
                                  [](std::uint64_t seq, const FeedEntry& e) { return seq < e.seq; });
    auto last = first + static_cast<std::ptrdiff_t>(std::min<std::size_t>(limit, static_cast<std::size_t>(feed_.end() - first)));
    return {first, last};
  }

  void trim_feed(std::uint64_t up_to) override {
    std::unique_lock lock(mutex_);
    while (!feed_.empty() && feed_.front().seq <= up_to) feed_.pop_front();
  }

  std::uint64_t feed_end() override {
    std::shared_lock lock(mutex_);
    return last_seq_;
  }

  void set_feed_listener(std::function<void()> listener) override { feed_listener_.set(std::move(listener)); }

 private:
  std::shared_mutex mutex_;
  std::map<ShadowKey, ShadowRecord> shadows_;
  std::map<ShadowKey, std::map<std::string, HistoryEvent>> history_;
  std::map<std::string, RegistrationRecord> registrations_;
  std::map<std::string, std::uint64_t> checkpoints_;
  std::map<std::string, std::map<std::string, DeadLetter>> dead_letters_;  // registration -> event id ->
  std::deque<FeedEntry> feed_;  // in seq order
  FeedListener feed_listener_;
  std::uint64_t last_seq_ = 0;
};

}  // namespace

std::unique_ptr<Store> make_memory_store() { return std::make_unique<MemoryStore>(); }

}  // namespace deviceshadow
