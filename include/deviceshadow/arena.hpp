// A memory resource for the JSON of one request.
#pragma once

#include <boost/json/memory_resource.hpp>

#include <cstddef>
#include <type_traits>

namespace deviceshadow {

// Bump allocation: allocating moves a pointer, deallocating does nothing, and everything is
// freed at once when the arena is destroyed. Starts in the caller's buffer, if given, then
// takes blocks from the heap (the first as large as that buffer, at least 4 KiB), each twice
// the size of the one before. Not thread-safe; meant to live as long as one request's
// documents. json::monotonic_resource does the same with a longer allocation path, which
// showed in every parse and copy.
class Arena final : public boost::json::memory_resource {
 public:
  Arena() noexcept = default;
  Arena(void* buffer, std::size_t size) noexcept;
  Arena(const Arena&) = delete;
  Arena& operator=(const Arena&) = delete;
  ~Arena() override;

 private:
  void* do_allocate(std::size_t size, std::size_t alignment) override;
  void do_deallocate(void*, std::size_t, std::size_t) override {}
  bool do_is_equal(const boost::json::memory_resource& other) const noexcept override { return this == &other; }
  void* allocate_in_new_block(std::size_t size, std::size_t alignment);

  struct Block;
  static constexpr std::size_t kSmallestBlock = 4096;
  std::byte* next_ = nullptr;  // the free part of the current block: [next_, end_)
  std::byte* end_ = nullptr;
  Block* blocks_ = nullptr;  // heap blocks, newest first
  std::size_t next_block_size_ = kSmallestBlock;
};

}  // namespace deviceshadow

// Values in an Arena skip their destructors' deallocation walks, as for monotonic_resource.
template <>
struct boost::json::is_deallocate_trivial<deviceshadow::Arena> : std::true_type {};
