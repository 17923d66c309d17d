// Time travel: a shadow as it was at a past moment, the bounds of its history, the net change
// between two moments, the series of one path (docs/semantics.md, "Time travel"). Built on the
// history journal: each event holds every changed leaf's old and new value, so a section is
// rebuilt by replaying its events from a point where its state is known — an image stored with
// an event (StateImage), its creation, its deletion — or, when nothing changed it since, read as
// it is now.
#pragma once

#include "deviceshadow/engine.hpp"
#include "deviceshadow/timestamp.hpp"

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
  const char* field = "asOf"; // the request's parameter that named it, for errors
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
  std::size_t events_read = 0;  // history events the read loaded: its cost
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

// A page of the series of one path of a section: every event with a change at or below `path`,
// oldest first.
struct SeriesRequest {
  std::string path;  // a JSON Pointer into the section's state, not the root
  Section section = Section::reported;
  std::optional<std::int64_t> since_ns;  // inclusive
  std::optional<std::int64_t> until_ns;  // inclusive
  std::size_t limit = 100;
  std::string cursor;
};

struct SeriesPoint {
  std::string event_id;
  std::int64_t timestamp_ns = 0;
  std::uint64_t version = 0;          // the section's version right after the event
  std::optional<json::value> value;   // the value at the path right after it; none when absent
  std::optional<Timestamp> ts;        // the value's own time when it is a timestamped value
};

struct Series {
  std::vector<SeriesPoint> points;
  std::string cursor;  // empty when this is the last page
};

// The text of an image of a shadow's records (StateImage::json), as a write stores it.
std::string encode_image(const ShadowRecord& record);

// A moment of an as-of read or a diff, as text: an RFC 3339 time or an event id. Throws
// invalid_request naming `field`.
Moment parse_moment(std::string_view text, const char* field);

// Every call throws invalid_request when history is off or a moment is later than now (naming
// its Moment::field; checked before anything is read), not_found when the shadow has no history
// or did not exist at the moment (an as-of read), or never had the event or version named, and
// history_expired when the moment needs events retention removed.
// `leaf_times` false: the leaf times of replayed sections are not rebuilt (times_json "", so
// they read as the section's time); a read that shows no metadata takes about half the time.
PastShadow shadow_as_of(Engine& engine, const ShadowKey& key, const Moment& moment, bool leaf_times = true);
HistoryBounds history_bounds(Engine& engine, const ShadowKey& key);
// `to` defaults to now. A section that did not exist at a moment counts as empty.
ShadowDiff shadow_diff(Engine& engine, const ShadowKey& key, const Moment& from, const std::optional<Moment>& to);
// Also invalid_request for a malformed path, limit or cursor; a shadow without history has an
// empty series, as it has an empty history page. A page holds at most `limit`
// points and stops early past the engine's max_page_bytes. Where the value at the path after an
// event cannot be known (its section's history before it was removed, and the event changed
// more than the one leaf at the path): history_expired.
Series shadow_series(Engine& engine, const ShadowKey& key, const SeriesRequest& request);

}  // namespace deviceshadow
