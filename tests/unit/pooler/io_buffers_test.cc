// IoBuffers (pooler/base/io_buffers.h): sizes rounded up to the slabs' classes, blocks that do
// not overlap, larger buffers from the heap, chunks given back when their blocks are free.
#include "pooler/base/io_buffers.h"

#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "pgsluice/protocol/frame.h"

namespace pgsluice {
namespace {

TEST(IoBuffers, RoundsSizesUpToTheirClass) {
  IoBuffers store;
  const size_t asked[] = {1, 2048, 4096, 4097, 8192, 10000, 16384, 20000, 32768};
  const size_t given[] = {4096, 4096, 4096, 8192, 8192, 16384, 16384, 32768, 32768};
  for (size_t i = 0; i < std::size(asked); ++i) {
    size_t size = asked[i];
    char* data = store.allocate(size);
    EXPECT_EQ(size, given[i]) << asked[i];
    std::memset(data, 1, size);
    store.release(data, size);
  }
  EXPECT_EQ(store.chunks(), 4U);  // one spare per class
}

TEST(IoBuffers, ALargerBufferComesFromTheHeap) {
  IoBuffers store;
  size_t size = 100000;
  char* data = store.allocate(size);
  EXPECT_EQ(size, 100000U);
  std::memset(data, 1, size);
  EXPECT_EQ(store.chunks(), 0U);
  store.release(data, size);
}

// A burst of clients' read buffers fills chunks side by side; once they are all given back only
// one chunk stays mapped.
TEST(IoBuffers, ABurstLeavesOneChunkOnceItsBuffersAreBack) {
  IoBuffers store;
  std::vector<char*> buffers;
  for (int i = 0; i < 500; ++i) {
    size_t size = 4096;
    buffers.push_back(store.allocate(size));
    std::memset(buffers.back(), i, size);
  }
  EXPECT_EQ(store.chunks(), 34U);  // 15 buffers a chunk
  for (int i = 0; i < 500; ++i) {
    EXPECT_EQ(buffers[i][0], static_cast<char>(i));
    EXPECT_EQ(buffers[i][4095], static_cast<char>(i));
    store.release(buffers[i], 4096);
  }
  EXPECT_EQ(store.chunks(), 1U);
}

TEST(IoBuffers, AFrameReaderReadsThroughIt) {
  IoBuffers store;
  {
    protocol::FrameReader reader(protocol::FramePhase::regular, protocol::kDefaultMaxMessageLength,
                                 store);
    reader.append(std::string_view("Z\0\0\0\x05I", 6));
    EXPECT_EQ(reader.capacity(), 4096U);
    EXPECT_EQ(reader.next().status, protocol::FrameStatus::complete);
    reader.writable(40000);  // above the largest class: the heap
    EXPECT_GE(reader.capacity(), 40000U);
  }
  EXPECT_EQ(store.chunks(), 1U);  // the 4 kB block's chunk, kept as the spare
}

}  // namespace
}  // namespace pgsluice
