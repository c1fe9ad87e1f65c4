#include "pooler/base/secure_random.h"

#include <pthread.h>
#include <sys/random.h>

#include <cerrno>
#include <cstdint>
#include <cstring>

namespace pgsluice {
namespace {

constexpr size_t kBufferSize = 256;

struct RandomBuffer {
  uint8_t bytes[kBufferSize];
  size_t left = 0;  // the unused bytes are the last `left` of `bytes`
};

thread_local RandomBuffer t_buffer;

// getrandom(2) without GRND_NONBLOCK: it blocks only before the kernel's pool was first seeded
// (early boot), and returns at most 256 bytes whole once seeded.
bool fill_from_kernel(uint8_t* out, size_t size) {
  while (size > 0) {
    ssize_t got = ::getrandom(out, size, 0);
    if (got < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    out += got;
    size -= static_cast<size_t>(got);
  }
  return true;
}

// In a forked child only the forking thread exists: emptying its buffer is enough.
void forget_after_fork() {
  t_buffer.left = 0;
}

struct ForkGuard {
  ForkGuard() { pthread_atfork(nullptr, nullptr, forget_after_fork); }
};

}  // namespace

bool secure_random(void* out, size_t size) {
  static const ForkGuard guard;
  auto* dest = static_cast<uint8_t*>(out);
  RandomBuffer& buf = t_buffer;
  while (size > 0) {
    if (buf.left == 0) {
      if (!fill_from_kernel(buf.bytes, kBufferSize)) return false;
      buf.left = kBufferSize;
    }
    size_t take = size < buf.left ? size : buf.left;
    uint8_t* from = buf.bytes + (kBufferSize - buf.left);
    std::memcpy(dest, from, take);
    // Handed-out bytes do not stay behind in the buffer.
    std::memset(from, 0, take);
    buf.left -= take;
    dest += take;
    size -= take;
  }
  return true;
}

}  // namespace pgsluice
