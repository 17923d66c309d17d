#include "deviceshadow/arena.hpp"
#include "deviceshadow/json.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <string>

namespace ds = deviceshadow;
namespace json = boost::json;

namespace {

bool aligned(const void* p, std::size_t alignment) { return reinterpret_cast<std::uintptr_t>(p) % alignment == 0; }

TEST(Arena, HonoursEveryAlignmentInTheBufferAndBeyond) {
  alignas(64) unsigned char buffer[100];
  ds::Arena arena(buffer + 1, sizeof buffer - 1);  // a misaligned start
  for (int round = 0; round < 200; ++round) {
    for (std::size_t alignment : {1, 2, 4, 8, 16, 64}) {
      const std::size_t size = 1 + static_cast<std::size_t>(round) % 13;
      auto* p = static_cast<unsigned char*>(arena.allocate(size, alignment));
      ASSERT_TRUE(aligned(p, alignment)) << round << ' ' << alignment;
      std::fill(p, p + size, static_cast<unsigned char>(round));  // ASan checks the bounds
    }
  }
}

TEST(Arena, AllocationsDoNotOverlap) {
  ds::Arena arena;
  std::vector<std::pair<unsigned char*, std::size_t>> blocks;
  for (std::size_t size = 1; size < 40000; size = size * 3 / 2 + 1) {  // outgrows several heap blocks
    auto* p = static_cast<unsigned char*>(arena.allocate(size, 8));
    std::fill(p, p + size, static_cast<unsigned char>(blocks.size()));
    blocks.emplace_back(p, size);
  }
  for (std::size_t i = 0; i < blocks.size(); ++i) {
    const auto [p, size] = blocks[i];
    for (std::size_t k = 0; k < size; ++k) ASSERT_EQ(p[k], static_cast<unsigned char>(i)) << i;
  }
}

TEST(Arena, RefusesSizesNoBlockCanHold) {
  ds::Arena arena;
  EXPECT_THROW(static_cast<void>(arena.allocate(SIZE_MAX - 8, 8)), std::bad_alloc);
  EXPECT_NE(arena.allocate(16, 8), nullptr);  // still usable
}

TEST(Arena, HoldsADocumentLargerThanItsBuffer) {
  std::string text = "{";
  for (int i = 0; i < 500; ++i) text += "\"key" + std::to_string(i) + "\":{\"value\":\"" + std::string(30, 'x') + "\"},";
  text.back() = '}';
  unsigned char buffer[512];
  ds::Arena arena(buffer, sizeof buffer);
  json::value v = ds::parse_json(text, 64, &arena);
  EXPECT_EQ(ds::to_json(v), ds::to_json(ds::parse_json(text)));
  EXPECT_TRUE(v.storage().is_deallocate_trivial());
}

}  // namespace
