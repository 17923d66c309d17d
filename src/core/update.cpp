// Validation of incoming states (depth, timestamps, array ids, numbers) and the composed write:
// merge, acknowledgement and the state size limit (docs/semantics.md).
#include "core/tree.hpp"
#include "deviceshadow/document.hpp"
#include "deviceshadow/error.hpp"

#include <cmath>
#include <iterator>

namespace deviceshadow {

std::string_view to_string(Section s) noexcept { return s == Section::reported ? "reported" : "desired"; }

std::string_view to_string(MergeMode m) noexcept {
  return m == MergeMode::server_is_master ? "server_is_master" : "client_is_master";
}

std::string_view to_string(ChangeOp op) noexcept {
  switch (op) {
    case ChangeOp::add: return "add";
    case ChangeOp::update: return "update";
    case ChangeOp::remove: return "remove";
  }
  return "update";
}

std::optional<Section> parse_section(std::string_view s) noexcept {
  if (s == "reported") return Section::reported;
  if (s == "desired") return Section::desired;
  return std::nullopt;
}

std::optional<MergeMode> parse_merge_mode(std::string_view s) noexcept {
  if (s == "server_is_master") return MergeMode::server_is_master;
  if (s == "client_is_master") return MergeMode::client_is_master;
  return std::nullopt;
}

void append_json(std::string& out, const Change& c, bool with_section) {
  out += '{';
  if (with_section) {
    out += "\"section\":\"";
    out += to_string(c.section);
    out += "\",";
  }
  out += "\"op\":\"";
  out += to_string(c.op);
  out += "\",\"path\":";
  append_json_string(out, c.path);
  if (c.old_value) {
    out += ",\"old\":";
    append_json(out, *c.old_value);
  }
  if (c.new_value) {
    out += ",\"new\":";
    append_json(out, *c.new_value);
  }
  out += '}';
}

void append_json(std::string& out, const Acknowledgement& a) {
  out += "{\"path\":";
  append_json_string(out, a.path);
  out += ",\"value\":";
  append_json(out, a.value);
  out += '}';
}

namespace {

class StateValidator {
 public:
  explicit StateValidator(const DocumentOptions& options) : options_(options) {
    steps_.reserve(16);   // deeper states grow it
    parsed_.reserve(64);  // as do writes of more timestamped values
  }

  // Checks a whole state; returns the timestamps it parsed, in document order.
  std::vector<ParsedTimestamp> check(const json::object& state) && {
    members(state, 0, false);
    return std::move(parsed_);
  }

 private:
  void members(const json::object& o, std::size_t depth, bool inside_timestamped) {
    for (const json::key_value_pair& m : o) {
      steps_.push_back({std::string_view(m.key().data(), m.key().size()), kKey});
      value(m.value(), depth + 1, inside_timestamped);
      steps_.pop_back();
    }
  }

  static constexpr std::size_t kKey = static_cast<std::size_t>(-1);

  // One step of the path to the node being checked: a member key, or an array index.
  struct Step {
    std::string_view key;
    std::size_t index;  // kKey for a member
  };

  void value(const json::value& v, std::size_t depth, bool inside_timestamped) {
    if (depth > options_.limits.max_depth) throw Error::too_deep(pointer(), options_.limits.max_depth);
    switch (v.kind()) {
      case json::kind::object: {
        const json::object& o = v.get_object();
        bool timestamped = inside_timestamped;
        if (!inside_timestamped) {
          if (const json::value* ts = options_.timestamp_keys.find(o)) {
            timestamped = true;
            std::string why;
            const std::optional<Timestamp> instant = parse_timestamp(*ts, &why);
            if (!instant) {
              std::string path = pointer();
              append_pointer_token(path, options_.timestamp_keys.key_in(o));
              throw Error::invalid_timestamp(std::move(path), why);
            }
            parsed_.push_back({&o, ts, *instant});
          }
        }
        members(o, depth, timestamped);
        break;
      }
      case json::kind::array: {
        const json::array& a = v.get_array();
        if (!inside_timestamped) check_ids(a);
        for (std::size_t i = 0; i < a.size(); ++i) {
          steps_.push_back({{}, i});
          value(a[i], depth + 1, inside_timestamped);
          steps_.pop_back();
        }
        break;
      }
      case json::kind::double_:
        if (!std::isfinite(v.get_double())) {
          std::string path = pointer();
          throw Error(ErrorCode::invalid_json, "number out of range at " + path, ErrorDetails{.path = path});
        }
        break;
      default:
        break;
    }
  }

  // An array whose elements are all objects with string or integer ids is matched by id,
  // so its ids must be unique.
  void check_ids(const json::array& a) {
    if (a.empty()) return;
    for (const json::value& e : a) {
      if (!element_id_key(e)) return;
    }
    if (!has_unique_ids(a)) {
      std::string path = pointer();
      throw Error::invalid_request("duplicate id in the array at " + path, path);
    }
  }

  // The JSON Pointer of the node being checked, built only for an error.
  std::string pointer() const {
    std::string path;
    for (const Step& s : steps_) {
      if (s.index == kKey) {
        append_pointer_token(path, s.key);
      } else {
        append_pointer_index(path, s.index);
      }
    }
    return path;
  }

  const DocumentOptions& options_;
  std::vector<Step> steps_;
  std::vector<ParsedTimestamp> parsed_;
};

std::string serialize_within_limit(const json::object& state, Section section, const Limits& limits) {
  std::string text = to_json(state);
  if (text.size() > limits.max_state_bytes) {
    throw Error::too_large(std::string(to_string(section)) + " state", text.size(), limits.max_state_bytes);
  }
  return text;
}

}  // namespace

std::vector<ParsedTimestamp> validate_state(const json::object& state, const DocumentOptions& options) {
  return StateValidator(options).check(state);
}

UpdateOutcome apply_update(json::object reported, json::object desired, json::object incoming,
                           const SectionWrite& write, const DocumentOptions& options) {
  SectionInput input{write.section, std::move(incoming), write.mode};
  return apply_update(std::move(reported), std::move(desired), std::span(&input, 1), {write.acknowledge, false},
                      options);
}

UpdateOutcome apply_update(json::object reported, json::object desired, std::span<SectionInput> inputs,
                           const WriteRules& rules, const DocumentOptions& options) {
  if (inputs.size() == 2 && inputs[0].section == inputs[1].section) {
    throw Error(ErrorCode::internal, "a write names one section twice");
  }
  std::vector<ParsedTimestamp> parsed[2];
  for (std::size_t i = 0; i < inputs.size(); ++i) parsed[i] = validate_state(inputs[i].state, options);
  const TimestampKeys& keys = options.timestamp_keys;
  // Move-construct (not assign): assignment across storages would copy out of the caller's arena.
  UpdateOutcome out{.reported = std::move(reported), .desired = std::move(desired)};
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    const Section section = inputs[i].section;
    json::object& target = section == Section::reported ? out.reported : out.desired;
    MergeResult merged = merge_section(target, std::move(inputs[i].state), inputs[i].mode, section, keys, parsed[i],
                                       rules.replace_arrays);
    (section == Section::reported ? out.reported_changed : out.desired_changed) = !merged.changes.empty();
    if (out.changes.empty()) {
      out.changes = std::move(merged.changes);
    } else {
      std::move(merged.changes.begin(), merged.changes.end(), std::back_inserter(out.changes));
    }
    if (inputs.size() == 1) {
      out.stale = std::move(merged.stale);
    } else {
      for (const std::string& path : merged.stale) out.stale.push_back("/" + std::string(to_string(section)) + path);
    }
  }
  if (rules.acknowledge) {
    out.acknowledged = acknowledge(out.desired, out.reported, keys);
    for (const Acknowledgement& a : out.acknowledged) {
      out.changes.push_back({Section::desired, ChangeOp::remove, a.path, a.value, std::nullopt});
    }
    if (!out.acknowledged.empty()) out.desired_changed = true;
  }
  if (out.reported_changed) out.reported_json = serialize_within_limit(out.reported, Section::reported, options.limits);
  if (out.desired_changed) out.desired_json = serialize_within_limit(out.desired, Section::desired, options.limits);
  return out;
}

}  // namespace deviceshadow
