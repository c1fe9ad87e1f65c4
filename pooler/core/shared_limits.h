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
#include <string_view>
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
  // The pool's logins in flight on every worker (PgBouncer's one at a time is per pool, not
  // per worker), and the workers to tell when one ends (bit i: worker i has clients waiting
  // for it). Only the pool's own counter keeps them.
  std::atomic<int> logins{0};
  std::atomic<uint64_t> login_waiters{0};
  // Servers pinned to their client on every worker (session state under the pin action). Only
  // the pool's own counter keeps it.
  std::atomic<int> pinned{0};
  // server_login_retry over every worker: when the pool's last login failed (now_ms; 0: the
  // last login succeeded), and what PostgreSQL said. Only the pool's own counter keeps them.
  std::atomic<uint64_t> login_failed_ms{0};
  // Servers of the pool that are logged in, on every worker (a server moving between workers
  // stays counted; one whose login failed never was, even while its socket is still closing).
  // Only the pool's own counter keeps it.
  std::atomic<int> logged_in{0};
  // Servers of the pool closing on every worker whose socket is not closed yet (they still
  // count in `servers` until then). Only the pool's own counter keeps it.
  std::atomic<int> closing{0};
  std::mutex login_error_mutex;
  std::string login_error;
  // The hosts of a multi-host entry whose login failed, by host:port, and until when every
  // worker's share skips them (server_login_retry): a host that failed for one worker's client
  // is not tried again for the next client that lands on another worker. Only the pool's own
  // counter keeps them; a reload that changes the hosts leaves an entry to expire.
  std::mutex hosts_mutex;
  std::unordered_map<std::string, uint64_t> host_skip_until_ms;
  // Where load_balance_hosts = round-robin starts the pool's next login, whichever worker's
  // share starts it (PoolHosts::pick): one turn for the pool, as in PgBouncer's one process.
  // Only the pool's own counter keeps it.
  std::atomic<uint64_t> host_turn{0};
  // A multi-host pool's failover over every worker's share (pool_failover.cc): since when a
  // host failed or refused for its role (now_ms; 0: none since a server of the right role),
  // whether some share then had no usable host at all, and how many servers had the wrong role
  // meanwhile. Only the pool's own counter keeps them.
  std::atomic<uint64_t> trouble_since_ms{0};
  std::atomic<bool> outage{false};
  std::atomic<uint64_t> outage_role_refusals{0};
  // pool_idle_timeout: the last janitor round (now_ms) at which some worker's share of the pool
  // had a client or a server, so that no share is freed while another one is in use. Only the
  // pool's own counter keeps it.
  std::atomic<uint64_t> active_ms{0};
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
  // starving worker instead. For this pool's slot with clients waiting here (`oldest_wait_us`,
  // when the longest-waiting started; 0: none), only when the starving worker's client has
  // waited 100 ms longer. Otherwise when that evens out the numbers (it holds two or more
  // fewer), or when the starving worker's client has waited 100 ms. Servers then move towards
  // the longest wait and towards balance, never back and forth at every transaction.
  struct YieldTo {
    int worker = -1;  // -1: keep the server
    // The worker starves for this pool's slot (the server moves there), or for the database's
    // or the user's: another pool, which needs a login of its own (the server closes).
    LaunchVerdict starving_for = LaunchVerdict::pool_full;
    [[nodiscard]] bool same_pool() const { return starving_for == LaunchVerdict::pool_full; }
    // Why the server closes for another pool (the log line).
    [[nodiscard]] const char* close_reason() const;
  };
  static YieldTo yield_target(const LimitSlots& slots, int worker, uint64_t now_us,
                              uint64_t oldest_wait_us);
  // Any worker other than `worker` that starves for a slot these servers hold, one that
  // starves for this pool's own slot first.
  static YieldTo any_starving(const LimitSlots& slots, int worker);
  // A server of the pool goes to worker `to`, which starves for a slot of it: true when this
  // caller is the one that ends `to`'s starving spell (two workers never both answer it).
  static bool claim_starving(const LimitSlots& slots, int to);
  // Undoes claim_starving when the server could not go after all.
  static void restore_starving(const LimitSlots& slots, int to);
  // A server changes workers: its slots go with it (the totals do not change).
  static void move_slots(const LimitSlots& slots, int from, int to);

  // Logins of the pool in flight on every worker: a server entered or left connecting/login.
  static void login_started(const LimitSlots& slots);
  // Returns the workers that asked to be told (login_waiters, cleared).
  static uint64_t login_ended(const LimitSlots& slots);
  // True when no login of the pool is in flight; otherwise `worker` is told when one ends (its
  // bit set before a second look, so that an end in between is not missed).
  static bool no_login_or_wait(const LimitSlots& slots, int worker);
  // Starts the pool's only login in flight (the count goes from none to one in one step, so two
  // workers that both saw none cannot both start one); when another is in flight, false and
  // `worker` is told when it ends, as no_login_or_wait.
  static bool begin_only_login(const LimitSlots& slots, int worker);
  // One more pinned server of the pool, when fewer than `limit` are pinned on every worker (the
  // count goes up in one step: two workers never both take the last pin).
  static bool try_pin(const LimitSlots& slots, int limit);
  static void unpin(const LimitSlots& slots) {
    slots.pool->pinned.fetch_sub(1, std::memory_order_acq_rel);
  }
  [[nodiscard]] static int pinned(const LimitSlots& slots) {
    return slots.pool->pinned.load(std::memory_order_acquire);
  }
  [[nodiscard]] static int logins(const LimitSlots& slots) {
    return slots.pool->logins.load(std::memory_order_seq_cst);
  }

  // A login of the pool failed (at now_ms, with PostgreSQL's message) or succeeded, on any
  // worker: server_login_retry holds back every worker's share, and one success frees them all.
  static void login_failed(const LimitSlots& slots, uint64_t now_ms, std::string_view message);
  static void login_succeeded(const LimitSlots& slots) {
    slots.pool->login_failed_ms.store(0, std::memory_order_release);
  }
  [[nodiscard]] static uint64_t login_failed_ms(const LimitSlots& slots) {
    return slots.pool->login_failed_ms.load(std::memory_order_acquire);
  }
  [[nodiscard]] static std::string login_error(const LimitSlots& slots);
  // A host of the pool failed a login (skipped by every share until `until_ms`) or logged a
  // server in (usable again at once); until when a share should skip it (0: not skipped).
  static void host_failed(const LimitSlots& slots, const std::string& host, uint64_t until_ms);
  static void host_logged_in(const LimitSlots& slots, const std::string& host);
  [[nodiscard]] static uint64_t host_skip_until(const LimitSlots& slots, const std::string& host);
  [[nodiscard]] static std::atomic<uint64_t>& host_turn(const LimitSlots& slots) {
    return slots.pool->host_turn;
  }
  // The pool's failover, over every share: trouble began (kept if it began before), some share
  // has no usable host, a server had the wrong role; end_trouble() ends it and returns what it
  // was (since 0 when another share ended it first).
  static void begin_trouble(const LimitSlots& slots, uint64_t now_ms);
  static void note_outage(const LimitSlots& slots) {
    slots.pool->outage.store(true, std::memory_order_release);
  }
  [[nodiscard]] static bool outage(const LimitSlots& slots) {
    return slots.pool->outage.load(std::memory_order_acquire);
  }
  static void count_role_refusal(const LimitSlots& slots) {
    slots.pool->outage_role_refusals.fetch_add(1, std::memory_order_relaxed);
  }
  struct Trouble {
    uint64_t since_ms = 0;
    bool outage = false;
    uint64_t role_refusals = 0;
  };
  static Trouble end_trouble(const LimitSlots& slots);
  static void add_logged_in(const LimitSlots& slots, int delta) {
    slots.pool->logged_in.fetch_add(delta, std::memory_order_acq_rel);
  }
  [[nodiscard]] static int logged_in(const LimitSlots& slots) {
    return slots.pool->logged_in.load(std::memory_order_acquire);
  }
  static void add_closing(const LimitSlots& slots, int delta) {
    slots.pool->closing.fetch_add(delta, std::memory_order_acq_rel);
  }
  // The pool's servers on every worker that are not closing (logging in, idle, in use, moving
  // between workers): what a pool size lowered by a reload is held to at each release.
  [[nodiscard]] static int open_servers(const LimitSlots& slots) {
    return slots.pool->servers.load(std::memory_order_acquire) -
           slots.pool->closing.load(std::memory_order_acquire);
  }

  // A share of the pool was in use at `now_ms` (pool_idle_timeout): kept if it is the latest.
  static void note_active(const LimitSlots& slots, uint64_t now_ms);
  [[nodiscard]] static uint64_t active_ms(const LimitSlots& slots) {
    return slots.pool->active_ms.load(std::memory_order_acquire);
  }
  [[nodiscard]] static int servers(const LimitSlots& slots) {
    return slots.pool->servers.load(std::memory_order_acquire);
  }

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
