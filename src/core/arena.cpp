#include "deviceshadow/arena.hpp"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <new>

namespace deviceshadow {

struct Arena::Block {
  Block* previous;
};

Arena::Arena(void* buffer, std::size_t size) noexcept
    : next_(static_cast<std::byte*>(buffer)), end_(static_cast<std::byte*>(buffer) + size),
      next_block_size_(std::max(kSmallestBlock, size)) {}

Arena::~Arena() {
  while (blocks_) {
    Block* previous = blocks_->previous;
    ::operator delete(blocks_);
    blocks_ = previous;
  }
}

void* Arena::do_allocate(std::size_t size, std::size_t alignment) {
  // Alignments are powers of two (a memory_resource requirement).
  const std::size_t padding = (0 - reinterpret_cast<std::uintptr_t>(next_)) & (alignment - 1);
  const auto available = static_cast<std::size_t>(end_ - next_);
  if (size > available || padding > available - size) return allocate_in_new_block(size, alignment);
  std::byte* p = next_ + padding;
  next_ = p + size;
  return p;
}

// Out of line and cold, so that do_allocate's common path saves no registers.
[[gnu::noinline, gnu::cold]] void* Arena::allocate_in_new_block(std::size_t size, std::size_t alignment) {
  constexpr std::size_t kLargest = std::numeric_limits<std::size_t>::max() / 4;
  if (size > kLargest || alignment > kLargest) throw std::bad_alloc();
  const std::size_t needed = sizeof(Block) + alignment + size;
  while (next_block_size_ < needed) next_block_size_ *= 2;
  auto* block = static_cast<Block*>(::operator new(next_block_size_));
  block->previous = blocks_;
  blocks_ = block;
  next_ = reinterpret_cast<std::byte*>(block + 1);
  end_ = reinterpret_cast<std::byte*>(block) + next_block_size_;
  next_block_size_ *= 2;
  return do_allocate(size, alignment);
}

}  // namespace deviceshadow
