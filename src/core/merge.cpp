// Merge of an incoming state into a stored one. The rule numbers in the comments are those of
// docs/semantics.md, "Merge".
#include "core/tree.hpp"
#include "deviceshadow/document.hpp"

#include <limits>
#include <unordered_map>

namespace deviceshadow {
namespace {

constexpr std::size_t kNoMatch = std::numeric_limits<std::size_t>::max();

class Merger {
 public:
  Merger(MergeMode mode, Section section, const TimestampKeys& keys, std::span<const ParsedTimestamp> parsed,
         bool replace_arrays, MergeResult& out)
      : mode_(mode), section_(section), keys_(keys), parsed_(parsed), replace_arrays_(replace_arrays), out_(out) {}

  // Merges the members of two plain (non-timestamped) objects. Incoming values move into
  // `stored` (a move across storages copies).
  void merge_members(json::object& stored, json::object& incoming) {
    const bool had_members = !stored.empty();
    std::size_t hint = 0;
    for (json::key_value_pair& member : incoming) {
      std::string_view key(member.key().data(), member.key().size());
      const std::size_t mark = path_.size();
      append_pointer_token(path_, key);
      auto it = find_member(stored, key, hint);
      if (member.value().is_null()) {  // rule 2: null removes
        if (it != stored.end()) {
          emit_removes(it->value());
          stored.stable_erase(it);
        }
      } else if (it == stored.end()) {
        json::value added = without_null_members(std::move(member.value()), keys_, stored.storage());
        emit_adds(added);
        stored.emplace(member.key(), std::move(added));
      } else {
        merge_value(it->value(), member.value());
      }
      path_.resize(mark);
    }
    if (mode_ == MergeMode::client_is_master) {  // rule 1: absent members go
      for (std::size_t i = 0; i < stored.size();) {
        auto it = stored.begin() + static_cast<std::ptrdiff_t>(i);
        if (incoming.contains(it->key())) {
          ++i;
          continue;
        }
        const std::size_t mark = path_.size();
        append_pointer_token(path_, std::string_view(it->key().data(), it->key().size()));
        emit_removes(it->value());
        path_.resize(mark);
        stored.stable_erase(it);
      }
    }
    // A nested object this merge emptied but keeps is an empty-object leaf now: its own change,
    // after the removes of what it held, so that the list tells it from the object's removal.
    if (had_members && stored.empty() && !path_.empty()) new_change(ChangeOp::add).new_value.emplace(json::object());
  }

 private:
  // Merges a non-null incoming node into an existing stored node.
  void merge_value(json::value& stored, json::value& incoming) {
    const ParsedTimestamp* listed = take_listed(incoming);
    const json::value* incoming_ts = listed ? listed->member : timestamp_member(incoming, keys_);
    if (incoming_ts) {
      const json::value* stored_ts = timestamp_member(stored, keys_);
      if (stored_ts) {  // rule 3: strictly newer wins
        // Incoming timestamps are validated; a stored one that no longer parses loses.
        auto incoming_time = listed ? std::optional(listed->instant) : incoming_instant(*incoming_ts);
        auto stored_time = parse_timestamp(*stored_ts);
        if (stored_time && !(incoming_time > stored_time)) {
          out_.stale.push_back(path_);
          return;
        }
      }
      replace(stored, json::value(std::move(incoming), stored.storage()));  // rules 3 and 4
      return;
    }
    if (incoming.is_object() && stored.is_object() && !timestamp_member(stored, keys_)) {
      merge_members(stored.get_object(), incoming.get_object());  // rule 5
      return;
    }
    if (!replace_arrays_ && incoming.is_array() && stored.is_array() && all_objects(incoming.get_array()) &&
        all_objects(stored.get_array())) {
      merge_arrays(stored.get_array(), incoming.get_array());  // rule 6
      return;
    }
    json::value replacement = without_null_members(std::move(incoming), keys_, stored.storage());  // rule 7
    if (!values_equal(stored, replacement, keys_)) replace(stored, std::move(replacement));
  }

  // Validation's entry for `incoming` if it is the next one in parsed_ (the usual case when
  // stored and incoming share their timestamped values), taken, or nullptr: one comparison
  // that spares finding the member and looking up the instant.
  const ParsedTimestamp* take_listed(const json::value& incoming) noexcept {
    const json::object* o = incoming.if_object();
    if (!o || parsed_next_ == parsed_.size() || parsed_[parsed_next_].value != o) return nullptr;
    return &parsed_[parsed_next_++];
  }

  // The instant of an incoming timestamp member that was not the next entry: from parsed_ if
  // validation listed it further on, else parsed. Merging asks for a subsequence of
  // validation's document order, so the search goes on from the previous match and the whole
  // merge scans parsed_ once. A member not found means the list describes another state (a
  // copy, say): it is dropped and the rest parsed.
  std::optional<Timestamp> incoming_instant(const json::value& member) {
    for (std::size_t i = parsed_next_; i < parsed_.size(); ++i) {
      if (parsed_[i].member == &member) {
        parsed_next_ = i + 1;
        return parsed_[i].instant;
      }
    }
    parsed_ = {};
    return parse_timestamp(member);
  }

  // The old value moves into the change; the change gets a copy of the new one. The
  // replacement lives in stored's storage, so swapping only exchanges the two values.
  void replace(json::value& stored, json::value&& replacement) {
    Change& c = new_change(ChangeOp::update);
    c.old_value.emplace(std::move(stored));
    c.new_value.emplace(replacement);
    stored.swap(replacement);
  }

  // A change at the current path, built in place in the list.
  Change& new_change(ChangeOp op) {
    Change& c = out_.changes.emplace_back();
    c.section = section_;
    c.op = op;
    c.path = path_;
    return c;
  }

  static bool all_objects(const json::array& a) {
    for (const json::value& e : a) {
      if (!e.is_object()) return false;
    }
    return true;
  }

  // Rule 6. Matched elements merge in place; the result keeps stored order (less the
  // elements client_is_master removes) and appends incoming-only elements.
  void merge_arrays(json::array& stored, json::array& incoming) {
    std::vector<std::size_t> match(incoming.size(), kNoMatch);  // incoming index -> stored index
    if (has_unique_ids(stored) && has_unique_ids(incoming)) {
      std::unordered_map<std::string, std::size_t> stored_by_id;
      stored_by_id.reserve(stored.size());
      for (std::size_t i = 0; i < stored.size(); ++i) stored_by_id.emplace(*element_id_key(stored[i]), i);
      for (std::size_t j = 0; j < incoming.size(); ++j) {
        auto it = stored_by_id.find(*element_id_key(incoming[j]));
        if (it != stored_by_id.end()) match[j] = it->second;
      }
    } else {
      for (std::size_t j = 0; j < incoming.size() && j < stored.size(); ++j) match[j] = j;
    }
    std::vector<bool> matched(stored.size(), false);
    for (std::size_t i : match) {
      if (i != kNoMatch) matched[i] = true;
    }
    const std::size_t mark = path_.size();
    // Removes are reported at their stored index; everything else at its result index.
    std::vector<std::size_t> result_index(stored.size());
    std::size_t kept = 0;
    for (std::size_t i = 0; i < stored.size(); ++i) {
      if (matched[i] || mode_ == MergeMode::server_is_master) {
        result_index[i] = kept++;
      } else {
        append_pointer_index(path_, i);
        emit_removes(stored[i]);
        path_.resize(mark);
        result_index[i] = kNoMatch;
      }
    }
    for (std::size_t j = 0; j < incoming.size(); ++j) {
      if (match[j] == kNoMatch) continue;
      append_pointer_index(path_, result_index[match[j]]);
      merge_value(stored[match[j]], incoming[j]);
      path_.resize(mark);
    }
    json::array result(stored.storage());
    result.reserve(kept + incoming.size());
    for (std::size_t i = 0; i < stored.size(); ++i) {
      if (result_index[i] != kNoMatch) result.push_back(std::move(stored[i]));
    }
    for (std::size_t j = 0; j < incoming.size(); ++j) {
      if (match[j] != kNoMatch) continue;
      append_pointer_index(path_, result.size());
      json::value added = without_null_members(std::move(incoming[j]), keys_, result.storage());
      emit_adds(added);
      result.push_back(std::move(added));
      path_.resize(mark);
    }
    stored = std::move(result);
  }

  void emit_adds(const json::value& v) { for_each_leaf(v, ChangeOp::add); }
  void emit_removes(const json::value& v) { for_each_leaf(v, ChangeOp::remove); }

  void for_each_leaf(const json::value& v, ChangeOp op) {
    if (v.is_object() && !v.get_object().empty() && !keys_.find(v.get_object())) {
      for (const json::key_value_pair& m : v.get_object()) {
        const std::size_t mark = path_.size();
        append_pointer_token(path_, std::string_view(m.key().data(), m.key().size()));
        for_each_leaf(m.value(), op);
        path_.resize(mark);
      }
      return;
    }
    Change& c = new_change(op);
    (op == ChangeOp::add ? c.new_value : c.old_value).emplace(v);
  }

  MergeMode mode_;
  Section section_;
  const TimestampKeys& keys_;
  std::span<const ParsedTimestamp> parsed_;
  std::size_t parsed_next_ = 0;  // the first entry not taken or passed
  bool replace_arrays_;          // rule 6 off: arrays are leaves, replaced whole (rule 7)
  MergeResult& out_;
  std::string path_;  // JSON Pointer of the node being merged
};

// An upper bound of the leaves in v (its scalars and empty containers): the most changes
// merging it can produce, less the removals of stored leaves.
std::size_t leaf_bound(const json::value& v) noexcept {
  std::size_t n = 0;
  if (const json::object* o = v.if_object()) {
    for (const json::key_value_pair& m : *o) n += leaf_bound(m.value());
  } else if (const json::array* a = v.if_array()) {
    for (const json::value& e : *a) n += leaf_bound(e);
  }
  return n == 0 ? 1 : n;
}

}  // namespace

MergeResult merge_section(json::object& stored, json::object incoming, MergeMode mode, Section section,
                          const TimestampKeys& keys, std::span<const ParsedTimestamp> parsed, bool replace_arrays) {
  MergeResult result;
  std::size_t bound = 0;
  for (const json::key_value_pair& m : incoming) bound += leaf_bound(m.value());
  result.changes.reserve(bound);  // no reallocation while merging, in the usual case
  Merger(mode, section, keys, parsed, replace_arrays, result).merge_members(stored, incoming);
  return result;
}

}  // namespace deviceshadow
