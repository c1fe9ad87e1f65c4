// See shared_limits.h.
#include "pooler/core/shared_limits.h"

namespace pgsluice {

namespace {
uint64_t bit(int worker) {
  return uint64_t{1} << (static_cast<unsigned>(worker) & 63U);
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

bool SharedLimits::should_yield(const LimitSlots& slots, int worker, uint64_t now_us,
                                uint64_t oldest_wait_us) {
  constexpr uint64_t kHandoverMinWaitUs = 100'000;
  const uint64_t others = ~bit(worker);
  for (LimitCounter* c : {slots.pool, slots.db, slots.user}) {
    uint64_t starving = c->starving.load(std::memory_order_relaxed) & others;
    const int mine = c->held[static_cast<size_t>(worker)].load(std::memory_order_relaxed);
    while (starving != 0) {
      const auto w = static_cast<size_t>(__builtin_ctzll(starving));
      starving &= starving - 1;
      const int theirs = c->held[w].load(std::memory_order_relaxed);
      if (theirs + 1 < mine) return true;
      if (c != slots.pool || theirs > 0 || mine == 0) continue;
      const uint64_t since = c->waiting_since_us[w].load(std::memory_order_relaxed);
      if (since == 0 || now_us < since + kHandoverMinWaitUs) continue;
      if (oldest_wait_us == 0 || since < oldest_wait_us) return true;
    }
  }
  return false;
}

bool SharedLimits::other_starving(const LimitSlots& slots, int worker) {
  const uint64_t others = ~bit(worker);
  return ((slots.pool->starving.load(std::memory_order_relaxed) |
           slots.db->starving.load(std::memory_order_relaxed) |
           slots.user->starving.load(std::memory_order_relaxed)) &
          others) != 0;
}

}  // namespace pgsluice
