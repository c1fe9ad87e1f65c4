// See shared_limits.h.
#include "pooler/core/shared_limits.h"

#include <algorithm>

namespace pgsluice {

namespace {
uint64_t bit(int worker) {
  return uint64_t{1} << (static_cast<unsigned>(worker) & 63U);
}

LaunchVerdict kind_of(const LimitSlots& slots, const LimitCounter* c) {
  if (c == slots.pool) return LaunchVerdict::pool_full;
  return c == slots.db ? LaunchVerdict::db_full : LaunchVerdict::user_full;
}
}  // namespace

LimitCounter& SharedLimits::counter(
    std::unordered_map<std::string, std::unique_ptr<LimitCounter>>& map, const std::string& key) {
  auto& slot = map[key];
  if (!slot) slot = std::make_unique<LimitCounter>();
  return *slot;
}

LimitSlots SharedLimits::slots_for(const std::string& db, const std::string& user) {
  std::string pool_key;
  pool_key.reserve(db.size() + user.size() + 1);
  pool_key.append(db).push_back('\0');
  pool_key.append(user);
  std::lock_guard lock(mutex_);
  return {&counter(pools_, pool_key), &counter(dbs_, db), &counter(users_, user)};
}

void SharedLimits::totals(const LimitSlots& slots, LaunchInput& in) {
  in.pool_servers = slots.pool->servers.load(std::memory_order_relaxed);
  in.db_servers = slots.db->servers.load(std::memory_order_relaxed);
  in.user_servers = slots.user->servers.load(std::memory_order_relaxed);
}

LaunchVerdict SharedLimits::reserve(const LimitSlots& slots, LaunchInput in, int worker) {
  // Counts only grow under this lock, so what is read here can only have shrunk by the time
  // the slot is taken: the sum never passes the limit.
  std::lock_guard lock(mutex_);
  totals(slots, in);
  const LaunchVerdict verdict = launch_verdict(in);
  if (!launch_allowed(verdict)) return verdict;
  for (LimitCounter* c : {slots.pool, slots.db, slots.user}) {
    c->servers.fetch_add(1, std::memory_order_relaxed);
    c->held[static_cast<size_t>(worker)].fetch_add(1, std::memory_order_relaxed);
    if (c->starving.load(std::memory_order_relaxed) & bit(worker)) {
      c->starving.fetch_and(~bit(worker), std::memory_order_relaxed);
    }
  }
  return verdict;
}

SharedLimits::Release SharedLimits::release(const LimitSlots& slots, int worker) {
  Release result;
  uint64_t candidates = slots.pool->starving.load(std::memory_order_relaxed) & ~bit(worker);
  while (candidates != 0) {
    const int to = __builtin_ctzll(candidates);
    candidates &= candidates - 1;
    // Whoever clears the bit owns the hand-over (two releases never pick the same waiter).
    if ((slots.pool->starving.fetch_and(~bit(to), std::memory_order_relaxed) & bit(to)) == 0) {
      continue;
    }
    for (LimitCounter* c : {slots.pool, slots.db, slots.user}) {
      c->held[static_cast<size_t>(worker)].fetch_sub(1, std::memory_order_relaxed);
      c->held[static_cast<size_t>(to)].fetch_add(1, std::memory_order_relaxed);
    }
    result.handed_to = to;
    return result;
  }
  for (LimitCounter* c : {slots.pool, slots.db, slots.user}) {
    c->servers.fetch_sub(1, std::memory_order_relaxed);
    c->held[static_cast<size_t>(worker)].fetch_sub(1, std::memory_order_relaxed);
  }
  for (LimitCounter* c : {slots.db, slots.user}) {
    if (c->starving.load(std::memory_order_relaxed) != 0) {
      result.wake |= c->starving.exchange(0, std::memory_order_relaxed);
    }
  }
  return result;
}

bool SharedLimits::note_starving(const LimitSlots& slots, LaunchVerdict verdict, int worker) {
  LimitCounter* c = nullptr;
  switch (verdict) {
    case LaunchVerdict::pool_full:
      c = slots.pool;
      break;
    case LaunchVerdict::db_full:
      c = slots.db;
      break;
    case LaunchVerdict::user_full:
      c = slots.user;
      break;
    default:
      return false;
  }
  if (c->starving.load(std::memory_order_relaxed) & bit(worker)) return false;
  return (c->starving.fetch_or(bit(worker), std::memory_order_relaxed) & bit(worker)) == 0;
}

SharedLimits::YieldTo SharedLimits::yield_target(const LimitSlots& slots, int worker,
                                                 uint64_t now_us, uint64_t oldest_wait_us) {
  constexpr uint64_t kHandoverMinWaitUs = 100'000;
  const uint64_t others = ~bit(worker);
  for (LimitCounter* c : {slots.pool, slots.db, slots.user}) {
    uint64_t starving = c->starving.load(std::memory_order_relaxed) & others;
    const int mine = c->held[static_cast<size_t>(worker)].load(std::memory_order_relaxed);
    while (starving != 0) {
      const int w = __builtin_ctzll(starving);
      starving &= starving - 1;
      const YieldTo to{.worker = w, .starving_for = kind_of(slots, c)};
      const int theirs = c->held[static_cast<size_t>(w)].load(std::memory_order_relaxed);
      const uint64_t since =
          c == slots.pool
              ? c->waiting_since_us[static_cast<size_t>(w)].load(std::memory_order_relaxed)
              : 0;
      if (c == slots.pool && oldest_wait_us != 0) {
        // Clients wait here too: one queue, first come first served, with 100 ms of slack so
        // that a server does not move for a head start of a few microseconds. The numbers
        // held do not count here: the server that arrives for a longer wait must stay.
        if (since != 0 && since + kHandoverMinWaitUs <= oldest_wait_us) return to;
        continue;
      }
      if (theirs + 1 < mine) return to;
      // A worker whose servers are all busy (one held by a long query) is still owed the next
      // server once its client waited long enough, as in one queue.
      if (c != slots.pool || mine == 0) continue;
      if (since != 0 && now_us >= since + kHandoverMinWaitUs) return to;
    }
  }
  return {};
}

const char* SharedLimits::YieldTo::close_reason() const {
  // The words of an eviction within one worker (Pool::evict_idle_server): the same event.
  return starving_for == LaunchVerdict::db_full
             ? "evicted: max_db_connections reached and another pool needs a server"
             : "evicted: max_user_connections reached and another pool needs a server";
}

SharedLimits::YieldTo SharedLimits::any_starving(const LimitSlots& slots, int worker) {
  const uint64_t others = ~bit(worker);
  for (LimitCounter* c : {slots.pool, slots.db, slots.user}) {
    const uint64_t starving = c->starving.load(std::memory_order_relaxed) & others;
    if (starving != 0) {
      return {.worker = __builtin_ctzll(starving), .starving_for = kind_of(slots, c)};
    }
  }
  return {};
}

bool SharedLimits::claim_starving(const LimitSlots& slots, int to) {
  return (slots.pool->starving.fetch_and(~bit(to), std::memory_order_relaxed) & bit(to)) != 0;
}

void SharedLimits::restore_starving(const LimitSlots& slots, int to) {
  slots.pool->starving.fetch_or(bit(to), std::memory_order_relaxed);
}

void SharedLimits::move_slots(const LimitSlots& slots, int from, int to) {
  for (LimitCounter* c : {slots.pool, slots.db, slots.user}) {
    c->held[static_cast<size_t>(from)].fetch_sub(1, std::memory_order_relaxed);
    c->held[static_cast<size_t>(to)].fetch_add(1, std::memory_order_relaxed);
  }
}

void SharedLimits::login_started(const LimitSlots& slots) {
  slots.pool->logins.fetch_add(1, std::memory_order_seq_cst);
}

uint64_t SharedLimits::login_ended(const LimitSlots& slots) {
  // Decrement, then look at the waiters: with no_or_wait's order (bit, then count) one of the
  // two sides sees the other (both sequentially consistent).
  slots.pool->logins.fetch_sub(1, std::memory_order_seq_cst);
  if (slots.pool->login_waiters.load(std::memory_order_seq_cst) == 0) return 0;
  return slots.pool->login_waiters.exchange(0, std::memory_order_seq_cst);
}

bool SharedLimits::no_login_or_wait(const LimitSlots& slots, int worker) {
  if (slots.pool->logins.load(std::memory_order_seq_cst) == 0) return true;
  slots.pool->login_waiters.fetch_or(bit(worker), std::memory_order_seq_cst);
  if (slots.pool->logins.load(std::memory_order_seq_cst) != 0) return false;
  slots.pool->login_waiters.fetch_and(~bit(worker), std::memory_order_seq_cst);
  return true;
}

bool SharedLimits::begin_only_login(const LimitSlots& slots, int worker) {
  for (;;) {
    int none = 0;
    if (slots.pool->logins.compare_exchange_strong(none, 1, std::memory_order_seq_cst)) {
      return true;
    }
    if (!no_login_or_wait(slots, worker)) return false;
    // It ended between the two looks: try again.
  }
}

bool SharedLimits::other_starving(const LimitSlots& slots, int worker) {
  const uint64_t others = ~bit(worker);
  return ((slots.pool->starving.load(std::memory_order_relaxed) |
           slots.db->starving.load(std::memory_order_relaxed) |
           slots.user->starving.load(std::memory_order_relaxed)) &
          others) != 0;
}

void SharedLimits::note_active(const LimitSlots& slots, uint64_t now_ms) {
  uint64_t seen = slots.pool->active_ms.load(std::memory_order_relaxed);
  while (seen < now_ms &&
         !slots.pool->active_ms.compare_exchange_weak(seen, now_ms, std::memory_order_acq_rel)) {
  }
}

bool SharedLimits::try_pin(const LimitSlots& slots, int limit) {
  int current = slots.pool->pinned.load(std::memory_order_acquire);
  while (current < limit) {
    if (slots.pool->pinned.compare_exchange_weak(current, current + 1, std::memory_order_acq_rel)) {
      return true;
    }
  }
  return false;
}

void SharedLimits::login_failed(const LimitSlots& slots, uint64_t now_ms,
                                std::string_view message) {
  {
    std::lock_guard lock(slots.pool->login_error_mutex);
    slots.pool->login_error = std::string(message);
  }
  // 0 means "the last login succeeded": a failure at the clock's zero still counts.
  slots.pool->login_failed_ms.store(now_ms == 0 ? 1 : now_ms, std::memory_order_release);
}

std::string SharedLimits::login_error(const LimitSlots& slots) {
  std::lock_guard lock(slots.pool->login_error_mutex);
  return slots.pool->login_error;
}

void SharedLimits::host_failed(const LimitSlots& slots, const std::string& host,
                               uint64_t until_ms) {
  std::lock_guard lock(slots.pool->hosts_mutex);
  uint64_t& until = slots.pool->host_skip_until_ms[host];
  until = std::max(until, until_ms);
}

void SharedLimits::host_logged_in(const LimitSlots& slots, const std::string& host) {
  std::lock_guard lock(slots.pool->hosts_mutex);
  slots.pool->host_skip_until_ms.erase(host);
}

uint64_t SharedLimits::host_skip_until(const LimitSlots& slots, const std::string& host) {
  std::lock_guard lock(slots.pool->hosts_mutex);
  auto it = slots.pool->host_skip_until_ms.find(host);
  return it == slots.pool->host_skip_until_ms.end() ? 0 : it->second;
}

void SharedLimits::begin_trouble(const LimitSlots& slots, uint64_t now_ms) {
  uint64_t none = 0;
  slots.pool->trouble_since_ms.compare_exchange_strong(none, now_ms == 0 ? 1 : now_ms,
                                                       std::memory_order_acq_rel);
}

SharedLimits::Trouble SharedLimits::end_trouble(const LimitSlots& slots) {
  Trouble t;
  t.since_ms = slots.pool->trouble_since_ms.exchange(0, std::memory_order_acq_rel);
  t.outage = slots.pool->outage.exchange(false, std::memory_order_acq_rel);
  t.role_refusals = slots.pool->outage_role_refusals.exchange(0, std::memory_order_acq_rel);
  return t;
}

}  // namespace pgsluice
