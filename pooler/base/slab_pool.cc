// SlabPool: chunks from mmap, aligned to their size, blocks carved in order, freed blocks on a
// list per chunk.
#include "pooler/base/slab_pool.h"

#include <sanitizer/asan_interface.h>
#include <sys/mman.h>

#include <cstddef>
#include <new>

namespace pgsluice {

// A chunk starts with this header; blocks follow. Chunks are aligned to their size, so a
// block's chunk is its address rounded down.
struct SlabPool::Chunk {
  Chunk* prev = nullptr;  // in with_room_
  Chunk* next = nullptr;
  Chunk* next_mapped = nullptr;  // in all_
  Chunk* prev_mapped = nullptr;
  void* free = nullptr;  // freed blocks, each holding the next one's address
  size_t used = 0;       // blocks allocated
  size_t carved = 0;     // blocks handed out at least once (the rest were never touched)
  bool listed = false;   // in with_room_
};

namespace {
constexpr size_t kAlign = alignof(std::max_align_t);
constexpr size_t round_up(size_t n, size_t to) {
  return (n + to - 1) / to * to;
}
}  // namespace

#if defined(__SANITIZE_ADDRESS__)
// Two shadow granules' worth past ASan's 8-byte granularity, a multiple of kAlign so that the
// next block stays aligned.
const size_t SlabPool::kRedzone = 32;
#else
const size_t SlabPool::kRedzone = 0;
#endif

SlabPool::SlabPool(size_t block_size, size_t chunk_size)
    : block_size_(round_up(block_size < sizeof(void*) ? sizeof(void*) : block_size, kAlign)),
      chunk_size_(chunk_size),
      stride_(block_size_ + kRedzone),
      first_block_(round_up(sizeof(Chunk), kAlign)) {
  const bool usable = (chunk_size_ & (chunk_size_ - 1)) == 0 && chunk_size_ > first_block_ &&
                      stride_ <= chunk_size_ - first_block_;
  blocks_per_chunk_ = usable ? (chunk_size_ - first_block_) / stride_ : 0;
}

SlabPool::~SlabPool() {
  while (all_ != nullptr) {
    Chunk* next = all_->next_mapped;
    ASAN_UNPOISON_MEMORY_REGION(all_, chunk_size_);
    munmap(all_, chunk_size_);
    all_ = next;
  }
}

SlabPool::Chunk* SlabPool::chunk_of(void* block) const {
  return reinterpret_cast<Chunk*>(reinterpret_cast<uintptr_t>(block) & ~(chunk_size_ - 1));
}

SlabPool::Chunk* SlabPool::map_chunk() {
  // Twice the size, then the unaligned head and tail unmapped: mmap aligns to pages only.
  void* area =
      mmap(nullptr, 2 * chunk_size_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (area == MAP_FAILED) throw std::bad_alloc();
  auto start = reinterpret_cast<uintptr_t>(area);
  uintptr_t aligned = round_up(start, chunk_size_);
  if (aligned > start) munmap(area, aligned - start);
  uintptr_t end = start + 2 * chunk_size_;
  if (end > aligned + chunk_size_) {
    munmap(reinterpret_cast<void*>(aligned + chunk_size_), end - aligned - chunk_size_);
  }
  auto* chunk = new (reinterpret_cast<void*>(aligned)) Chunk;
  // Everything after the header is out of bounds until allocate() hands a block out; the
  // redzones stay so (a no-op without AddressSanitizer).
  ASAN_POISON_MEMORY_REGION(reinterpret_cast<char*>(chunk) + first_block_,
                            chunk_size_ - first_block_);
  chunk->next_mapped = all_;
  if (all_ != nullptr) all_->prev_mapped = chunk;
  all_ = chunk;
  ++chunks_;
  return chunk;
}

void SlabPool::unmap_chunk(Chunk* chunk) noexcept {
  if (chunk->prev_mapped != nullptr) chunk->prev_mapped->next_mapped = chunk->next_mapped;
  if (chunk->next_mapped != nullptr) chunk->next_mapped->prev_mapped = chunk->prev_mapped;
  if (all_ == chunk) all_ = chunk->next_mapped;
  ASAN_UNPOISON_MEMORY_REGION(chunk, chunk_size_);  // the address range may be mapped again
  munmap(chunk, chunk_size_);
  --chunks_;
}

void SlabPool::link(Chunk* chunk) {
  chunk->prev = nullptr;
  chunk->next = with_room_;
  if (with_room_ != nullptr) with_room_->prev = chunk;
  with_room_ = chunk;
  chunk->listed = true;
}

void SlabPool::unlink(Chunk* chunk) {
  if (chunk->prev != nullptr) chunk->prev->next = chunk->next;
  if (chunk->next != nullptr) chunk->next->prev = chunk->prev;
  if (with_room_ == chunk) with_room_ = chunk->next;
  chunk->prev = chunk->next = nullptr;
  chunk->listed = false;
}

void* SlabPool::allocate() {
  if (blocks_per_chunk_ == 0) throw std::bad_alloc();
  Chunk* chunk = with_room_;
  if (chunk == nullptr) {
    chunk = spare_ != nullptr ? spare_ : map_chunk();
    spare_ = nullptr;
    link(chunk);
  }
  void* block;
  if (chunk->free != nullptr) {
    block = chunk->free;
    ASAN_UNPOISON_MEMORY_REGION(block, block_size_);
    chunk->free = *static_cast<void**>(block);
  } else {
    block = reinterpret_cast<char*>(chunk) + first_block_ + chunk->carved * stride_;
    ASAN_UNPOISON_MEMORY_REGION(block, block_size_);
    ++chunk->carved;
  }
  if (++chunk->used == blocks_per_chunk_) unlink(chunk);
  ++allocated_;
  return block;
}

void SlabPool::deallocate(void* block) noexcept {
  if (block == nullptr) return;
  Chunk* chunk = chunk_of(block);
  *static_cast<void**>(block) = chunk->free;
  chunk->free = block;
  // A use after free is reported, as for a block of malloc's (a no-op in other builds).
  ASAN_POISON_MEMORY_REGION(block, block_size_);
  --allocated_;
  if (!chunk->listed) link(chunk);
  if (--chunk->used > 0) return;
  unlink(chunk);
  if (spare_ == nullptr) {
    // Kept for the next allocation; its blocks are handed out from the front again (all of
    // them are poisoned under AddressSanitizer, as after map_chunk).
    chunk->free = nullptr;
    chunk->carved = 0;
    spare_ = chunk;
    return;
  }
  unmap_chunk(chunk);
}

}  // namespace pgsluice
