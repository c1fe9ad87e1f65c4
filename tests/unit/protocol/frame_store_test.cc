// FrameReader over a BufferStore of its own: every block it takes goes back to the store (when
// it grows, when it shrinks while idle, at its end), with the size the store gave, and what is
// unread survives a growth.
#include <gtest/gtest.h>

#include <cstddef>
#include <map>
#include <new>
#include <string>

#include "pgsluice/protocol/frame.h"

using namespace std::string_literals;

namespace pgsluice::protocol {
namespace {

// Rounds every request up to a multiple of 1000 and records what is out.
class CountingStore final : public BufferStore {
 public:
  char* allocate(size_t& size) override {
    size = (size + 999) / 1000 * 1000;
    char* data = static_cast<char*>(::operator new(size));
    out[data] = size;
    ++allocations;
    return data;
  }
  void release(char* data, size_t size) noexcept override {
    auto it = out.find(data);
    if (it == out.end() || it->second != size) ++mismatches;
    if (it != out.end()) out.erase(it);
    ::operator delete(data);
  }
  std::map<char*, size_t> out;
  int allocations = 0;
  int mismatches = 0;
};

TEST(FrameReaderStore, TakesItsBuffersFromTheStoreAndGivesThemBack) {
  CountingStore store;
  {
    FrameReader reader(FramePhase::regular, kDefaultMaxMessageLength, store);
    EXPECT_EQ(reader.capacity(), 0U);  // nothing until the first read
    reader.writable(100);
    EXPECT_EQ(reader.capacity(), 5000U);  // 4096 asked, rounded up by the store
    EXPECT_EQ(store.out.size(), 1U);
    // A partial message, then growth: the unread bytes move to the larger block.
    reader.append("d\0\0\x27\x14"s);  // length 10004
    reader.append(std::string(5000, 'x'));
    reader.append(std::string(5000, 'y'));
    EXPECT_GE(reader.capacity(), 10005U);
    EXPECT_EQ(store.out.size(), 1U);  // the smaller block went back
    FrameResult r = reader.next();
    ASSERT_EQ(r.status, FrameStatus::complete);
    EXPECT_EQ(r.message.body, std::string(5000, 'x') + std::string(5000, 'y'));
    reader.shrink_if_idle(0);
    EXPECT_EQ(reader.capacity(), 0U);
    EXPECT_TRUE(store.out.empty());
    reader.append("Z\0\0\0\x05I"s);  // reads again after the release
    EXPECT_EQ(reader.next().status, FrameStatus::complete);
    reader.writable(20000);
    reader.shrink_if_idle(5000);  // idle: down to what is kept
    EXPECT_EQ(reader.capacity(), 5000U);
  }
  EXPECT_TRUE(store.out.empty());  // the destructor gave the last block back
  EXPECT_EQ(store.mismatches, 0);
  EXPECT_EQ(store.allocations, 6);  // 5000, 10000, 20000; 5000, 20000; 5000
}

}  // namespace
}  // namespace pgsluice::protocol
