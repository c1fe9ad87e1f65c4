// Moving a load-balanced pool's servers onto a host that is usable again (issue 45): a standby
// that restarted, or an old primary rebuilt as a standby. Logins go where load_balance_hosts
// sends them, but a pool that has its servers already logs in to nobody: without this, a
// returned host got no server of the pool until something forced new logins (tens of seconds,
// or never under steady traffic), which defeats adding a replica to take load.
//
// At a server's release, at most once per kRebalanceIntervalMs per worker's share of the pool,
// the share counts its servers per host. When a host that a login may go to now (not skipped
// after a failed login, not known to be of the wrong role) has at least two servers fewer than
// the busiest host, the pool's next login goes to it: at once when the pool has room (a login
// of its own, one at a time as always), else when the released server, if it is on the busiest
// host, is closed to make room — between transactions, never in the middle of one. One server
// per interval and share: the load moves over within seconds, without a storm of logins.
//
// A host whose login failed is asked again this way once per server_login_retry (it is skipped
// meanwhile); the login fails on its own, without taking a server from the pool. A host that
// answered with the wrong role (the primary, for a `standby` entry) is not asked, so that a
// steady cluster costs no logins, until another host of the entry is promoted: an old primary
// is then asked again (recheck_other_primaries), which is how one that comes back as a standby
// after a switchover is found without traffic that needs more servers.
#include <spdlog/spdlog.h>

#include <utility>
#include <vector>

#include "pooler/core/pool.h"
#include "pooler/core/worker.h"

namespace pgsluice {

namespace {

constexpr uint64_t kRebalanceIntervalMs = 1000;

// Entries whose servers are meant to be spread: read-write and primary entries have one
// fitting host; prefer-standby's primary is only a fallback, never a share of the load.
bool spreads_servers(const DatabaseEntry& db) {
  if (db.load_balance_hosts == LoadBalanceHosts::disable) return false;
  return db.target_session_attrs == TargetSessionAttrs::any ||
         db.target_session_attrs == TargetSessionAttrs::read_only ||
         db.target_session_attrs == TargetSessionAttrs::standby;
}

}  // namespace

bool Pool::rebalance_at_release(Server& server, uint64_t now_ms) {
  if (hosts_.size() < 2 || !spreads_servers(db_) || paused_ || removed_ ||
      now_ms < rebalance_checked_ms_ + kRebalanceIntervalMs) {
    return false;
  }
  rebalance_checked_ms_ = now_ms;
  learn_host_news(now_ms);  // what the other shares and pools learned of the hosts meanwhile
  std::vector<uint32_t> count(hosts_.size(), 0);
  for_each_server([&](Server& s) {
    if (s.host_index() < count.size()) ++count[s.host_index()];
  });
  size_t busiest = 0;
  size_t fewest = PoolHosts::kNone;
  for (size_t i = 0; i < count.size(); ++i) {
    if (count[i] > count[busiest]) busiest = i;
    // Not a host that answered with the wrong role (recheck_other_primaries says when one is
    // worth asking again), nor one skipped after a failed login until server_login_retry.
    if (hosts_.skipped(i, now_ms) || hosts_.mismatched(i)) continue;
    if (fewest == PoolHosts::kNone || count[i] < count[fewest]) fewest = i;
  }
  if (fewest == PoolHosts::kNone || count[fewest] + 2 > count[busiest]) return false;
  const std::string host = hosts_.at(fewest).to_string();
  rebalance_to_ = fewest;
  spdlog::info("{}@{}: rebalancing onto host {} ({} servers here, {} on {})", credentials_.user,
               db_.name, host, count[fewest], count[busiest], hosts_.at(busiest).to_string());
  // The pool has room: a login of its own to that host (one at a time, as any).
  if (try_launch(/*evict=*/false)) return false;
  if (server.host_index() != busiest) return false;  // the next login goes there
  server.close(fmt::format("rebalancing onto host {}", host));
  return true;
}

void Pool::recheck_other_primaries(size_t promoted) {
  if (!spreads_servers(db_) || db_.target_session_attrs == TargetSessionAttrs::any) return;
  for (size_t i = 0; i < hosts_.size(); ++i) {
    if (i != promoted && hosts_.primary(i) == true && hosts_.mismatched(i)) {
      spdlog::info("{}@{}: host {} promoted: host {}, a primary until now, is asked again",
                   credentials_.user, db_.name, hosts_.at(promoted).to_string(),
                   hosts_.at(i).to_string());
      hosts_.role_may_fit(i);
    }
  }
}

size_t Pool::take_rebalance_host(uint64_t now_ms) {
  const size_t host = std::exchange(rebalance_to_, PoolHosts::kNone);
  return host != PoolHosts::kNone && host < hosts_.size() && !hosts_.skipped(host, now_ms)
             ? host
             : PoolHosts::kNone;
}

}  // namespace pgsluice
