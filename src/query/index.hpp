// Declared indexes (docs/queries.md, "Indexes"): which properties may be declared, the values a
// shadow holds for one (the filter language's own: samples()), and the IndexKeeper that keeps
// the declared list, tells the engine what each write must index, and builds the index of a
// newly declared field in the background.
#pragma once

#include "query/filter.hpp"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <thread>

namespace deviceshadow::query {

inline constexpr std::size_t kMaxIndexFields = 32;

// A property that may be declared: reported/<path> or desired/<path> (optionally @ts or
// @changed), name, _modified, _reportedVersion, _desiredVersion or _pending. Throws invalid_request
// naming `fields`.
Property parse_index_field(std::string_view text);

// The values `property` holds in `subject`, as index entries: sorted, without duplicates; one
// `absent` entry when it holds none; none when the shadow does not exist.
std::vector<IndexValue> index_values(const Subject& subject, const Property& property);

struct IndexKeeperOptions {
  // How often the declaration is read again for what other processes changed (their new
  // fields, their builds' progress); 0: never (a store of one process).
  std::chrono::milliseconds refresh{0};
  // How long the build of a field new to this process waits before it reads the shadows, while
  // processes that read the declaration before the field was added may still write without it
  // (a store shared by processes: a refresh and a write's time limit; docs/queries.md).
  std::chrono::milliseconds grace{0};
  // Told when the background build fails for the store's reason (a full disk), when the reason
  // changes and at most once a minute: the build tries again every second. Called on the build's
  // thread; must not throw.
  std::function<void(const std::string& error)> on_build_error;
};

// Safe for concurrent use. The background build runs on a thread of its own; a write that lands
// during it is indexed by the write itself (the build skips a shadow whose versions moved). On a
// store shared by processes every process builds the fields still building, and a declaration
// replaces the one it read only if no other process replaced it since (else it reads it again).
class IndexKeeper final : public Indexer {
 public:
  // Loads the declared fields from the store and resumes any build a restart interrupted.
  IndexKeeper(Store& store, const TimestampKeys& keys, IndexKeeperOptions options = {});
  ~IndexKeeper() override;

  // Declares exactly `fields`: new ones start building, those left out are dropped with their
  // entries, the others keep their state. Returns the states.
  std::vector<IndexFieldState> declare(const std::vector<std::string>& fields);
  std::vector<IndexFieldState> status() const;
  // Whether the field's index is complete (`text` as declared).
  bool ready(std::string_view text) const;
  // Blocks until no field is building (tests, benchmarks).
  void wait_until_built();

  std::shared_lock<std::shared_mutex> hold() override { return std::shared_lock(fields_mutex_); }
  std::vector<IndexUpdate> updates(const ShadowKey& key, const ShadowRecord& before, const ShadowWrite& write,
                                   std::span<const Change> changes) override;
  std::uint64_t generation() const override { return generation_; }
  void reload() override;

 private:
  struct Field {
    Property property;
    std::string pointer;  // a section path without suffix as a JSON Pointer, else ""
    std::atomic<bool> ready{false};
    std::atomic<std::uint64_t> indexed{0};
    std::chrono::steady_clock::time_point build_after;  // IndexKeeperOptions::grace
  };
  static const Change* only_change(const Field& f, const ShadowWrite& write, std::span<const Change> changes);
  std::vector<IndexFieldState> states() const;  // under fields_mutex_
  void persist();                               // the states to the store; under fields_mutex_ (shared)
  // Takes `stored` as the declared list (under fields_mutex_, exclusive); `grace`: whether its
  // new fields wait before they are built.
  void adopt(const IndexDeclaration& stored, bool grace);
  void build_loop();
  bool build_pass(std::uint64_t seen);  // false when the list changed since `seen` (changes_)

  Store& store_;
  const TimestampKeys keys_;
  const IndexKeeperOptions options_;
  mutable std::shared_mutex fields_mutex_;  // writes hold it shared; a change of the list, exclusive
  std::vector<std::shared_ptr<Field>> fields_;
  std::atomic<std::uint64_t> generation_{0};  // the declaration's (IndexDeclaration)
  std::mutex persist_mutex_;

  std::mutex build_mutex_;
  std::condition_variable build_cv_;
  std::uint64_t changes_ = 0;  // +1 on every change of the list
  bool building_ = false;
  bool stopping_ = false;
  std::thread builder_;
};

}  // namespace deviceshadow::query
