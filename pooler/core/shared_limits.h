// Server counts that pool limits are measured against, summed over every worker: a pool's
// default_pool_size, max_db_connections and max_user_connections are global numbers, however many
// workers hold a share of the pool. A worker takes a slot under one lock before it starts a
// server, so the sum never exceeds the limit; reading the counts (each time a client queues)
// and giving a slot back are lock-free, so the forwarding path never waits for another thread.
//
// A worker whose clients wait while other workers hold every slot marks itself starving; the
// others then close a released or idle server they can spare (above their fair share, or idle
// with nothing running), and the starving worker is woken when that server's socket is closed.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

#include "pooler/core/pool_limits.h"

namespace pgsluice {

inline constexpr int kMaxWorkers = 64;  // a bit per worker in LimitCounter::starving

// The counters of one pool, one database or one server user.
struct LimitCounter {
  std::atomic<int> servers{0};
  std::atomic<uint64_t> starving{0};  // bit i: worker i waits for a slot of this counter
  std::array<std::atomic<int>, kMaxWorkers> held{};  // servers of each worker
  // When the longest-waiting client of each worker's share started waiting (now_us); 0: none.
  // Only the pool's own counter keeps it.
  std::array<std::atomic<uint64_t>, kMaxWorkers> waiting_since_us{};
};

// The three counters a pool's servers take a slot of: the pool's own (pool_size), its
// database's and its server user's. The addresses stay valid as long as the SharedLimits.
struct LimitSlots {
  LimitCounter* pool = nullptr;
  LimitCounter* db = nullptr;
  LimitCounter* user = nullptr;
};

class SharedLimits {
 public:
  // The counters of (database, server user); created on first use, kept for good (there are as
  // many as pools, databases and users).
  LimitSlots slots_for(const std::string& db, const std::string& user);

  // Fills in the totals of every worker (pool_servers, db_servers, user_servers).
  static void totals(const LimitSlots& slots, LaunchInput& in);
  // The verdict for one more server with the totals of every worker; when it is allowed the
  // server is counted at once (its slot is taken), and `worker` stops starving for these slots.
  LaunchVerdict reserve(const LimitSlots& slots, LaunchInput in, int worker);
  // What became of a server's slots when it went.
  struct Release {
    int handed_to = -1;  // the worker the slots passed to (still counted): it starts a server
                         // on them, or releases them in turn
    uint64_t wake = 0;   // else: workers that starved for the database's or user's slots
  };
  // A server's socket is closed (after PostgreSQL closed it: its backend is gone). When another
  // worker starves for a slot of this pool the slots pass to it directly, so that no worker that
  // happens to ask first (this one) takes them back; otherwise they are free.
  static Release release(const LimitSlots& slots, int worker);
  // Whether `worker`, which holds a server of these slots it could keep, should give it to a
  // starving worker instead: when that evens out the numbers (it holds two or more fewer), or
  // when the starving worker holds none and its client has waited 100 ms longer than any
  // here (`oldest_wait_us`: 0 when none waits here). Servers then move only towards balance,
  // not back and forth at every transaction.
  static bool should_yield(const LimitSlots& slots, int worker, uint64_t now_us,
                           uint64_t oldest_wait_us);

  // `worker` could not start a server (the verdict names the full limit) while other workers
  // may hold slots. True when it was not marked already (the others should be told once).
  static bool note_starving(const LimitSlots& slots, LaunchVerdict verdict, int worker);
  // Whether a worker other than `worker` starves for a slot these servers hold.
  static bool other_starving(const LimitSlots& slots, int worker);

 private:
  LimitCounter& counter(std::unordered_map<std::string, std::unique_ptr<LimitCounter>>& map,
                        const std::string& key);

  std::mutex mutex_;
  std::unordered_map<std::string, std::unique_ptr<LimitCounter>> pools_;  // db '\0' user
  std::unordered_map<std::string, std::unique_ptr<LimitCounter>> dbs_;
  std::unordered_map<std::string, std::unique_ptr<LimitCounter>> users_;
};

}  // namespace pgsluice
