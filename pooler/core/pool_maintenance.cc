// Pool limits and server lifecycle (pool.h, pool_limits.h): when a pool may start a server
// under pool_size, reserve_pool_size, max_db_connections and max_user_connections, and what the
// janitor does each round, freeing pools idle past pool_idle_timeout last. Kept apart from
// pool.cc, which hands servers to clients.
#include "pooler/core/pool_maintenance.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <unordered_map>
#include <vector>

#include "pooler/core/pool.h"
#include "pooler/core/worker.h"

namespace pgsluice {

namespace {
constexpr uint64_t kHandoverMinWaitUs = 100'000;  // see Pool::yield_to_other_pool()
// Several janitor rounds (200 ms each) of every worker: see maintain_pools.
constexpr uint64_t kPoolIdleArmingMs = 1000;
}  // namespace

LaunchInput Pool::launch_input() {
  const Config& config = worker_.config();
  LaunchInput in;
  in.pool_size = pool_size_;
  in.reserve_pool = config.reserve_pool_for(db_, credentials_.user);
  const auto reserve_timeout_us =
      static_cast<uint64_t>(config.settings.reserve_pool_timeout.count()) * 1000;
  const uint64_t oldest = oldest_wait_start_us();
  const uint64_t now = now_us();
  in.reserve_due =
      reserve_timeout_us > 0 && oldest != 0 && now >= oldest && now - oldest >= reserve_timeout_us;
  in.max_db_connections = config.max_db_connections_for(db_);
  in.max_user_connections = config.max_user_connections_for(credentials_.user);
  // Every worker's servers count (shared_limits.h).
  SharedLimits::totals(limit_slots_, in);
  return in;
}

bool Pool::try_launch(bool evict, bool ask_first) {
  if (paused_ || worker_.stopping() || login_retry_blocked(worker_.now_ms())) return false;
  // Every host of a multi-host entry is skipped for now (failed, or of the wrong role during a
  // failover): the clients wait, and the janitor's next round asks again.
  learn_host_news(worker_.now_ms());
  if (!hosts_.any_usable(worker_.now_ms())) {
    wake_at_next_usable_host(worker_.now_ms());
    return false;
  }
  const LaunchVerdict verdict = launch_verdict(launch_input());
  if (launch_allowed(verdict) && limits_shared()) {
    // Under max_db_connections / max_user_connections a free slot goes to the pool whose
    // client waited longest, not to whichever pool asks first (that pool could take every slot
    // back as soon as it frees one, and the other would wait forever).
    Pool* best = next_in_line(/*exclude_self=*/false, /*freed=*/0);
    if (best != nullptr && best != this) {
      best->try_launch(/*evict=*/false);
      return false;
    }
  }
  if (!launch_allowed(verdict)) {
    // The idle server closes; its socket closing (on_server_destroyed) lets this pool start one.
    if (evict && (verdict == LaunchVerdict::db_full || verdict == LaunchVerdict::user_full)) {
      if (evict_idle_server(verdict)) return false;
    }
    note_starving(verdict);
    return false;
  }
  // One pool per process: another worker's idle server rather than a new login.
  if (ask_first && ask_other_workers()) return false;
  // One login of the pool at a time on every worker, claimed in one step (launch_for_waiters
  // looked first, but another worker may have started one since); told when it ends.
  if (!SharedLimits::begin_only_login(limit_slots_, worker_.index())) return false;
  login_claimed_ = true;
  // The same verdict again, taken with the slot under the lock of the shared counts: another
  // worker may have taken the last slot since.
  const LaunchVerdict taken =
      worker_.group().limits().reserve(limit_slots_, launch_input(), worker_.index());
  if (!launch_allowed(taken)) {
    login_claimed_ = false;
    login_wake_ |= SharedLimits::login_ended(limit_slots_);
    wake_login_waiters();
    note_starving(taken);
    return false;
  }
  if (verdict == LaunchVerdict::allowed_reserve) {
    // PgBouncer's words, on the client that waited (the oldest), as its log readers expect.
    const std::string who = waiting_.empty() ? fmt::format("{}@{}", credentials_.user, db_.name)
                                             : waiting_.front().log_id();
    spdlog::warn(
        "{} taking connection from reserve_pool (it waited reserve_pool_timeout; the pool's "
        "{} + {} of the reserve pool's {})",
        who, pool_size_, server_count() + 1 - pool_size_, reserve_pool());
  }
  launch_server();
  return true;
}

void Pool::launch_for_waiters(bool evict) {
  if (paused_ || worker_.stopping()) return;
  // Replication clients first: each needs a server of its own, which no release gives them.
  if (!replication_waiting_.empty()) launch_replication_waiters(evict);
  // A login failed (here or on another worker) within server_login_retry: the clients wait,
  // and the janitor's round asks again once it is over.
  if (login_retry_blocked(worker_.now_ms())) return;
  const bool greeting = !has_welcome_ && !welcome_waiting_.empty();
  if (!greeting && (asking_ || !queue_wants_server())) return;
  // One login of the pool at a time, on whichever worker: told when it ends.
  if (!SharedLimits::no_login_or_wait(limit_slots_, worker_.index())) return;
  if (greeting) {
    try_launch(evict);  // the first server's ParameterStatus greets every waiting client
    return;
  }
  try_launch(evict, /*ask_first=*/true);
}

bool Pool::queue_wants_server() {
  // Servers being checked (server_check_query) will serve the queue when they answer.
  return waiting_.size() + pooler_waiting_.size() > checks_in_flight();
}

bool Pool::wants_more_servers() {
  // As PgBouncer grows a pool: one login at a time, counted over every worker's share. While a
  // server logs in, released servers serve the queue too, and most bursts are over before a
  // second login would finish; when the login is done and clients still wait,
  // on_server_login_ok starts the next one (and the other workers waiting for it are told). A
  // server asked of another worker is on its way as well (ask_other_workers).
  return SharedLimits::logins(limit_slots_) == 0 && !asking_ && queue_wants_server();
}

bool Pool::evict_idle_server(LaunchVerdict verdict) {
  const bool by_db = verdict == LaunchVerdict::db_full;
  // One eviction at a time: while an evicted server's socket is still closing, its slot is on
  // its way to this pool.
  bool pending = false;
  Server* oldest = nullptr;
  worker_.for_each_own_pool([&](Pool& p) {
    const bool shares =
        by_db ? p.database().name == db_.name : p.credentials_.user == credentials_.user;
    if (!shares) return;
    if (p.closing_open_ > 0) pending = true;
    if (&p == this) return;
    p.idle_.for_each([&](Server& s) {
      if (oldest == nullptr || s.timing.connect_ms < oldest->timing.connect_ms) oldest = &s;
    });
  });
  if (pending || oldest == nullptr) return false;
  oldest->close(by_db ? "evicted: max_db_connections reached and another pool needs a server"
                      : "evicted: max_user_connections reached and another pool needs a server");
  return true;
}

void Pool::note_limits() {
  const Config& config = worker_.config();
  limits_shared_ = config.max_db_connections_for(db_) > 0 ||
                   config.max_user_connections_for(credentials_.user) > 0;
  reserve_pool_ = config.reserve_pool_for(db_, credentials_.user);
}

bool Pool::wants_server() {
  if (paused_ || login_retry_blocked(worker_.now_ms())) return false;
  const bool greeting =
      !has_welcome_ && !welcome_waiting_.empty() && SharedLimits::logins(limit_slots_) == 0;
  return greeting || wants_more_servers();
}

uint64_t Pool::queue_key() {
  // Waiting for the greeting counts as the longest wait: that pool has no server at all.
  if (!has_welcome_ && !welcome_waiting_.empty()) return 1;
  return oldest_wait_start_us();
}

Pool* Pool::next_in_line(bool exclude_self, int freed) {
  Pool* best = nullptr;
  uint64_t best_key = 0;
  worker_.for_each_own_pool([&](Pool& p) {
    if (exclude_self && &p == this) return;
    const bool same_db = p.database().name == db_.name;
    const bool same_user = p.credentials_.user == credentials_.user;
    if (!same_db && !same_user) return;
    if (!p.wants_server()) return;
    LaunchInput in = p.launch_input();
    if (same_db) in.db_servers -= freed;
    if (same_user) in.user_servers -= freed;
    if (!launch_allowed(launch_verdict(in))) return;
    const uint64_t key = p.queue_key();
    if (best == nullptr || key < best_key) {
      best = &p;
      best_key = key;
    }
  });
  return best;
}

bool Pool::yield_to_other_pool() {
  if (!limits_shared()) return false;
  const LaunchInput mine = launch_input();
  const bool db_at_limit =
      mine.max_db_connections > 0 && mine.db_servers >= mine.max_db_connections;
  const bool user_at_limit =
      mine.max_user_connections > 0 && mine.user_servers >= mine.max_user_connections;
  if (!db_at_limit && !user_at_limit) return false;
  Pool* other = next_in_line(/*exclude_self=*/true, /*freed=*/1);
  if (other == nullptr) return false;
  const uint64_t my_oldest = waiting_.empty() ? 0 : oldest_wait_start_us();
  const uint64_t theirs = other->queue_key();
  if (my_oldest != 0 && theirs >= my_oldest) return false;
  // A hand-over costs a server login: not for a client that has hardly waited, or two busy
  // pools would trade the slot at every transaction.
  return now_us() - theirs >= kHandoverMinWaitUs;
}

size_t Pool::checks_in_flight() {
  size_t n = 0;
  resetting_.for_each([&n](Server& s) { n += s.life.checking ? 1 : 0; });
  return n;
}

void Pool::mark_removed() {
  if (removed_) return;
  removed_ = true;
  spdlog::info("{}@{}: database removed from the configuration, draining ({} clients waiting)",
               credentials_.user, db_.name, waiting_.size());
  idle_.for_each([](Server& s) { s.close("database removed from the configuration"); });
}

void Pool::on_server_destroyed() {
  const bool was_closing = closing_open_ > 0;
  if (was_closing) --closing_open_;
  // Its slots go to a worker starving for them, or are free only now (the backend is gone).
  const bool handed = give_back_slot();
  // After the slot's release: the pool's open servers (servers - closing) never read one high.
  if (was_closing) SharedLimits::add_closing(limit_slots_, -1);
  if (handed || worker_.stopping()) return;
  launch_for_waiters(/*evict=*/false);
  const Config& config = worker_.config();
  if (config.max_db_connections_for(db_) <= 0 &&
      config.max_user_connections_for(credentials_.user) <= 0) {
    return;
  }
  // No eviction from here: this runs inside a server's close, possibly while another pool
  // walks its lists.
  worker_.for_each_own_pool([&](Pool& p) {
    if (p.database().name == db_.name || p.credentials_.user == credentials_.user) {
      p.launch_for_waiters(/*evict=*/false);
    }
  });
}

void Pool::maintain(uint64_t now_ms, int clients) {
  check_timeouts(now_ms);
  retry_pin_waiters();
  const Config& config = worker_.config();
  const Settings& s = config.settings;
  const auto lifetime = static_cast<uint64_t>(config.server_lifetime_for(db_).count());
  const auto idle_timeout = static_cast<uint64_t>(s.server_idle_timeout.count());
  const int min_size = removed_ ? 0 : config.min_pool_size_for(db_);
  idle_.for_each([&](Server& server) {
    if (removed_) {
      server.close("database removed from the configuration");
    } else if (past_lifetime(server.life.born_ms,
                             staggered_lifetime_ms(lifetime, server.life.stagger), now_ms)) {
      server.close("server_lifetime");
    } else if (past_idle_timeout(server.life.idle_since_ms, idle_timeout, now_ms) &&
               static_cast<int>(server_count()) > min_size) {
      server.close("server_idle_timeout");
    }
  });
  check_idle_roles(now_ms);
  // As PgBouncer: a replication connection may last for ever, so RECONNECT or a changed
  // database line cannot wait for its end.
  replicating_.for_each([](Server& server) {
    if (server.timing.close_needed) {
      server.close("the server's settings changed (RECONNECT or RELOAD): replication connection");
    }
  });
  // A client that left during a long reply (its query still running): the server is not held
  // for it longer than this, nor closed at once for a reply about to end (server_release.cc).
  draining_.for_each([now_ms](Server& server) {
    if (server.draining_for_ms(now_ms) > Server::kDrainLimitMs) {
      server.close("client left in the middle of a request, whose reply did not end within 2 s");
    }
  });
  if (mode_ == PoolMode::session && s.server_fast_close) {
    // RECONNECT or a changed database line: in session mode the server would otherwise serve
    // its client until the session ends. Closed between transactions, with its client, so that
    // the client notices that its session was cut.
    active_.for_each([](Server& server) {
      if (server.timing.close_needed && server.at_transaction_boundary()) {
        server.close(  // PgBouncer's words first
            "database configuration changed (server_fast_close: RECONNECT or RELOAD)");
      }
    });
  }
  // The queue again: a server of another pool may have gone, a client may now be owed the
  // reserve pool.
  launch_for_waiters();
  // Another worker may starve for a slot an idle server of this one holds.
  yield_idle_server_to_other_worker();
  // min_pool_size, as PgBouncer enforces it: for pools with a forced user or with a client.
  const bool enforced = !removed_ && !paused_ && !worker_.stopping() &&
                        (!db_.user.empty() || clients > 0) && !login_retry_blocked(now_ms);
  // Counted over every worker: min_pool_size is one number for the pool, not per worker.
  int deficit = min_pool_deficit(min_size, pool_size_, launch_input().pool_servers, enforced);
  while (deficit-- > 0) {
    if (!launch_for_min_pool_size(min_size)) break;
  }
}

bool Pool::launch_for_min_pool_size(int min_size) {
  // The workers' janitors run at once: each takes its slot under the shared lock with
  // min_pool_size as the size, so that together they open the deficit once, not once each.
  LaunchInput in = launch_input();
  in.pool_size = std::min(min_size, pool_size_);
  in.reserve_pool = 0;
  in.reserve_due = false;
  if (!launch_allowed(worker_.group().limits().reserve(limit_slots_, in, worker_.index()))) {
    return false;
  }
  launch_server();
  return true;
}

bool Pool::idle_past(uint64_t now_ms, int clients, uint64_t timeout_ms) {
  // PgBouncer's "no client connections and no server connections"; what else points here:
  // sockets still closing, the pooler's own lookups, a server asked of another worker.
  const bool in_use = clients > 0 || server_count() > 0 || closing_open_ > 0 ||
                      !listeners_.empty() || !pooler_waiting_.empty() || asking_ || login_claimed_;
  if (in_use) last_active_ms_ = now_ms;
  // One pool per process: a share is freed only when no worker's share was in use for that long.
  SharedLimits::note_active(limit_slots_, last_active_ms_);
  if (in_use || timeout_ms == 0 || relay_launched_) return false;
  // As PgBouncer: a forced user's pool with min_pool_size is made again by the next round
  // (maintain_pools), which would only free and make it in turn.
  if (!db_.user.empty() && worker_.config().min_pool_size_for(db_) > 0) return false;
  // A server of another worker's share (or moving between two) still counts here.
  if (SharedLimits::servers(limit_slots_) > 0) return false;
  const uint64_t active = std::max(last_active_ms_, SharedLimits::active_ms(limit_slots_));
  if (now_ms < active || now_ms - active <= timeout_ms) return false;
  // PgBouncer's words, with the worker whose share this was.
  spdlog::info(
      "cleaning up idle pool for user {} on db {} because: pool idle timeout (age={}s, worker {})",
      credentials_.user, db_.name, (now_ms - active) / 1000, worker_.index());
  return true;
}

void maintain_pools(Worker& worker, uint64_t now_ms) {
  // Client counts only matter to min_pool_size and pool_idle_timeout: not walked otherwise.
  const Config& config = worker.config();
  bool any_min =
      config.settings.min_pool_size > 0 ||
      (config.fallback_database && config.fallback_database->min_pool_size.value_or(0) > 0);
  for (const auto& [name, db] : config.databases) {
    any_min |= db.min_pool_size.value_or(0) > 0;
    // As PgBouncer's janitor: a database line with a forced user has its pool from the start,
    // so that min_pool_size opens servers before any client comes (a pool that waits for its
    // first client would meet the morning's load with none).
    if (!db.user.empty() && config.min_pool_size_for(db) > 0) worker.pool_for(db, db.user);
  }
  const auto idle_timeout = static_cast<uint64_t>(config.settings.pool_idle_timeout.count());
  // Only once every worker has told, for a round or more, which of its shares are in use
  // (Pool::idle_past): the timeout may have been turned on just now.
  const uint64_t armed_ms = worker.arm_pool_idle_timeout(idle_timeout > 0, now_ms);
  const bool freeing = armed_ms != 0 && now_ms - armed_ms >= kPoolIdleArmingMs;
  std::unordered_map<const Pool*, int> clients;
  if (any_min || idle_timeout > 0) {
    worker.for_each_own_client([&clients](Client& c) {
      if (c.pool() != nullptr) ++clients[c.pool()];
    });
  }
  std::vector<Pool*> idle;
  worker.for_each_own_pool([&](Pool& pool) {
    auto it = clients.find(&pool);
    const int n = it == clients.end() ? 0 : it->second;
    pool.maintain(now_ms, n);
    if (idle_timeout > 0 && pool.idle_past(now_ms, n, freeing ? idle_timeout : 0)) {
      idle.push_back(&pool);
    }
  });
  // After the walk: freeing changes the worker's map of pools.
  for (Pool* pool : idle) worker.free_pool(*pool);
}

}  // namespace pgsluice
