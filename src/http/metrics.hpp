// Prometheus metrics of the server: requests by route and status, latency histograms, store
// operation latency, in-flight requests, connections, and the engine's counters. Thread-safe.
// Every label takes its value from a fixed set (routes, known methods else "other", the
// statuses the server answers with), so no client can grow the number of series.
#pragma once

#include "deviceshadow/engine.hpp"
#include "deviceshadow/histogram.hpp"
#include "deviceshadow/store_backend.hpp"
#include "http/server.hpp"

#include <atomic>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

namespace deviceshadow::http {

class Metrics {
 public:
  void request_started() { ++in_flight_; }
  // A request started on an I/O thread and handed to the worker pool, where it starts again.
  void request_handed_on() {
    --in_flight_;
    ++handed_on_;
  }
  void request_finished(std::string_view route, std::string_view method, int status, double seconds);
  void store_operation(std::string_view operation, double seconds);
  std::string render(const EngineStats& engine) const;
  // The transport's counters, rendered from then on; `http` must outlive this object's use.
  void watch(const HttpStats* http) { http_ = http; }
  // Metrics of another part (e.g. the MQTT bridge), appended to every render from then on;
  // `append` must stay callable while this object is used.
  // Adds a part of render()'s output; it is called without this object's lock held.
  void add_section(std::function<void(std::string&)> append) {
    std::lock_guard lock(mutex_);
    sections_.push_back(std::move(append));
  }

 private:
  mutable std::mutex mutex_;
  std::map<std::tuple<std::string, std::string, int>, std::uint64_t> requests_;
  std::map<std::string, Histogram> request_latency_;  // by route
  std::map<std::string, Histogram> store_latency_;    // by operation
  std::atomic<std::int64_t> in_flight_{0};
  std::atomic<std::uint64_t> handed_on_{0};
  std::atomic<const HttpStats*> http_{nullptr};
  std::vector<std::function<void(std::string&)>> sections_;
};

// The method's label: itself when it is one the server knows of, else "other".
std::string_view method_label(std::string_view method);

// A backend's store that forwards to another and records the latency of each shadow operation,
// and of claims and purges among the delivery ones.
class MeteredStore final : public StoreBackend {
 public:
  MeteredStore(StoreBackend& inner, Metrics& metrics) : inner_(inner), metrics_(metrics) {}
  std::vector<ShadowRecord> read(std::span<const ShadowKey> keys) override;
  std::optional<ShadowRecord> try_read(const ShadowKey& key) override;
  void write(const ShadowWrite& write) override;
  std::vector<ShadowSummary> list_shadows(std::string_view thing, std::string_view after, std::size_t limit) override;
  std::vector<std::string> list_things(std::string_view prefix, std::string_view after, std::size_t limit) override;
  std::vector<ShadowKey> list_shadow_keys(const ShadowKey* after, std::size_t limit) override;
  std::vector<HistoryEvent> history(const ShadowKey& key, const HistoryQuery& query) override;
  std::vector<ShadowHistoryEvent> history_since(std::int64_t since_ns, const ShadowHistoryEvent* after,
                                                std::size_t limit) override;
  void append_history(std::span<const ShadowHistoryEvent> events) override;
  std::optional<StateImage> image_before(const ShadowKey& key, std::string_view event_id) override;
  std::size_t purge(std::int64_t now_ns) override;
  std::optional<std::string> unready() override { return inner_.unready(); }
  bool shares_versions() const override { return inner_.shares_versions(); }
  IndexDeclaration index_fields() override { return inner_.index_fields(); }
  std::uint64_t put_index_fields(std::span<const IndexFieldState> fields, std::uint64_t generation) override {
    return inner_.put_index_fields(fields, generation);
  }
  void remove_undeclared_entries() override { inner_.remove_undeclared_entries(); }
  std::vector<ShadowKey> put_index_entries(std::span<const IndexedShadow> shadows) override { return inner_.put_index_entries(shadows); }
  std::vector<IndexHit> index_range(std::string_view field, const IndexRange& range, const IndexHit* after,
                                    std::size_t limit) override;
  std::uint64_t index_count(std::string_view field, const IndexRange& range, std::uint64_t cap) override;
  JobStore* job_store() noexcept override { return inner_.job_store(); }

  bool claim(std::string_view id, std::string_view owner, std::int64_t now_ns, std::int64_t expires_ns) override;
  std::size_t purge_dead_letters(std::int64_t now_ns) override;
  void put_registration(const RegistrationRecord& r) override { inner_.put_registration(r); }
  std::vector<RegistrationRecord> list_registrations() override { return inner_.list_registrations(); }
  bool remove_registration(std::string_view id) override { return inner_.remove_registration(id); }
  std::optional<std::uint64_t> checkpoint(std::string_view r) override { return inner_.checkpoint(r); }
  void put_checkpoint(std::string_view r, std::uint64_t seq) override { inner_.put_checkpoint(r, seq); }
  void put_dead_letters(std::span<const DeadLetter> letters) override { inner_.put_dead_letters(letters); }
  std::vector<DeadLetter> dead_letters(std::string_view r, std::string_view after, std::size_t limit) override {
    return inner_.dead_letters(r, after, limit);
  }
  std::uint64_t count_dead_letters(std::string_view r) override { return inner_.count_dead_letters(r); }
  std::size_t remove_dead_letters(std::string_view r, std::optional<std::span<const std::string>> ids) override {
    return inner_.remove_dead_letters(r, ids);
  }
  std::vector<FeedEntry> read_feed(std::uint64_t after, std::size_t limit) override { return inner_.read_feed(after, limit); }
  void trim_feed(std::uint64_t up_to) override { inner_.trim_feed(up_to); }
  std::uint64_t feed_end() override { return inner_.feed_end(); }
  void set_feed_listener(std::function<void()> listener) override { inner_.set_feed_listener(std::move(listener)); }

 private:
  template <class F>
  auto timed(std::string_view operation, F&& f);
  StoreBackend& inner_;
  Metrics& metrics_;
};

}  // namespace deviceshadow::http
