// IoBuffers: size classes over SlabPools, the heap above them.
#include "pooler/base/io_buffers.h"

#include <new>

namespace pgsluice {

namespace {
// 15 blocks a chunk for every size (the first block's place holds the chunk's header).
constexpr size_t chunk_for(size_t block) {
  return block * 16;
}
}  // namespace

IoBuffers::IoBuffers()
    : pools_{SlabPool(4 * 1024, chunk_for(4 * 1024)), SlabPool(8 * 1024, chunk_for(8 * 1024)),
             SlabPool(16 * 1024, chunk_for(16 * 1024)), SlabPool(32 * 1024, chunk_for(32 * 1024))} {
}

IoBuffers& IoBuffers::shared() {
  static auto* store = new IoBuffers;
  return *store;
}

SlabPool* IoBuffers::pool_for(size_t size) {
  for (SlabPool& pool : pools_) {
    if (size <= pool.block_size()) return &pool;
  }
  return nullptr;
}

char* IoBuffers::allocate(size_t& size) {
  SlabPool* pool = pool_for(size);
  if (pool == nullptr) return static_cast<char*>(::operator new(size));
  size = pool->block_size();
  std::lock_guard lock(mutex_);
  return static_cast<char*>(pool->allocate());
}

void IoBuffers::release(char* data, size_t size) noexcept {
  SlabPool* pool = pool_for(size);
  if (pool == nullptr) {
    ::operator delete(data);
    return;
  }
  std::lock_guard lock(mutex_);
  pool->deallocate(data);
}

size_t IoBuffers::chunks() {
  std::lock_guard lock(mutex_);
  size_t total = 0;
  for (const SlabPool& pool : pools_) total += pool.chunks();
  return total;
}

}  // namespace pgsluice
