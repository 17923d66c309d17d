// libFuzzer target over the whole document pipeline: parse -> validate -> merge ->
// acknowledge -> delta -> serialize. Input: one flag byte, then JSON text
// [stored reported, stored desired, incoming state] (missing parts are {}).
// Besides crashes, leaks and UB it traps on broken invariants.
#include "deviceshadow/document.hpp"
#include "deviceshadow/error.hpp"

#include <cstdint>
#include <string_view>

namespace ds = deviceshadow;
namespace json = boost::json;

namespace {

const json::object& object_at(const json::array& a, std::size_t i) {
  static const json::object empty;
  return i < a.size() && a[i].is_object() ? a[i].get_object() : empty;
}

void check(bool ok) {
  if (!ok) __builtin_trap();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 1) return 0;
  const std::uint8_t flags = data[0];
  std::string_view text(reinterpret_cast<const char*>(data + 1), size - 1);
  ds::DocumentOptions options;
  options.limits.max_depth = 16;
  try {
    json::value input = ds::parse_json(text, 40);
    // Serialization round-trips exactly.
    const std::string serialized = ds::to_json(input);
    check(ds::to_json(ds::parse_json(serialized, 40)) == serialized);
    if (!input.is_array()) return 0;
    const json::array& parts = input.get_array();
    // Stored sections are always the product of validated writes: build them that way.
    const ds::TimestampKeys& keys = options.timestamp_keys;
    json::object reported, desired;
    ds::validate_state(object_at(parts, 0), options);
    ds::validate_state(object_at(parts, 1), options);
    ds::merge_section(reported, object_at(parts, 0), ds::MergeMode::server_is_master, ds::Section::reported, keys);
    ds::merge_section(desired, object_at(parts, 1), ds::MergeMode::server_is_master, ds::Section::desired, keys);
    ds::SectionWrite write;
    write.section = flags & 1 ? ds::Section::desired : ds::Section::reported;
    write.mode = flags & 2 ? ds::MergeMode::client_is_master : ds::MergeMode::server_is_master;
    write.acknowledge = !(flags & 4);
    ds::UpdateOutcome out = ds::apply_update(reported, desired, object_at(parts, 2), write, options);
    if (write.acknowledge) {
      // Nothing pending equals what is reported.
      check(ds::to_json(ds::compute_delta(out.desired, out.reported, keys)) == ds::to_json(out.desired));
    }
    check(out.changed() == !out.changes.empty());
    std::string rendered;
    for (const ds::Change& c : out.changes) ds::append_json(rendered, c);
    check(out.changes.empty() == rendered.empty());
    // Merging the result into itself changes nothing.
    json::object again = out.reported;
    check(ds::merge_section(again, out.reported, write.mode, ds::Section::reported, keys).changes.empty());
  } catch (const ds::Error&) {
    // Rejected input is fine; crashing on it is not.
  }
  return 0;
}
