// A Store and a DeliveryStore that forward every call to another; test decorators override what
// they observe.
#pragma once

#include "deviceshadow/delivery_store.hpp"
#include "deviceshadow/store.hpp"

class ForwardingStore : public deviceshadow::Store {
 public:
  explicit ForwardingStore(deviceshadow::Store& inner) : inner_(inner) {}

  std::vector<deviceshadow::ShadowRecord> read(std::span<const deviceshadow::ShadowKey> keys) override {
    return inner_.read(keys);
  }
  void write(const deviceshadow::ShadowWrite& w) override { inner_.write(w); }
  std::vector<deviceshadow::ShadowSummary> list_shadows(std::string_view thing, std::string_view after,
                                                        std::size_t limit) override {
    return inner_.list_shadows(thing, after, limit);
  }
  std::vector<deviceshadow::ShadowKey> list_shadow_keys(const deviceshadow::ShadowKey* after, std::size_t limit) override {
    return inner_.list_shadow_keys(after, limit);
  }
  std::vector<std::string> list_things(std::string_view prefix, std::string_view after, std::size_t limit) override {
    return inner_.list_things(prefix, after, limit);
  }
  std::vector<deviceshadow::HistoryEvent> history(const deviceshadow::ShadowKey& key,
                                                  const deviceshadow::HistoryQuery& query) override {
    return inner_.history(key, query);
  }
  std::vector<deviceshadow::ShadowHistoryEvent> history_since(std::int64_t since_ns, const deviceshadow::ShadowHistoryEvent* after,
                                                              std::size_t limit) override {
    return inner_.history_since(since_ns, after, limit);
  }
  void append_history(std::span<const deviceshadow::ShadowHistoryEvent> events) override { inner_.append_history(events); }
  std::optional<deviceshadow::StateImage> image_before(const deviceshadow::ShadowKey& key,
                                                       std::string_view event_id) override {
    return inner_.image_before(key, event_id);
  }
  std::size_t purge(std::int64_t now_ns) override { return inner_.purge(now_ns); }
  std::optional<std::string> unready() override { return inner_.unready(); }
  bool shares_versions() const override { return inner_.shares_versions(); }
  deviceshadow::IndexDeclaration index_fields() override { return inner_.index_fields(); }
  std::uint64_t put_index_fields(std::span<const deviceshadow::IndexFieldState> fields, std::uint64_t generation) override {
    return inner_.put_index_fields(fields, generation);
  }
  void remove_undeclared_entries() override { inner_.remove_undeclared_entries(); }
  std::vector<deviceshadow::ShadowKey> put_index_entries(std::span<const deviceshadow::IndexedShadow> shadows) override {
    return inner_.put_index_entries(shadows);
  }
  std::vector<deviceshadow::IndexHit> index_range(std::string_view field, const deviceshadow::IndexRange& range,
                                                  const deviceshadow::IndexHit* after, std::size_t limit) override {
    return inner_.index_range(field, range, after, limit);
  }
  std::uint64_t index_count(std::string_view field, const deviceshadow::IndexRange& range, std::uint64_t cap) override {
    return inner_.index_count(field, range, cap);
  }

 protected:
  deviceshadow::Store& inner_;
};

class ForwardingDeliveryStore : public deviceshadow::DeliveryStore {
 public:
  explicit ForwardingDeliveryStore(deviceshadow::DeliveryStore& inner) : inner_(inner) {}

  bool claim(std::string_view id, std::string_view owner, std::int64_t now_ns, std::int64_t expires_ns) override {
    return inner_.claim(id, owner, now_ns, expires_ns);
  }
  std::size_t purge_dead_letters(std::int64_t now_ns) override { return inner_.purge_dead_letters(now_ns); }
  void put_registration(const deviceshadow::RegistrationRecord& r) override { inner_.put_registration(r); }
  std::vector<deviceshadow::RegistrationRecord> list_registrations() override { return inner_.list_registrations(); }
  bool remove_registration(std::string_view id) override { return inner_.remove_registration(id); }
  std::optional<std::uint64_t> checkpoint(std::string_view r) override { return inner_.checkpoint(r); }
  void put_checkpoint(std::string_view r, std::uint64_t seq) override { inner_.put_checkpoint(r, seq); }
  void put_dead_letters(std::span<const deviceshadow::DeadLetter> letters) override { inner_.put_dead_letters(letters); }
  std::vector<deviceshadow::DeadLetter> dead_letters(std::string_view r, std::string_view after, std::size_t limit) override {
    return inner_.dead_letters(r, after, limit);
  }
  std::uint64_t count_dead_letters(std::string_view r) override { return inner_.count_dead_letters(r); }
  std::size_t remove_dead_letters(std::string_view r, std::optional<std::span<const std::string>> ids) override {
    return inner_.remove_dead_letters(r, ids);
  }
  std::vector<deviceshadow::FeedEntry> read_feed(std::uint64_t after, std::size_t limit) override {
    return inner_.read_feed(after, limit);
  }
  void trim_feed(std::uint64_t up_to) override { inner_.trim_feed(up_to); }
  std::uint64_t feed_end() override { return inner_.feed_end(); }
  void set_feed_listener(std::function<void()> listener) override { inner_.set_feed_listener(std::move(listener)); }

 protected:
  deviceshadow::DeliveryStore& inner_;
};
