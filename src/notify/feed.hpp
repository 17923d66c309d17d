// The change feed as the dispatcher reads it: entries (FeedEntry) numbered in commit order,
// and each registration's checkpoint in it. Two kinds: the transactional outbox of the SQLite
// and memory stores (OutboxFeed), and a DynamoDB table's stream as assembled by this process's
// stream consumer (notify/stream/stream_feed.hpp).
#pragma once

#include "deviceshadow/delivery_store.hpp"

#include <cstdint>
#include <functional>
#include <optional>
#include <string_view>
#include <vector>

namespace deviceshadow::notify {

class Feed {
 public:
  virtual ~Feed() = default;

  // Entries with seq > after, in seq order, at most limit.
  virtual std::vector<FeedEntry> read(std::uint64_t after, std::size_t limit) = 0;
  // Every registration has the entries up to `up_to`: they may go.
  virtual void trim(std::uint64_t up_to) = 0;
  // The seq of the last entry appended (0: none): a registration created now starts after it.
  virtual std::uint64_t end() = 0;

  // A registration's checkpoint: every entry up to it is delivered, dead-lettered or not wanted.
  virtual std::optional<std::uint64_t> checkpoint(std::string_view registration) = 0;
  virtual void put_checkpoint(std::string_view registration, std::uint64_t seq) = 0;

  // Whether the feed is nearly out of room and will soon stop taking entries (a feed held in
  // memory): the registrations holding it back must give up their events (to dead letters).
  virtual bool pressed() { return false; }

  // Called after entries were appended (must not throw), so that the reader needs not poll.
  // Set by the dispatcher when it starts and cleared when it stops.
  virtual void set_listener(std::function<void()> listener) = 0;
};

// The outbox of a store that keeps one (SQLite, memory): entries, checkpoints and trimming are
// the delivery store's, and so is the listener told of appends.
class OutboxFeed final : public Feed {
 public:
  explicit OutboxFeed(DeliveryStore& store) : store_(store) {}

  // Whether the store keeps an outbox (DynamoDB's feed is its stream).
  static bool available(DeliveryStore& store);

  std::vector<FeedEntry> read(std::uint64_t after, std::size_t limit) override { return store_.read_feed(after, limit); }
  void trim(std::uint64_t up_to) override { store_.trim_feed(up_to); }
  std::uint64_t end() override { return store_.feed_end(); }
  std::optional<std::uint64_t> checkpoint(std::string_view registration) override { return store_.checkpoint(registration); }
  void put_checkpoint(std::string_view registration, std::uint64_t seq) override { store_.put_checkpoint(registration, seq); }
  void set_listener(std::function<void()> listener) override;

 private:
  DeliveryStore& store_;
};

}  // namespace deviceshadow::notify
