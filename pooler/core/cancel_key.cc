// See cancel_key.h.
#include "pooler/core/cancel_key.h"

namespace pgsluice::cancel_key {

namespace {

constexpr uint32_t kPeerBits = 0x00ffff00;  // b1 b2
constexpr uint32_t kFreeMax = 0x7fff;       // the 15 bits of b0 (sign bit excluded) and b3
constexpr int kTtlMask = 0x03;

uint32_t free_bits(uint32_t pid) {
  return ((pid >> 24) & 0x7f) << 8 | (pid & 0xff);
}

uint32_t peer_bits(int peer_id) {
  const auto peer = static_cast<uint32_t>(peer_id);
  return (peer & 0xff) << 16 | ((peer >> 8) & 0xff) << 8;
}

}  // namespace

int32_t make_pid(uint32_t random, int worker, int workers, int peer_id) {
  const auto n = static_cast<uint32_t>(workers);
  uint32_t free = free_bits(random);
  // The residue becomes the worker's; past the top of the range the value steps back by one
  // round of workers (still the same residue), which skews the last partial round slightly.
  free = free - free % n + static_cast<uint32_t>(worker);
  if (free > kFreeMax) free -= n;
  const uint32_t middle = peer_id > 0 ? peer_bits(peer_id) : random & kPeerBits;
  return static_cast<int32_t>((free >> 8) << 24 | middle | (free & 0xff));
}

int worker_of(int32_t pid, int workers) {
  if (pid <= 0 || workers <= 0) return 0;
  return static_cast<int>(free_bits(static_cast<uint32_t>(pid)) % static_cast<uint32_t>(workers));
}

int peer_id_of(int32_t pid) {
  const auto p = static_cast<uint32_t>(pid);
  return static_cast<int>(((p >> 16) & 0xff) | ((p >> 8) & 0xff) << 8);
}

int ttl_of(std::string_view secret) {
  return secret.empty() ? 0 : static_cast<unsigned char>(secret.back()) & kTtlMask;
}

void set_ttl(std::string& secret, int ttl) {
  if (secret.empty()) return;
  const auto last = static_cast<unsigned char>(secret.back());
  secret.back() = static_cast<char>((last & ~kTtlMask) | (ttl & kTtlMask));
}

}  // namespace pgsluice::cancel_key
