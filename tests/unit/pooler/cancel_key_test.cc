// The cancel key layout (cancel_key.h): the worker and the peer id come back from every pid made
// for them, the peer id sits where PgBouncer 1.21+ puts it (bytes 1 and 2 of the pid, low byte
// first), the pid is never negative, peering fixes no more bits than it must, and the TTL lives
// in the secret's last two bits.
#include "pooler/core/cancel_key.h"

#include <gtest/gtest.h>

#include <array>
#include <cstdint>
#include <random>
#include <set>

namespace pgsluice::cancel_key {
namespace {

// The pid as it goes on the wire (big-endian), b0 first.
std::array<uint8_t, 4> wire_bytes(int32_t pid) {
  const auto p = static_cast<uint32_t>(pid);
  return {static_cast<uint8_t>(p >> 24), static_cast<uint8_t>(p >> 16),
          static_cast<uint8_t>(p >> 8), static_cast<uint8_t>(p)};
}

// A fixed sequence of "random" inputs (the test's own, so that a failure repeats), with the
// extremes among them.
std::vector<uint32_t> inputs(int count = 2000) {
  std::vector<uint32_t> v = {0u,          1u,          0xffffffffu, 0x7fffffffu,
                             0x80000000u, 0x00ffff00u, 0xff0000ffu, 0x7f0000ffu};
  std::mt19937 gen(20);
  for (int i = 0; i < count; ++i) v.push_back(static_cast<uint32_t>(gen()));
  return v;
}

TEST(CancelKey, WorkerAndPeerRoundTrip) {
  for (int workers = 1; workers <= 64; ++workers) {
    for (int worker = 0; worker < workers; ++worker) {
      for (uint32_t r : inputs(200)) {
        for (int peer : {0, 1, 2, 255, 256, 16383, 65535}) {
          const int32_t pid = make_pid(r, worker, workers, peer);
          ASSERT_GE(pid, 0) << r;
          if (pid == 0) continue;  // the caller draws again
          ASSERT_EQ(worker_of(pid, workers), worker) << workers << " " << r << " " << peer;
          if (peer != 0) {
            ASSERT_EQ(peer_id_of(pid), peer) << r;
          }
        }
      }
    }
  }
}

TEST(CancelKey, EveryPeerIdInPgBouncersBytes) {
  for (int peer = 1; peer <= kMaxPeerId; ++peer) {
    const int32_t pid = make_pid(0x9abcdef0u, 3, 4, peer);
    const auto b = wire_bytes(pid);
    // PgBouncer reads the peer id as key[1] + (key[2] << 8).
    ASSERT_EQ(b[1] + (b[2] << 8), peer);
    ASSERT_EQ(peer_id_of(pid), peer);
    ASSERT_EQ(b[0] & 0x80, 0);  // never negative
    ASSERT_GT(pid, 0);
  }
}

TEST(CancelKey, OnlyTheWorkersResidueIsFixedBesidesThePeer) {
  // Peering off: the peer bytes are the random input's, untouched.
  for (uint32_t r : inputs()) {
    const int32_t pid = make_pid(r, 1, 3, 0);
    EXPECT_EQ(static_cast<uint32_t>(pid) & 0x00ffff00u, r & 0x00ffff00u);
  }
  // With one worker nothing but the sign bit (and the peer bytes) is fixed: the pid is the
  // input itself.
  for (uint32_t r : inputs()) {
    EXPECT_EQ(static_cast<uint32_t>(make_pid(r, 0, 1, 0)), r & 0x7fffffffu);
    EXPECT_EQ(static_cast<uint32_t>(make_pid(r, 0, 1, 7)), (r & 0x7f0000ffu) | (7u << 16));
  }
  // Every pid of a worker is reachable: with peering, 2^15 / workers distinct pids per worker
  // (cancel_key.h's cost), not fewer.
  for (int workers : {1, 2, 3, 8, 64}) {
    std::set<int32_t> pids;
    for (uint32_t free = 0; free <= 0x7fff; ++free) {
      const uint32_t r = (free >> 8) << 24 | (free & 0xff);
      pids.insert(make_pid(r, workers - 1, workers, 42));
    }
    EXPECT_GE(pids.size(), static_cast<size_t>(0x8000 / workers)) << workers;
  }
}

TEST(CancelKey, TtlInTheSecretsLastTwoBits) {
  std::string secret = {'\x12', '\x34', '\x56', '\x78'};
  EXPECT_EQ(ttl_of(secret), 0);
  set_ttl(secret, kFullTtl);
  EXPECT_EQ(secret, std::string("\x12\x34\x56\x7b"));
  EXPECT_EQ(ttl_of(secret), 3);
  set_ttl(secret, ttl_of(secret) - 1);
  EXPECT_EQ(ttl_of(secret), 2);
  EXPECT_EQ(static_cast<unsigned char>(secret.back()), 0x7a);
  set_ttl(secret, 0);
  EXPECT_EQ(static_cast<unsigned char>(secret.back()), 0x78);
  // A 3.2 key: the last of its 32 bytes.
  std::string long_key(32, '\xff');
  set_ttl(long_key, 1);
  EXPECT_EQ(static_cast<unsigned char>(long_key.back()), 0xfd);
  EXPECT_EQ(long_key.substr(0, 31), std::string(31, '\xff'));
  // Nothing to mark in an empty secret (a request cannot have one; no crash either way).
  std::string empty;
  set_ttl(empty, 3);
  EXPECT_TRUE(empty.empty());
  EXPECT_EQ(ttl_of(empty), 0);
}

TEST(CancelKey, BadPidsNameWorkerZero) {
  EXPECT_EQ(worker_of(0, 4), 0);
  EXPECT_EQ(worker_of(-5, 4), 0);
  EXPECT_EQ(worker_of(12345, 0), 0);
}

}  // namespace
}  // namespace pgsluice::cancel_key
