// The parse handler behind parse_json, for parsers that build only parts of a document (a
// boost::json::basic_parser handler of their own that hands it the events of the values they
// keep). Include only where such a parser is instantiated: it brings in the value stack.
#pragma once

#include "deviceshadow/json.hpp"

#include <boost/json/value_stack.hpp>

#include <cstdint>
#include <string>

namespace deviceshadow {

// Builds a json::value like boost::json::parser does, except that doubles are read from their
// text, correctly rounded (parse_json's number rules). After a complete value,
// stack.release() gives it; stack.reset(sp) starts the next one in storage sp.
struct ValueBuilder {
  static constexpr std::size_t max_object_size = json::object::max_size();
  static constexpr std::size_t max_array_size = json::array::max_size();
  static constexpr std::size_t max_key_size = json::string::max_size();
  static constexpr std::size_t max_string_size = json::string::max_size();

  // The stack of values under construction starts in `scratch` (a few KiB cover any write's
  // nesting) and moves to the heap only beyond it.
  ValueBuilder(unsigned char* scratch, std::size_t size) : stack({}, scratch, size) {}

  json::value_stack stack;
  std::string number_text;  // a number split across buffers (never, for one write)
  bool number_out_of_range = false;

  bool on_document_begin(json::error_code&) { return true; }
  bool on_document_end(json::error_code&) { return true; }
  bool on_object_begin(json::error_code&) { return true; }
  bool on_object_end(std::size_t n, json::error_code&) { stack.push_object(n); return true; }
  bool on_array_begin(json::error_code&) { return true; }
  bool on_array_end(std::size_t n, json::error_code&) { stack.push_array(n); return true; }
  bool on_key_part(json::string_view s, std::size_t, json::error_code&) { stack.push_chars(s); return true; }
  bool on_key(json::string_view s, std::size_t, json::error_code&) { stack.push_key(s); return true; }
  bool on_string_part(json::string_view s, std::size_t, json::error_code&) { stack.push_chars(s); return true; }
  bool on_string(json::string_view s, std::size_t, json::error_code&) { stack.push_string(s); return true; }
  bool on_number_part(json::string_view s, json::error_code&) {
    number_text.append(s.data(), s.size());
    return true;
  }
  bool on_int64(std::int64_t i, json::string_view, json::error_code&) {
    number_text.clear();
    stack.push_int64(i);
    return true;
  }
  bool on_uint64(std::uint64_t u, json::string_view, json::error_code&) {
    number_text.clear();
    stack.push_uint64(u);
    return true;
  }
  bool on_double(double, json::string_view s, json::error_code& ec);
  bool on_bool(bool b, json::error_code&) { stack.push_bool(b); return true; }
  bool on_null(json::error_code&) { stack.push_null(); return true; }
  bool on_comment_part(json::string_view, json::error_code&) { return true; }
  bool on_comment(json::string_view, json::error_code&) { return true; }
};

}  // namespace deviceshadow
