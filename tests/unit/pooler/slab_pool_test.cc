// SlabPool (pooler/base/slab_pool.h): distinct aligned blocks across chunks, reuse of freed
// blocks, chunks given back once empty (one kept), chunk sizes, and AddressSanitizer's view of
// free blocks and of the redzones between blocks.
#include "pooler/base/slab_pool.h"

#include <gtest/gtest.h>
#include <sanitizer/asan_interface.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <new>
#include <set>
#include <vector>

namespace pgsluice {
namespace {

TEST(SlabPool, HandsOutDistinctAlignedWritableBlocksAcrossChunks) {
  SlabPool pool(2400);
  EXPECT_EQ(pool.block_size() % alignof(std::max_align_t), 0U);
  EXPECT_GE(pool.block_size(), 2400U);
  size_t n = pool.blocks_per_chunk() * 3 + 1;  // four chunks
  std::vector<void*> blocks;
  std::set<uintptr_t> seen;
  for (size_t i = 0; i < n; ++i) {
    void* b = pool.allocate();
    EXPECT_EQ(reinterpret_cast<uintptr_t>(b) % alignof(std::max_align_t), 0U);
    std::memset(b, static_cast<int>(i), 2400);
    blocks.push_back(b);
    seen.insert(reinterpret_cast<uintptr_t>(b));
  }
  EXPECT_EQ(seen.size(), n);
  // No two blocks overlap: each still holds what was written into it.
  for (size_t i = 0; i < n; ++i) {
    auto* bytes = static_cast<unsigned char*>(blocks[i]);
    EXPECT_EQ(bytes[2399], static_cast<unsigned char>(i));
  }
  EXPECT_EQ(pool.chunks(), 4U);
  EXPECT_EQ(pool.allocated(), n);
  for (void* b : blocks) pool.deallocate(b);
  EXPECT_EQ(pool.allocated(), 0U);
  EXPECT_EQ(pool.chunks(), 1U);  // the spare
}

TEST(SlabPool, ReusesAFreedBlockBeforeCarvingANewOne) {
  SlabPool pool(100);
  void* a = pool.allocate();
  void* b = pool.allocate();
  pool.deallocate(a);
  EXPECT_EQ(pool.allocate(), a);
  pool.deallocate(b);
  pool.deallocate(a);
  EXPECT_EQ(pool.chunks(), 1U);
}

TEST(SlabPool, AFullChunkTakesBlocksAgainOnceOneIsFreed) {
  SlabPool pool(4096);
  std::vector<void*> first;
  for (size_t i = 0; i < pool.blocks_per_chunk(); ++i) first.push_back(pool.allocate());
  void* next = pool.allocate();  // a second chunk
  EXPECT_EQ(pool.chunks(), 2U);
  pool.deallocate(first[3]);
  EXPECT_EQ(pool.allocate(), first[3]);
  EXPECT_EQ(pool.chunks(), 2U);
  pool.deallocate(next);  // its chunk is empty: kept as the spare
  EXPECT_EQ(pool.chunks(), 2U);
  for (void* b : first) pool.deallocate(b);  // a second empty chunk: unmapped
  EXPECT_EQ(pool.chunks(), 1U);
  // The spare serves the next block.
  void* again = pool.allocate();
  EXPECT_EQ(pool.chunks(), 1U);
  pool.deallocate(again);
}

#if defined(__SANITIZE_ADDRESS__)
// Under AddressSanitizer a freed block is poisoned, as a freed malloc block is.
TEST(SlabPool, AFreedBlockIsPoisonedUnderAddressSanitizer) {
  SlabPool pool(256);
  void* a = pool.allocate();
  EXPECT_FALSE(__asan_address_is_poisoned(a));
  pool.deallocate(a);
  EXPECT_TRUE(__asan_address_is_poisoned(static_cast<char*>(a) + 100));
  EXPECT_EQ(pool.allocate(), a);
  EXPECT_FALSE(__asan_address_is_poisoned(static_cast<char*>(a) + 100));
  pool.deallocate(a);
}

// ... and the bytes right after a block, up to the next one, are a redzone: an overflow of one
// block into its neighbour is reported, as between two blocks of malloc's.
TEST(SlabPool, BlocksAreSeparatedByRedzonesUnderAddressSanitizer) {
  SlabPool pool(4096);
  EXPECT_GE(SlabPool::kRedzone, 16U);
  auto* a = static_cast<char*>(pool.allocate());
  auto* b = static_cast<char*>(pool.allocate());
  EXPECT_EQ(b - a, static_cast<std::ptrdiff_t>(4096 + SlabPool::kRedzone));
  EXPECT_FALSE(__asan_address_is_poisoned(a + 4095));
  EXPECT_TRUE(__asan_address_is_poisoned(a + 4096));
  EXPECT_TRUE(__asan_address_is_poisoned(b - 1));
  EXPECT_EQ(__asan_region_is_poisoned(a, 4096), nullptr);
  EXPECT_EQ(__asan_region_is_poisoned(a, 4097), a + 4096);
  // A block not yet handed out is poisoned too.
  EXPECT_TRUE(__asan_address_is_poisoned(b + 4096 + SlabPool::kRedzone));
  pool.deallocate(a);
  pool.deallocate(b);
}

// An overflow by one byte is reported at the write (in a child: the report ends the process).
TEST(SlabPoolDeathTest, AnOverflowIntoTheRedzoneIsReported) {
  EXPECT_DEATH(
      {
        SlabPool pool(64);
        auto* a = static_cast<volatile char*>(pool.allocate());
        a[64] = 1;
      },
      "AddressSanitizer");
}
#else
TEST(SlabPool, BlocksAreContiguousWithoutAddressSanitizer) {
  EXPECT_EQ(SlabPool::kRedzone, 0U);
  SlabPool pool(4096);
  auto* a = static_cast<char*>(pool.allocate());
  auto* b = static_cast<char*>(pool.allocate());
  EXPECT_EQ(b - a, 4096);
  pool.deallocate(a);
  pool.deallocate(b);
}
#endif

// A chunk of another size: aligned to it, so that a block finds its chunk by its address.
TEST(SlabPool, LargerChunksHoldMoreBlocks) {
  SlabPool pool(16 * 1024, 256 * 1024);
  EXPECT_EQ(pool.chunk_size(), 256U * 1024);
  EXPECT_EQ(pool.blocks_per_chunk(), 15U);  // the first block's place holds the header
  std::vector<void*> blocks;
  for (size_t i = 0; i <= pool.blocks_per_chunk(); ++i) blocks.push_back(pool.allocate());
  EXPECT_EQ(pool.chunks(), 2U);
  for (void* b : blocks) pool.deallocate(b);
  EXPECT_EQ(pool.chunks(), 1U);
}

TEST(SlabPool, AChunkSizeNotAPowerOfTwoIsRefused) {
  SlabPool pool(1024, 48 * 1024);
  EXPECT_EQ(pool.blocks_per_chunk(), 0U);
  EXPECT_THROW(pool.allocate(), std::bad_alloc);
}

TEST(SlabPool, ABlockLargerThanAChunkIsRefused) {
  SlabPool pool(SlabPool::kChunkSize);
  EXPECT_EQ(pool.blocks_per_chunk(), 0U);
  EXPECT_THROW(pool.allocate(), std::bad_alloc);
}

}  // namespace
}  // namespace pgsluice
