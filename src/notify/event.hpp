// The event a registration receives for one stored write: a CloudEvents 1.0 structured JSON
// document built from the write's change-feed entry (FeedEntry), and the webhook signature.
//
//   {"specversion":"1.0","id":<change event id>,"source":"deviceshadow",
//    "type":"deviceshadow.shadow.updated"|"deviceshadow.shadow.deleted",
//    "subject":"{thing}#{name}","time":<write timestamp>,"datacontenttype":"application/json",
//    "data":{"thing","name","op","clientToken"?,"registration",
//            "reported"|"desired":{"version","old"?,"new"?,"diff"?},"acknowledged"?,"truncated"?}}
//
// A section appears when the registration selects it and the write stored it; "old" and "new"
// (the section's whole state before and after) and "diff" (its changes) as `include` asks.
// "acknowledged" appears when the write acknowledged desired leaves and the registration
// selects desired (an acknowledgement is a change of desired).
#pragma once

#include "notify/registration.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace deviceshadow::notify {

// The parts of a feed entry that decide whether a registration gets an event. The names are
// views into the FeedEntryText that made it.
struct FeedWrite {
  std::string_view id;  // the change event's id; receivers deduplicate by it
  std::string_view thing;
  std::string_view name;
  std::int64_t timestamp_ns = 0;  // when the write was stored
  bool deleted = false;           // a delete, not an update
  bool reported = false;  // the write stored reported
  bool desired = false;   // the write stored desired
  std::vector<std::string> reported_paths;  // the paths of its changes, by section
  std::vector<std::string> desired_paths;
};

// A feed entry's text (FeedEntry::json), read once for every registration: what matching needs
// is decoded (`write()`), and events copy the rest (versions, states, changes,
// acknowledgements) straight from the text, never parsed. The text is the engine's compact
// JSON; construction throws std::invalid_argument for text that is not a feed entry. Neither
// copied nor moved: write() views its text.
class FeedEntryText {
 public:
  explicit FeedEntryText(std::string text);
  FeedEntryText(const FeedEntryText&) = delete;
  FeedEntryText& operator=(const FeedEntryText&) = delete;

  const FeedWrite& write() const { return write_; }
  // The shadow as the write left it, for registrations' filters: `stored` (the shadow as the
  // store holds it when read, after the write) with each section the write stored put back as
  // the write left it, unless the store still holds it at the write's version (then whole, its
  // leaf times included; else with its new state, its version, the write's time and every
  // leaf time the write's). A section the write did not store is `stored`'s.
  ShadowRecord record_after(ShadowRecord stored) const;
  // The bytes it holds (what a worker's window counts).
  std::size_t size() const noexcept { return text_.size() + decoded_[0].size() + decoded_[1].size() + decoded_[2].size(); }

 private:
  friend std::string build_event(const Registration&, const FeedEntryText&, std::size_t);
  struct Part {  // a member's value in text_; absent when size is 0
    std::size_t at = 0, size = 0;
    explicit operator bool() const { return size != 0; }
  };
  struct SectionParts {
    Part version, changes, old_state, new_state;  // version set: the write stored the section
  };
  std::string_view operator[](Part p) const { return std::string_view(text_).substr(p.at, p.size); }

  std::string text_;
  std::string decoded_[3];  // id, thing and name when their JSON strings hold escapes
  FeedWrite write_;
  Part id_, thing_, name_, op_, timestamp_, client_token_, acknowledged_;
  SectionParts sections_[2];  // reported, desired
};

// True when `registration` gets an event for the write: it is enabled, selects a section the
// write stored, matches "{thing}#{name}", and (with paths) a change of a selected section lies
// at, below or above one of its paths. (Its `filter`, which needs the shadow as the write left
// it, record_after, is the dispatcher's to check.)
bool wants(const Registration& registration, const FeedWrite& write);

// The CloudEvent type of a write: "deviceshadow.shadow.updated" or "…deleted".
std::string_view event_type(const FeedWrite& write);

// The CloudEvent of the write for the registration. When it would be longer than max_bytes, or
// the entry holds no states (an entry made of a history event alone: {"event": …}), it is built
// without "old" and "new" and with "truncated": true. A registration without an id (a live
// stream's filter, docs/streams.md) leaves "registration" out.
std::string build_event(const Registration& registration, const FeedEntryText& entry, std::size_t max_bytes = SIZE_MAX);

// The value of the X-Shadow-Signature header: "t=<unix seconds>,v1=<hex HMAC-SHA256(secret,
// t + "." + body)>".
std::string webhook_signature(std::string_view secret, std::int64_t unix_seconds, std::string_view body);

}  // namespace deviceshadow::notify
