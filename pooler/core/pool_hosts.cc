// Host choice and health of a multi-host [databases] entry; see pool_hosts.h.
#include "pooler/core/pool_hosts.h"

#include <utility>

namespace pgsluice {

void PoolHosts::reset(const DatabaseEntry& db) {
  policy_ = db.load_balance_hosts;
  hosts_.clear();
  for (ServerAddress& a : ServerAddress::all_from(db)) {
    Host host;
    host.address = std::move(a);
    hosts_.push_back(std::move(host));
  }
  next_ = 0;
}

size_t PoolHosts::pick(uint64_t now_ms, uint32_t random) {
  const size_t n = hosts_.size();
  size_t start = 0;
  if (policy_ == LoadBalanceHosts::round_robin) {
    start = next_ % n;
  } else if (policy_ == LoadBalanceHosts::random) {
    start = random % n;
  }
  for (size_t k = 0; k < n; ++k) {
    const size_t i = (start + k) % n;
    if (hosts_[i].skip_until_ms <= now_ms) {
      next_ = i + 1;  // round-robin: the next server starts after this one
      return i;
    }
  }
  return kNone;
}

size_t PoolHosts::pick(uint64_t now_ms, uint32_t random, std::atomic<uint64_t>& turn) {
  uint64_t seen = turn.load(std::memory_order_relaxed);
  for (;;) {
    next_ = static_cast<size_t>(seen % hosts_.size());
    const size_t i = pick(now_ms, random);
    if (i == kNone || policy_ != LoadBalanceHosts::round_robin) return i;
    // Another share took the same turn meanwhile: pick again after the host it took.
    if (turn.compare_exchange_weak(seen, next_, std::memory_order_relaxed)) return i;
  }
}

void PoolHosts::login_failed(size_t i, uint64_t until_ms) {
  hosts_[i].skip_until_ms = until_ms;
  hosts_[i].mismatched = false;
}

void PoolHosts::learn_failed(size_t i, uint64_t until_ms) {
  if (hosts_[i].skip_until_ms < until_ms) login_failed(i, until_ms);
}

void PoolHosts::role_mismatched(size_t i, uint64_t now_ms, bool primary, uint64_t recheck_ms) {
  hosts_[i].skip_until_ms = now_ms + recheck_ms;
  hosts_[i].mismatched = true;
  hosts_[i].mismatched_ms = now_ms;
  hosts_[i].known_primary = primary;
}

void PoolHosts::hasten_role_rechecks(uint64_t recheck_ms) {
  for (Host& h : hosts_) {
    if (h.mismatched && h.skip_until_ms > h.mismatched_ms + recheck_ms) {
      h.skip_until_ms = h.mismatched_ms + recheck_ms;
    }
  }
}

void PoolHosts::role_may_fit(size_t i) {
  if (!hosts_[i].mismatched) return;  // skipped for a failed login, or not at all
  hosts_[i].skip_until_ms = 0;
  hosts_[i].mismatched = false;
}

uint64_t PoolHosts::next_usable_ms(uint64_t now_ms) const {
  uint64_t next = 0;
  for (const Host& h : hosts_) {
    if (h.skip_until_ms > now_ms && (next == 0 || h.skip_until_ms < next)) next = h.skip_until_ms;
  }
  return next;
}

void PoolHosts::logged_in(size_t i) {
  hosts_[i].skip_until_ms = 0;
  hosts_[i].mismatched = false;
  hosts_[i].failing_since_ms = 0;
}

bool PoolHosts::start_failing(size_t i, uint64_t now_ms) {
  if (hosts_[i].failing_since_ms != 0) return false;
  hosts_[i].failing_since_ms = now_ms == 0 ? 1 : now_ms;  // 0 means "not failing"
  return true;
}

std::optional<bool> PoolHosts::note_primary(size_t i, bool primary) {
  const std::optional<bool> before = std::exchange(hosts_[i].primary, primary);
  if (before && *before != primary) return before;
  return std::nullopt;
}

size_t PoolHosts::usable_count(uint64_t now_ms) const {
  size_t n = 0;
  for (const Host& h : hosts_) n += h.skip_until_ms <= now_ms ? 1 : 0;
  return n;
}

bool PoolHosts::any_usable(uint64_t now_ms) const {
  for (const Host& h : hosts_) {
    if (h.skip_until_ms <= now_ms) return true;
  }
  return false;
}

bool PoolHosts::any_role_mismatch(uint64_t now_ms) const {
  for (const Host& h : hosts_) {
    if (h.mismatched && h.skip_until_ms > now_ms) return true;
  }
  return false;
}

bool PoolHosts::standby_may_exist(size_t except, uint64_t now_ms) const {
  for (size_t i = 0; i < hosts_.size(); ++i) {
    if (i == except) continue;
    const Host& h = hosts_[i];
    // A host that was skipped for a failed login is no candidate until it answers again; one
    // refused as a primary is none either (until its recheck shows otherwise).
    const bool skipped = h.skip_until_ms > now_ms;
    if (!skipped && !h.known_primary) return true;
  }
  return false;
}

}  // namespace pgsluice
