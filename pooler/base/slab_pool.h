// A pool of equal-sized blocks carved from aligned chunks of their own, for memory made in
// bursts: the channels' read buffers (io_buffers.h). From malloc's heap, 500 clients logging in
// at once left what lives on (the clients, their parameters) between the read buffers of their
// neighbours; once the buffers were freed, the holes were smaller than a page and stayed
// resident, 1-3 kB per idle client (issue 17, docs/profile.md 0c′, 0c″). Here such blocks sit
// side by side, and a chunk whose blocks are all free goes back to the kernel (one empty chunk is
// kept, so that a client connecting and leaving again and again does not map and unmap a chunk
// each time).
//
// Under AddressSanitizer every block is followed by a poisoned redzone and free blocks are
// poisoned, so an overflow from one block into the next and a use after free are reported as
// they are for malloc's blocks; the same code runs in every build, only the stride differs.
//
// Not thread-safe: its owner locks, or uses it on one thread only.
#pragma once

#include <cstddef>
#include <cstdint>

namespace pgsluice {

class SlabPool {
 public:
  static constexpr size_t kChunkSize = 64 * 1024;
  // Between two blocks under AddressSanitizer (0 in other builds).
  static const size_t kRedzone;

  // Blocks of at least `block_size` bytes, aligned for any type (alignof(std::max_align_t)),
  // in chunks of `chunk_size` bytes (a power of two, at least a page).
  explicit SlabPool(size_t block_size, size_t chunk_size = kChunkSize);
  SlabPool(const SlabPool&) = delete;
  SlabPool& operator=(const SlabPool&) = delete;
  // Unmaps every chunk: the blocks still allocated are gone with it.
  ~SlabPool();

  // A block; std::bad_alloc if no chunk can be mapped.
  void* allocate();
  // A block of this pool, back to it.
  void deallocate(void* block) noexcept;

  [[nodiscard]] size_t block_size() const { return block_size_; }
  [[nodiscard]] size_t blocks_per_chunk() const { return blocks_per_chunk_; }
  [[nodiscard]] size_t chunk_size() const { return chunk_size_; }
  // Chunks mapped, the kept empty one included.
  [[nodiscard]] size_t chunks() const { return chunks_; }
  [[nodiscard]] size_t allocated() const { return allocated_; }

 private:
  struct Chunk;
  [[nodiscard]] Chunk* chunk_of(void* block) const;
  Chunk* map_chunk();
  void unmap_chunk(Chunk* chunk) noexcept;
  void link(Chunk* chunk);
  void unlink(Chunk* chunk);

  size_t block_size_;
  size_t chunk_size_;
  size_t stride_;  // from one block to the next: the block and its redzone
  size_t blocks_per_chunk_;
  size_t first_block_;          // offset of the first block in a chunk (after its header)
  Chunk* with_room_ = nullptr;  // chunks with a free block, doubly linked, newest first
  Chunk* spare_ = nullptr;      // an empty chunk kept mapped
  Chunk* all_ = nullptr;        // every chunk (to unmap them all at the end)
  size_t chunks_ = 0;
  size_t allocated_ = 0;
};

}  // namespace pgsluice
