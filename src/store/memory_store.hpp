// The memory store's one object (not public API): its shadows in memory_store.cpp, its delivery
// state in memory_delivery.cpp, its bulk jobs in memory_jobs.cpp, under one lock.
#pragma once

#include "deviceshadow/store_backend.hpp"
#include "store/feed_listener.hpp"

#include <deque>
#include <map>
#include <set>
#include <shared_mutex>

namespace deviceshadow {

class MemoryStore final : public StoreBackend, public JobStore {
 public:
  // Store
  std::vector<ShadowRecord> read(std::span<const ShadowKey> keys) override;
  std::optional<ShadowRecord> try_read(const ShadowKey& key) override;  // unless a writer holds the store
  void write(const ShadowWrite& write) override;
  void append_history(std::span<const ShadowHistoryEvent> events) override;
  std::optional<StateImage> image_before(const ShadowKey& key, std::string_view event_id) override;
  std::vector<ShadowSummary> list_shadows(std::string_view thing, std::string_view after_name,
                                          std::size_t limit) override;
  std::vector<std::string> list_things(std::string_view prefix, std::string_view after_thing,
                                       std::size_t limit) override;
  std::vector<HistoryEvent> history(const ShadowKey& key, const HistoryQuery& query) override;
  std::vector<ShadowHistoryEvent> history_since(std::int64_t since_ns, const ShadowHistoryEvent* after,
                                                std::size_t limit) override;
  std::size_t purge(std::int64_t now_ns) override;
  std::optional<std::string> unready() override { return std::nullopt; }
  IndexDeclaration index_fields() override;
  std::uint64_t put_index_fields(std::span<const IndexFieldState> fields, std::uint64_t generation) override;
  std::vector<ShadowKey> put_index_entries(std::span<const IndexedShadow> shadows) override;
  std::vector<IndexHit> index_range(std::string_view field, const IndexRange& range, const IndexHit* after,
                                    std::size_t limit) override;
  std::uint64_t index_count(std::string_view field, const IndexRange& range, std::uint64_t cap) override;

  // DeliveryStore
  bool claim(std::string_view id, std::string_view owner, std::int64_t now_ns, std::int64_t expires_ns) override;
  std::size_t purge_dead_letters(std::int64_t now_ns) override;
  void put_registration(const RegistrationRecord& r) override;
  std::vector<RegistrationRecord> list_registrations() override;
  bool remove_registration(std::string_view id) override;
  std::optional<std::uint64_t> checkpoint(std::string_view registration) override;
  void put_checkpoint(std::string_view registration, std::uint64_t seq) override;
  void put_dead_letters(std::span<const DeadLetter> letters) override;
  std::vector<DeadLetter> dead_letters(std::string_view registration, std::string_view after, std::size_t limit) override;
  std::uint64_t count_dead_letters(std::string_view registration) override;
  std::size_t remove_dead_letters(std::string_view registration,
                                  std::optional<std::span<const std::string>> event_ids) override;
  std::vector<FeedEntry> read_feed(std::uint64_t after, std::size_t limit) override;
  void trim_feed(std::uint64_t up_to) override;
  std::uint64_t feed_end() override;
  void set_feed_listener(std::function<void()> listener) override { feed_listener_.set(std::move(listener)); }

  // JobStore (memory_jobs.cpp)
  JobStore* job_store() noexcept override { return this; }
  void create_job(const JobRecord& job, std::size_t max_active) override;
  bool update_job(const JobRecord& job, std::uint64_t expected_revision) override;
  std::optional<JobRecord> job(std::string_view id) override;
  std::vector<JobRecord> jobs(std::string_view before, std::size_t limit) override;
  std::vector<JobRecord> active_jobs() override;
  void remove_job(std::string_view id) override;
  void put_targets(std::string_view job, std::uint64_t page, std::span<const ShadowKey> targets) override;
  std::vector<ShadowKey> targets(std::string_view job, std::uint64_t page) override;
  void remove_targets(std::string_view job) override;
  void remove_orphan_targets(std::string_view before) override;

 private:
  // One declared field's entries, ordered as SQLite's shadow_index.
  struct FieldIndex {
    struct Order {
      bool operator()(const IndexHit& a, const IndexHit& b) const noexcept;
    };
    std::set<IndexHit, Order> entries;
  };
  void apply_index_updates(const ShadowKey& key, std::span<const IndexUpdate> updates);  // under mutex_

  std::shared_mutex mutex_;
  std::vector<IndexFieldState> index_fields_;
  std::map<std::string, FieldIndex, std::less<>> indexes_;
  std::map<ShadowKey, ShadowRecord> shadows_;
  std::map<ShadowKey, std::map<std::string, HistoryEvent>> history_;
  std::map<ShadowKey, std::map<std::string, StateImage, std::less<>>> images_;
  std::map<std::string, RegistrationRecord> registrations_;
  std::map<std::string, std::uint64_t> checkpoints_;
  std::map<std::string, std::map<std::string, DeadLetter>> dead_letters_;  // registration -> event id ->
  std::deque<FeedEntry> feed_;  // in seq order; appended by write
  FeedListener feed_listener_;
  std::uint64_t last_seq_ = 0;
  std::map<std::string, JobRecord, std::greater<>> jobs_;  // newest first
  std::map<std::pair<std::string, std::uint64_t>, std::vector<ShadowKey>> job_targets_;
};

}  // namespace deviceshadow
