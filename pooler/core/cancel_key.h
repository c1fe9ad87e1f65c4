// The layout of the cancel keys pgsluice gives its clients (BackendKeyData: a 32-bit process id,
// then a secret of 4 bytes under protocol 3.0 or 32 under 3.2). Nothing in them is a backend's:
// pgsluice maps a key back to its client and cancels whatever server runs that client's query.
//
// The process id, big-endian on the wire as bytes b0 b1 b2 b3:
//   b0's top bit   0, as in PgBouncer: some clients (pg_basebackup) mishandle a negative pid;
//   b1 b2          the peer id of the process that issued the key (peer_id), low byte first:
//                  PgBouncer 1.21+'s place for it, so a PgBouncer peer forwards pgsluice's
//                  3.0 keys and pgsluice forwards PgBouncer's; random when peering is off;
//   b0's 7 bits and b3, 15 bits: random, chosen so that their value modulo the number of
//                  workers is the worker holding the client (the worker a CancelRequest that
//                  lands on another worker is passed to). The same bits whether peering is on
//                  or off, so that a key's worker never depends on the setting at the time.
// The secret's last byte, low two bits: the TTL of a forwarded request when peering is on (as
// in PgBouncer: 3 for a key as issued, one less at each forward, dropped at 0), so that peers
// whose [peers] lines send a request round in a loop drop it after three hops.
//
// What it costs: with peering off a 3.0 key has 31 + 32 - log2(workers) random bits, as before
// peering existed (63 - log2(workers), the worker's residue being the only fixed part). Peering
// fixes 16 bits of the pid and 2 of the secret: 45 - log2(workers) random bits for a 3.0 key
// (PgBouncer's 45 with its one thread; 42 with 8 workers: still 2^42 keys to try, one new
// connection each, against a client that lives as long as its session), and 269 - log2(workers)
// for a 3.2 key. Pids are no longer unique per client with peering (2^15 / workers of them per
// worker): the secret tells clients with one pid apart (Worker::find_cancel_target).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace pgsluice::cancel_key {

inline constexpr int kMaxPeerId = 65535;
// A key as issued carries this TTL; a forward lowers it by one.
inline constexpr int kFullTtl = 3;

// The pid for worker `worker` of `workers` (1..32768) from 32 random bits; `peer_id` 0 leaves the
// peer bytes random. Never negative; 0 only when the random bits were (nearly) all zero, which
// the caller draws again.
[[nodiscard]] int32_t make_pid(uint32_t random, int worker, int workers, int peer_id);
// The worker a pid names (0 for a pid that is not positive: no key of pgsluice's has one).
[[nodiscard]] int worker_of(int32_t pid, int workers);
// The peer id in b1 b2.
[[nodiscard]] int peer_id_of(int32_t pid);
// The TTL bits of a secret (0 for an empty one).
[[nodiscard]] int ttl_of(std::string_view secret);
// Sets the TTL bits of a non-empty secret to `ttl` (0..3).
void set_ttl(std::string& secret, int ttl);

}  // namespace pgsluice::cancel_key
