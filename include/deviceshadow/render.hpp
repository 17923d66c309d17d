// JSON rendering of engine results for the REST API v1 (the README's "REST API v1"; the error
// body in docs/semantics.md, "Errors and limits") and the history journal ("History"). Section
// states are spliced in from their stored JSON text, never re-parsed.
#pragma once

#include "deviceshadow/engine.hpp"
#include "deviceshadow/error.hpp"

#include <string>

namespace deviceshadow {

// {"state":…,"version":N,"timestamp":"…","clientToken":"…","tz":"…"}: timestamp once the
// section has been written, clientToken and tz only when set. A tombstone shows an empty
// state with its version, so a client can pin the next write to it. With `metadata` (the
// timestamp keys, which tell timestamped values), the view also has "metadata": the state
// mirrored with each leaf replaced by its change time, as "timestamp" is written.
void append_section_view(std::string& out, const SectionRecord& section, const TimestampKeys* metadata = nullptr);

// {"thing","name","reported":<view>,"desired":<view>,"delta":{…}}; `metadata` as for a section view.
std::string render_shadow(const ShadowView& view, const TimestampKeys* metadata = nullptr);
void append_shadow(std::string& out, const ShadowView& view, const TimestampKeys* metadata = nullptr);
// {"thing","name","changed","reported","desired","delta","changes","acknowledged","stale"}
std::string render_update_result(const UpdateResult& result);
void append_update_result(std::string& out, const UpdateResult& result);
// {"thing","name","deleted":[…],"reported":{"version":N}?,"desired":{"version":N}?}
std::string render_delete_result(const DeleteResult& result);
// {"thing","shadows":[{"name","reportedVersion","desiredVersion","timestamp"}],"cursor"?}
std::string render_shadow_list(const std::string& thing, const ShadowList& list);
// {"things":[…],"cursor"?}
std::string render_thing_list(const ThingList& list);
// {"events":[…],"cursor"?}
std::string render_history_page(const HistoryPage& page);

// {"error":{"code","message",…details}}: the one place an error is rendered for the wire.
std::string render_error(const Error& error);
void append_error(std::string& out, const Error& error);

// The change event of one stored write: {"id","thing","name","op","timestamp","clientToken"?,
// "reported"?:{"version","tz"?,"changes"},"desired"?:{…},"acknowledged"?}, a section only if the
// write stored it (docs/semantics.md, "History").
struct ChangeEventParts {
  const ShadowKey* key = nullptr;
  std::string_view id;
  std::string_view op;  // report | desire | update (both sections) | delete
  std::int64_t timestamp_ns = 0;
  std::string_view client_token;
  std::optional<std::uint64_t> reported_version;  // set for each section the write stored
  std::optional<std::uint64_t> desired_version;
  std::string_view reported_tz;  // the time zone the write set on a section, if it set one
  std::string_view desired_tz;
  const std::vector<Change>* changes = nullptr;
  const std::vector<Acknowledgement>* acknowledged = nullptr;
};
std::string render_change_event(const ChangeEventParts& parts);

}  // namespace deviceshadow
