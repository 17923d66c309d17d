// libFuzzer target for the fleet-query filter parser (src/query/filter.cpp): any input either
// parses or is refused with invalid_filter at an offset within it; a parsed filter is evaluated
// against a fixed shadow and planned (thing ranges, field to index) without failing.
#include "query/filter.hpp"

#include "deviceshadow/error.hpp"

#include <cstdint>
#include <string_view>

namespace ds = deviceshadow;

namespace {

void check(bool ok) {
  if (!ok) __builtin_trap();
}

struct Shadow {
  ds::ShadowKey key{"plant-7/line-2/sensor-1", "main"};
  ds::ShadowRecord record;
  ds::TimestampKeys keys;
  Shadow() {
    record.reported.version = 4;
    record.reported.timestamp_ns = 1'795'748'400'000'000'000;
    record.reported.state_json =
        R"({"temp":{"value":21.5,"ts":"2026-11-27T03:00:00Z"},"fw":"1.2.0","n":[1,2.5,{"v":"x"}],"o":{"a~b":{"c/d":true}}})";
    record.reported.times_json = R"({"fw":1795748400000000001,"o":{"a~b":1795748400000000002}})";
    record.desired.version = 2;
    record.desired.timestamp_ns = 1'795'748'500'000'000'000;
    record.desired.state_json = R"({"fw":"1.3.0","n":[1]})";
  }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const Shadow shadow;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  try {
    const ds::query::Filter filter = ds::query::Filter::parse(text, 1'795'750'000'000'000'000);
    (void)filter.matches(ds::query::Subject(shadow.key, shadow.record, shadow.keys));
    (void)filter.thing_ranges();
    (void)filter.fields_to_index();
  } catch (const ds::Error& e) {
    check(e.code() == ds::ErrorCode::invalid_filter);
    check(e.details().offset && *e.details().offset <= size);
    check(!e.details().expected.empty());
  }
  return 0;
}
