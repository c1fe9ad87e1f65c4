// secure_random: the per-thread buffer over getrandom(2) hands out every byte once, across
// refills, in every thread, and never the same bytes in a forked child as in its parent.
#include "pooler/base/secure_random.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <set>
#include <string>
#include <thread>

namespace pgsluice {
namespace {

std::string draw(size_t n) {
  std::string out(n, '\0');
  EXPECT_TRUE(secure_random(out.data(), out.size()));
  return out;
}

TEST(SecureRandom, SmallDrawsAreAllDifferent) {
  // 4-byte draws (a cancel key, an MD5 salt) across several 256-byte refills: a repeat among
  // 1,000 draws of 32 random bits has a chance of about 1 in 10,000.
  std::set<std::string> seen;
  for (int i = 0; i < 1000; ++i) seen.insert(draw(4));
  EXPECT_GE(seen.size(), 999u);
}

TEST(SecureRandom, DrawsLongerThanTheBufferAreFilledWhole) {
  // 1,000 bytes span four refills; a gap left unfilled would show as a run of zeros (the buffer
  // zeroes what it hands out). 1,000 random bytes miss about 5 of the 256 values (256 * e^-3.9).
  std::string big = draw(1000);
  std::set<unsigned char> values(big.begin(), big.end());
  EXPECT_GT(values.size(), 200u);
  EXPECT_EQ(big.find(std::string(16, '\0')), std::string::npos);
}

TEST(SecureRandom, ConsecutiveDrawsDoNotOverlap) {
  // Two draws of 128 bytes out of one refill: the second must not repeat the first's bytes.
  std::string a = draw(1);  // start at an odd offset in the buffer
  std::string first = draw(128), second = draw(128);
  EXPECT_NE(first, second);
  EXPECT_EQ(first.find(std::string(8, '\0')), std::string::npos);
  EXPECT_EQ(second.find(std::string(8, '\0')), std::string::npos);
}

TEST(SecureRandom, EachThreadHasItsOwnBytes) {
  std::string here = draw(32), there;
  std::thread other([&] { there = draw(32); });
  other.join();
  EXPECT_NE(here, there);
}

TEST(SecureRandom, AForkedChildDrawsOtherBytesThanItsParent) {
  // The buffer is full when the process forks; without the reset at fork both would hand out
  // the same next 32 bytes (cancel keys and salts shared between two processes).
  (void)draw(1);
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    std::array<char, 32> bytes{};
    bool ok = secure_random(bytes.data(), bytes.size());
    ssize_t n = write(fds[1], bytes.data(), bytes.size());
    _exit(ok && n == 32 ? 0 : 1);
  }
  close(fds[1]);
  std::string parent = draw(32);
  std::string from_child(32, '\0');
  ASSERT_EQ(read(fds[0], from_child.data(), from_child.size()), 32);
  close(fds[0]);
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  EXPECT_NE(parent, from_child);
}

}  // namespace
}  // namespace pgsluice
