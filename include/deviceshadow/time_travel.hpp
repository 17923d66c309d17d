// Time travel: a shadow as it was at a past moment, the bounds of its history, the net change
// between two moments (docs/semantics.md, "Time travel"). Built on the history journal: each
// event holds every changed leaf's old and new value, so a section is rebuilt by replaying its
// events from a point where its state is known — its creation, its deletion — or, when nothing
// changed it since, read as it is now.
#pragma once

#include "deviceshadow/engine.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace deviceshadow {

// The moment a read asks for: right after the last event at or before a time, right after
// one event, or right after the event that gave a section a version.
struct Moment {
  enum class Kind { time, event, reported_version, desired_version };
  Kind kind = Kind::time;
  std::int64_t time_ns = 0;  // Kind::time
  std::string event_id;      // Kind::event
  std::uint64_t version = 0; // Kind::reported_version, Kind::desired_version
};

// One event of a shadow's history and the versions of both sections right after it.
struct EventMark {
  std::string id;
  std::int64_t timestamp_ns = 0;
  std::uint64_t reported_version = 0;
  std::uint64_t desired_version = 0;
};

// A shadow as it was right after `event`: what a GET returned then.
struct PastShadow {
  ShadowView view;
  EventMark event;
};

struct HistoryBounds {
  EventMark oldest;
  EventMark newest;
  bool complete = false;  // the oldest event kept is the shadow's first
};

struct ShadowDiff {
  EventMark from;
  EventMark to;
  // One entry per leaf that differs between the two states: reported before desired, then by
  // path.
  std::vector<Change> changes;
};

// A moment of an as-of read or a diff, as text: an RFC 3339 time or an event id. Throws
// invalid_request naming `field`.
Moment parse_moment(std::string_view text, const char* field);

// Every call throws invalid_request when history is off, not_found when the shadow has no
// history or did not exist at the moment (an as-of read), a moment later than now, an event or
// version it never had, and history_expired when the moment needs events retention removed.
PastShadow shadow_as_of(Engine& engine, const ShadowKey& key, const Moment& moment);
HistoryBounds history_bounds(Engine& engine, const ShadowKey& key);
// `to` defaults to now. A section that did not exist at a moment counts as empty.
ShadowDiff shadow_diff(Engine& engine, const ShadowKey& key, const Moment& from, const std::optional<Moment>& to);

}  // namespace deviceshadow
