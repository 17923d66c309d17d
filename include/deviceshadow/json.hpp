// JSON text <-> boost::json::value, with deviceshadow's own number rules.
//
// Boost.JSON is the document model, but its 1.81 parser rounds some doubles wrongly and its
// serializer writes 22.5 as 2.25E1; deviceshadow parses and serializes with its own number
// handling instead: integers in the int64/uint64 range stay exact, every other number is the
// correctly rounded IEEE-754 double, written back in shortest round-trip form.
#pragma once

#include <boost/json/value.hpp>

#include <cstddef>
#include <string>
#include <string_view>

namespace deviceshadow {

namespace json = boost::json;

// Parses one JSON document into storage `sp` (a request can pass an arena, see arena.hpp).
// Throws Error: invalid_json (with line and column) for malformed JSON, invalid UTF-8, trailing
// data, or numbers outside the double range; too_deep when arrays/objects nest deeper than
// max_depth.
json::value parse_json(std::string_view text, std::size_t max_depth = 64, json::storage_ptr sp = {});
// parse_json for a request whose values may nest `limit` levels (Limits::max_depth) inside
// `envelope` levels of the request's own members. The parser's guard sits 8 levels above, so
// that a value slightly too deep reaches the validation that names its path; deeper input stops
// in the parser, with too_deep naming `limit`.
json::value parse_request_json(std::string_view text, std::size_t limit, std::size_t envelope);
// Deep enough for any state stored under any --max-depth (at most 1,000) with its envelope.
inline constexpr std::size_t kStoredDepthBound = 4096;
// parse_json for text a store kept (a section's state, its leaf times, a job): text that does
// not parse is stored data gone bad, not the caller's mistake, so it throws Error internal.
json::value parse_stored_json(std::string_view text, json::storage_ptr sp = {});

// Compact JSON text of v. Doubles are written in shortest round-trip form and always look
// like doubles ("22.5", "1.0", "1e+21"); non-finite doubles, which parse_json never yields,
// are written as null.
std::string to_json(const json::value& v);
void append_json(std::string& out, const json::value& v);
void append_json_string(std::string& out, std::string_view s);

// Appends "/" + key escaped as an RFC 6901 reference token ("~" -> "~0", "/" -> "~1").
void append_pointer_token(std::string& pointer, std::string_view key);
void append_pointer_index(std::string& pointer, std::size_t index);

// Numeric equality across int64, uint64 and double, exact (no rounding through double).
// Both arguments must be numbers.
bool numbers_equal(const json::value& a, const json::value& b) noexcept;

}  // namespace deviceshadow
