// Equality, acknowledgement and delta (docs/semantics.md, "Acknowledgement and delta").
#include "core/tree.hpp"
#include "deviceshadow/document.hpp"

namespace deviceshadow {
namespace {

// Member-wise equality of two objects, skipping the named member on each side (the
// timestamp of a timestamped value; empty means skip nothing).
bool objects_equal(const json::object& a, std::string_view skip_a, const json::object& b,
                   std::string_view skip_b, const TimestampKeys& keys) {
  std::size_t size_a = a.size() - (skip_a.empty() ? 0 : 1);
  std::size_t size_b = b.size() - (skip_b.empty() ? 0 : 1);
  if (size_a != size_b) return false;
  for (const json::key_value_pair& m : a) {
    std::string_view key(m.key().data(), m.key().size());
    if (!skip_a.empty() && key == skip_a) continue;
    if (!skip_b.empty() && key == skip_b) return false;
    const json::value* other = b.if_contains(m.key());
    if (!other || !values_equal(m.value(), *other, keys)) return false;
  }
  return true;
}

// A plain (non-timestamped) object with members: something acknowledgement descends into.
bool is_branch(const json::value& v, const TimestampKeys& keys) {
  return v.is_object() && !v.get_object().empty() && !keys.find(v.get_object());
}

// The reported object a desired branch is matched against. A timestamped reported value
// counts too: desired /mode/value is compared with the "value" member of its payload.
const json::object* counterpart_object(const json::value* v) {
  return v && v->is_object() ? &v->get_object() : nullptr;
}

void acknowledge_members(json::object& desired, const json::object* reported, const TimestampKeys& keys,
                         std::string& path, std::vector<Acknowledgement>& out) {
  std::size_t hint = 0;
  for (std::size_t i = 0; i < desired.size();) {
    auto it = desired.begin() + static_cast<std::ptrdiff_t>(i);
    const json::value* counterpart = nullptr;
    if (reported) {
      auto found = find_member(*reported, std::string_view(it->key().data(), it->key().size()), hint);
      if (found != reported->end()) counterpart = &found->value();
    }
    const std::size_t mark = path.size();
    append_pointer_token(path, std::string_view(it->key().data(), it->key().size()));
    bool remove = false;
    if (is_branch(it->value(), keys)) {
      if (const json::object* sub = counterpart_object(counterpart)) {
        acknowledge_members(it->value().get_object(), sub, keys, path, out);
        remove = it->value().get_object().empty();  // emptied by acknowledgement
      }
    } else if (counterpart && values_equal(it->value(), *counterpart, keys)) {
      out.push_back({path, std::move(it->value())});
      remove = true;
    }
    path.resize(mark);
    if (remove) {
      desired.stable_erase(it);
    } else {
      ++i;
    }
  }
}

json::object delta_members(const json::object& desired, const json::object* reported, const TimestampKeys& keys) {
  json::object out;
  for (const json::key_value_pair& m : desired) {
    const json::value* counterpart = reported ? reported->if_contains(m.key()) : nullptr;
    if (is_branch(m.value(), keys)) {
      json::object sub = delta_members(m.value().get_object(), counterpart_object(counterpart), keys);
      if (!sub.empty()) out.emplace(m.key(), std::move(sub));
    } else if (!counterpart || !values_equal(m.value(), *counterpart, keys)) {
      out.emplace(m.key(), m.value());
    }
  }
  return out;
}

}  // namespace

bool values_equal(const json::value& a, const json::value& b, const TimestampKeys& keys) {
  if (a.is_number() && b.is_number()) return numbers_equal(a, b);
  if (a.kind() != b.kind()) return false;
  switch (a.kind()) {
    case json::kind::object: {
      const json::object& oa = a.get_object();
      const json::object& ob = b.get_object();
      std::string_view ts_a = keys.key_in(oa);
      std::string_view ts_b = keys.key_in(ob);
      return objects_equal(oa, ts_a, ob, ts_b, keys);
    }
    case json::kind::array: {
      const json::array& aa = a.get_array();
      const json::array& ab = b.get_array();
      if (aa.size() != ab.size()) return false;
      for (std::size_t i = 0; i < aa.size(); ++i) {
        if (!values_equal(aa[i], ab[i], keys)) return false;
      }
      return true;
    }
    case json::kind::string: return a.get_string() == b.get_string();
    case json::kind::bool_: return a.get_bool() == b.get_bool();
    case json::kind::null: return true;
    default: return false;  // numbers handled above
  }
}

std::vector<Acknowledgement> acknowledge(json::object& desired, const json::object& reported,
                                         const TimestampKeys& keys) {
  std::vector<Acknowledgement> out;
  std::string path;
  acknowledge_members(desired, &reported, keys, path, out);
  return out;
}

json::object compute_delta(const json::object& desired, const json::object& reported, const TimestampKeys& keys) {
  return delta_members(desired, &reported, keys);
}

}  // namespace deviceshadow
