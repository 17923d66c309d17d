// Cursors of fleet queries: the last shadow of a page, sealed with AES-256-GCM so that a cursor
// reveals no names and works only with the filter, sort and token it was made for (the
// "binding", authenticated with it). The key is a file's (it survives restarts and can be
// shared by several shadowd) or, without one, random per process.
#pragma once

#include "deviceshadow/store.hpp"

#include <array>
#include <string>
#include <string_view>

namespace deviceshadow::query {

class CursorKey {
 public:
  // A key of 32 random bytes.
  static CursorKey random();
  // The key a file holds (the SHA-256 of its contents); a missing file is created first, readable
  // by its owner only, with 32 random bytes. Throws std::runtime_error when it cannot be read or
  // created, holds fewer than 16 bytes, or group or others have any access to it.
  static CursorKey from_file(const std::string& path);

  // `position`: what else the query needs to resume (a sorted search's value), sealed too.
  std::string seal(const ShadowKey& last, std::string_view binding, std::string_view position = {}) const;
  // Throws invalid_request (field "cursor") for a cursor this key did not seal with `binding`.
  ShadowKey open(std::string_view cursor, std::string_view binding, std::string* position = nullptr) const;

 private:
  std::array<unsigned char, 32> key_{};
};

// The binding of a query's cursors: its filter, sort and token (the token's hash; "" when open).
std::string cursor_binding(std::string_view filter, std::string_view sort, std::string_view token);

}  // namespace deviceshadow::query
