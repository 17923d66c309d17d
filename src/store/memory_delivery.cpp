// The memory store's delivery state (DeliveryStore): registrations, checkpoints, dead letters
// and the outbox that MemoryStore::write appends to.
#include "store/memory_store.hpp"

#include <algorithm>
#include <mutex>

namespace deviceshadow {

// One process uses this store: every claim is granted.
bool MemoryStore::claim(std::string_view, std::string_view, std::int64_t, std::int64_t) { return true; }

std::size_t MemoryStore::purge_dead_letters(std::int64_t now_ns) {
  std::unique_lock lock(mutex_);
  std::size_t purged = 0;
  for (auto& [registration, letters] : dead_letters_) {
    purged += std::erase_if(letters, [&](const auto& l) { return l.second.expires_ns <= now_ns; });
  }
  return purged;
}

void MemoryStore::put_registration(const RegistrationRecord& r) {
  std::unique_lock lock(mutex_);
  registrations_[r.id] = r;
}
std::vector<RegistrationRecord> MemoryStore::list_registrations() {
  std::shared_lock lock(mutex_);
  std::vector<RegistrationRecord> out;
  for (const auto& [id, r] : registrations_) out.push_back(r);
  return out;
}
bool MemoryStore::remove_registration(std::string_view id) {
  std::unique_lock lock(mutex_);
  checkpoints_.erase(std::string(id));
  dead_letters_.erase(std::string(id));
  return registrations_.erase(std::string(id)) > 0;
}

std::optional<std::uint64_t> MemoryStore::checkpoint(std::string_view registration) {
  std::shared_lock lock(mutex_);
  auto it = checkpoints_.find(std::string(registration));
  return it == checkpoints_.end() ? std::nullopt : std::optional(it->second);
}
void MemoryStore::put_checkpoint(std::string_view registration, std::uint64_t seq) {
  std::unique_lock lock(mutex_);
  if (registrations_.count(std::string(registration))) checkpoints_[std::string(registration)] = seq;
}
void MemoryStore::put_dead_letters(std::span<const DeadLetter> letters) {
  std::unique_lock lock(mutex_);
  for (const DeadLetter& letter : letters) dead_letters_[letter.registration][letter.event_id] = letter;
}
std::vector<DeadLetter> MemoryStore::dead_letters(std::string_view registration, std::string_view after, std::size_t limit) {
  std::shared_lock lock(mutex_);
  std::vector<DeadLetter> out;
  auto letters = dead_letters_.find(std::string(registration));
  if (letters == dead_letters_.end()) return out;
  for (auto it = letters->second.upper_bound(std::string(after)); it != letters->second.end() && out.size() < limit; ++it) {
    out.push_back(it->second);
  }
  return out;
}
std::uint64_t MemoryStore::count_dead_letters(std::string_view registration) {
  std::shared_lock lock(mutex_);
  auto letters = dead_letters_.find(std::string(registration));
  return letters == dead_letters_.end() ? 0 : letters->second.size();
}
std::size_t MemoryStore::remove_dead_letters(std::string_view registration,
                                             std::optional<std::span<const std::string>> event_ids) {
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

std::vector<FeedEntry> MemoryStore::read_feed(std::uint64_t after, std::size_t limit) {
  std::shared_lock lock(mutex_);
  auto first = std::upper_bound(feed_.begin(), feed_.end(), after,
                                [](std::uint64_t seq, const FeedEntry& e) { return seq < e.seq; });
  auto last = first + static_cast<std::ptrdiff_t>(std::min<std::size_t>(limit, static_cast<std::size_t>(feed_.end() - first)));
  return {first, last};
}

void MemoryStore::trim_feed(std::uint64_t up_to) {
  std::unique_lock lock(mutex_);
  while (!feed_.empty() && feed_.front().seq <= up_to) feed_.pop_front();
}

std::uint64_t MemoryStore::feed_end() {
  std::shared_lock lock(mutex_);
  return last_seq_;
}

}  // namespace deviceshadow
