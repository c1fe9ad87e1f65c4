// The channels' read buffers (FrameReader's memory), in slabs of their own instead of malloc's
// heap, as PgBouncer's iobuf slab does: a login burst's 4 kB read buffers, freed once the
// clients idle (the janitor's release_idle_buffers), otherwise left holes smaller than a page
// between what lives on in the heap, resident for as long as the clients stay (issue 17,
// docs/profile.md 0c″). Sizes of 4 to 32 kB are rounded up to a power of two and come from a
// SlabPool per size, 15 blocks a chunk; a chunk goes back to the kernel once its blocks are free.
// Larger buffers (a message above 32 kB) come from the heap.
//
// One store for the process, under a lock: a server's channel moves between workers' threads
// with its buffer (Channel::detach/attach), so a block may be given back on another thread than
// the one that took it. The lock is taken only when a buffer is made, grown or given back, not
// per message.
#pragma once

#include <array>
#include <cstddef>
#include <mutex>

#include "pgsluice/protocol/frame.h"
#include "pooler/base/slab_pool.h"

namespace pgsluice {

class IoBuffers final : public protocol::BufferStore {
 public:
  static constexpr size_t kSmallest = 4 * 1024;
  static constexpr size_t kLargest = 32 * 1024;

  IoBuffers();
  // The channels' store. Never destroyed: a channel may outlive any static's destructor.
  static IoBuffers& shared();

  char* allocate(size_t& size) override;
  void release(char* data, size_t size) noexcept override;

  // Chunks mapped by all sizes (for tests).
  [[nodiscard]] size_t chunks();

 private:
  // The pool of blocks of exactly `size` bytes; null above kLargest.
  SlabPool* pool_for(size_t size);

  std::mutex mutex_;
  std::array<SlabPool, 4> pools_;  // 4, 8, 16, 32 kB
};

}  // namespace pgsluice
