// The hosts of a pool's [databases] entry (libpq's multi-host form) and what the pool learned of
// each: which one the next server logs in to (load_balance_hosts), and which to skip for a
// while — a host whose login failed, for server_login_retry; a host whose role did not fit
// target_session_attrs (a standby for a read-write entry), for a short recheck interval, so
// that a promotion is noticed within about a second — within 100 ms while the entry has no
// usable host at all (a failover: clients wait for the promoted standby). No libuv here: the
// pool feeds it times.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include "pooler/config/server_address.h"

namespace pgsluice {

class PoolHosts {
 public:
  static constexpr size_t kNone = static_cast<size_t>(-1);
  // How long a host of the wrong role is skipped before a login asks it again.
  static constexpr uint64_t kRoleRecheckMs = 1000;
  // The same while no host of the entry is usable (hasten_role_rechecks): a login per host
  // every 100 ms at most, one at a time per pool, so that the first write on a promoted standby
  // comes within about 0.1 s of its promotion without a storm of logins.
  static constexpr uint64_t kFastRoleRecheckMs = 100;

  explicit PoolHosts(const DatabaseEntry& db) { reset(db); }
  // A reload changed the entry: new hosts, nothing learned yet.
  void reset(const DatabaseEntry& db);

  [[nodiscard]] size_t size() const { return hosts_.size(); }
  [[nodiscard]] const ServerAddress& at(size_t i) const { return hosts_[i].address; }

  // The host the next server logs in to: the first one not skipped at `now_ms`, starting where
  // load_balance_hosts says (round-robin: after the last one picked; random: at `random` modulo
  // the count; disable: the first); kNone when every host is skipped.
  size_t pick(uint64_t now_ms, uint32_t random);
  // pick() with the round-robin turn in `turn`, shared by every worker's share of the pool: a
  // share's own turn would send each worker's first server to the same host.
  size_t pick(uint64_t now_ms, uint32_t random, std::atomic<uint64_t>& turn);

  void login_failed(size_t i, uint64_t until_ms);
  // Another worker's share saw host `i` fail: skipped until `until_ms`, unless skipped longer.
  void learn_failed(size_t i, uint64_t until_ms);
  void role_mismatched(size_t i, uint64_t now_ms, bool primary,
                       uint64_t recheck_ms = kRoleRecheckMs);
  // Hosts skipped for their role are asked again `recheck_ms` after they answered, if that is
  // sooner than planned (the entry has no usable host left).
  void hasten_role_rechecks(uint64_t recheck_ms);
  // Host `i` was skipped for its role, and the process learned that it has another one now
  // (HostRoleBoard): usable at once.
  void role_may_fit(size_t i);
  // Host `i` was skipped for its role and is due to be asked again at `now_ms`.
  [[nodiscard]] bool recheck_due(size_t i, uint64_t now_ms) const {
    return hosts_[i].mismatched && hosts_[i].skip_until_ms <= now_ms;
  }
  // Whether the host is skipped for its role (due to be asked again or not).
  [[nodiscard]] bool mismatched(size_t i) const { return hosts_[i].mismatched; }
  [[nodiscard]] bool skipped(size_t i, uint64_t now_ms) const {
    return hosts_[i].skip_until_ms > now_ms;
  }
  // The host's recheck waits until `until_ms` (another pool's check of it is in flight).
  void defer_recheck(size_t i, uint64_t until_ms) { hosts_[i].skip_until_ms = until_ms; }
  // When the first skipped host becomes usable again (0: none is skipped at `now_ms`).
  [[nodiscard]] uint64_t next_usable_ms(uint64_t now_ms) const;
  // The HostRoleBoard's seq of what this pool knows of host `i`'s role (0: nothing from it).
  [[nodiscard]] uint64_t role_seq(size_t i) const { return hosts_[i].role_seq; }
  void set_role_seq(size_t i, uint64_t seq) { hosts_[i].role_seq = seq; }
  void logged_in(size_t i);

  [[nodiscard]] bool any_usable(uint64_t now_ms) const;
  // Some host answered but had the wrong role: a failover may be under way, so waiting clients
  // wait for the next round instead of failing.
  [[nodiscard]] bool any_role_mismatch(uint64_t now_ms) const;
  // prefer-standby's question: could a host other than `except` still turn out a standby?
  [[nodiscard]] bool standby_may_exist(size_t except, uint64_t now_ms) const;

  // --- failover events (pool_failover.cc logs them) ---
  // A login to host `i` failed at `now_ms`: true when it is the first failure since the host
  // last logged a server in (it becomes unusable now).
  bool start_failing(size_t i, uint64_t now_ms);
  // Since when host `i` has failed every login (0: it has not failed).
  [[nodiscard]] uint64_t failing_since(size_t i) const { return hosts_[i].failing_since_ms; }
  // A server of host `i` told its role: the role the host had before when it was known and
  // differs (the host was promoted or demoted), nothing otherwise.
  std::optional<bool> note_primary(size_t i, bool primary);
  // The role host `i` last told (true: a primary); nothing before a server of it told.
  [[nodiscard]] std::optional<bool> primary(size_t i) const { return hosts_[i].primary; }
  // Hosts not skipped at `now_ms` (SHOW POOLS).
  [[nodiscard]] size_t usable_count(uint64_t now_ms) const;

 private:
  struct Host {
    ServerAddress address;
    uint64_t skip_until_ms = 0;
    bool mismatched = false;        // skipped for its role, not for a failed login
    uint64_t mismatched_ms = 0;     // when it answered with the wrong role
    uint64_t role_seq = 0;          // set_role_seq()
    bool known_primary = false;     // it logged in (or was refused) as a primary
    uint64_t failing_since_ms = 0;  // start_failing(); 0 once a login works again
    std::optional<bool> primary;    // the role its servers last told (note_primary)
  };
  LoadBalanceHosts policy_ = LoadBalanceHosts::round_robin;
  std::vector<Host> hosts_;
  size_t next_ = 0;
};

}  // namespace pgsluice
