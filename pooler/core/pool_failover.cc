// Failover events of a multi-host pool, logged with their timing: a host that becomes unusable
// (its login fails) or usable again, a host whose role changes (a promotion, a demotion), and
// the pool's time without any usable host, with how many clients waited through it and for how
// long. One line per event and per worker's share of the pool. A failed host is skipped by every
// share (the first failure is shared: pick_host); a host's role is the process's knowledge, for
// every pool of the host (HostRoleBoard), so a promotion is logged once, by the pool that saw it.
#include <spdlog/spdlog.h>

#include "pooler/core/host_roles.h"
#include "pooler/core/pool.h"
#include "pooler/core/shared_limits.h"
#include "pooler/core/worker.h"

namespace pgsluice {

namespace {
double seconds_between(uint64_t from_ms, uint64_t to_ms) {
  return to_ms > from_ms ? static_cast<double>(to_ms - from_ms) / 1000.0 : 0.0;
}

const char* role_word(bool primary) {
  return primary ? "primary" : "standby";
}
}  // namespace

size_t Pool::pick_host(uint64_t now_ms) {
  learn_host_news(now_ms);
  if (const size_t rebalance = take_rebalance_host(now_ms); rebalance != PoolHosts::kNone) {
    return rebalance;
  }
  const size_t host = hosts_.pick(now_ms, stagger_draw(), SharedLimits::host_turn(limit_slots_));
  return host == PoolHosts::kNone ? 0 : host;
}

void Pool::learn_host_news(uint64_t now_ms) {
  if (db_.target_session_attrs != TargetSessionAttrs::any) learn_host_roles(now_ms);
  if (hosts_.size() < 2) return;
  for (size_t i = 0; i < hosts_.size(); ++i) {
    const uint64_t until = SharedLimits::host_skip_until(limit_slots_, hosts_.at(i).to_string());
    if (until > now_ms) hosts_.learn_failed(i, until);
  }
}

void Pool::learn_host_roles(uint64_t now_ms) {
  HostRoleBoard& board = worker_.group().host_roles();
  const uint64_t news = board.news();
  const bool fresh = news != role_news_seen_;
  role_news_seen_ = news;
  for (size_t i = 0; i < hosts_.size(); ++i) {
    if (fresh) {
      const std::optional<HostRoleBoard::Known> known = board.known(hosts_.at(i).to_string());
      if (known && known->seq > hosts_.role_seq(i)) adopt_host_role(i, *known, now_ms);
    }
    // Another pool (or share) asks this host whether it was promoted, or just did: its answer
    // is told to every pool, and the host is asked at most once per recheck interval.
    if (hosts_.recheck_due(i, now_ms) &&
        !board.may_check(hosts_.at(i).to_string(), now_ms, role_recheck_ms())) {
      hosts_.defer_recheck(i, now_ms + PoolHosts::kFastRoleRecheckMs);
    }
  }
}

void Pool::adopt_host_role(size_t i, const HostRoleBoard::Known& known, uint64_t now_ms) {
  hosts_.set_role_seq(i, known.seq);
  const bool promoted = known.primary && hosts_.primary(i) != true;
  (void)hosts_.note_primary(i, known.primary);  // logged by the pool that learned it
  if (promoted) recheck_other_primaries(i);
  const std::optional<bool> worth = role_worth_a_login(db_.target_session_attrs, known.primary);
  if (!worth) return;
  if (*worth) {
    hosts_.role_may_fit(i);
  } else if (!hosts_.skipped(i, now_ms)) {
    hosts_.role_mismatched(i, now_ms, known.primary, role_recheck_ms());
    note_host_trouble(now_ms);
  }
}

uint64_t Pool::role_recheck_ms() const {
  return in_outage() ? PoolHosts::kFastRoleRecheckMs : PoolHosts::kRoleRecheckMs;
}

void Pool::begin_role_recheck(size_t host, uint64_t now_ms) {
  if (hosts_.mismatched(host))
    worker_.group().host_roles().begin_check(hosts_.at(host).to_string(), now_ms);
}

void Pool::wake_at_next_usable_host(uint64_t now_ms) {
  if (const uint64_t next = hosts_.next_usable_ms(now_ms); next != 0) worker_.wake_pools_at(next);
}

void Pool::skip_host(const Server& server, uint64_t until_ms) {
  hosts_.login_failed(server.host_index(), until_ms);
  SharedLimits::host_failed(limit_slots_, server.address().to_string(), until_ms);
}

void Pool::note_login_failure(const Server& server, std::string_view message, uint64_t now_ms) {
  worker_.group().host_roles().end_check(server.address().to_string());
  if (hosts_.start_failing(server.host_index(), now_ms)) {
    spdlog::warn("{}@{}: host {} unusable: {}; asked again every server_login_retry",
                 credentials_.user, db_.name, server.address().to_string(), message);
  }
  note_host_trouble(now_ms);
}

void Pool::note_host_trouble(uint64_t now_ms) {
  if (trouble_since_ms_ == 0) trouble_since_ms_ = now_ms;
  SharedLimits::begin_trouble(limit_slots_, now_ms);
  if (!no_usable_host_ && !hosts_.any_usable(now_ms)) {
    no_usable_host_ = true;
    SharedLimits::note_outage(limit_slots_);
    spdlog::warn(
        "{}@{}: no usable host of {} (target_session_attrs = {}); clients wait, up to "
        "query_wait_timeout",
        credentials_.user, db_.name, hosts_.size(), to_string(db_.target_session_attrs));
  }
  // A failover (seen here or by another worker's share): the hosts that answered with the
  // wrong role are asked again soon, one of them may be the standby being promoted (the waiting
  // clients' first write goes there).
  if (in_outage()) hosts_.hasten_role_rechecks(PoolHosts::kFastRoleRecheckMs);
}

bool Pool::in_outage() const {
  return no_usable_host_ || SharedLimits::outage(limit_slots_);
}

void Pool::note_role_told(const Server& server, const ServerRole& role) {
  const bool primary = !role.hot_standby;
  const size_t i = server.host_index();
  if (hosts_.primary(i) == primary) return;  // what the pool knew: every release comes here
  (void)hosts_.note_primary(i, primary);
  std::optional<bool> was;
  const std::string host = server.address().to_string();
  hosts_.set_role_seq(i, worker_.group().host_roles().tell(host, primary, was));
  if (primary) recheck_other_primaries(i);  // it was not one, as far as this pool knew
  if (!was) return;
  spdlog::warn("{}@{}: host {} is now a {} (was a {})", credentials_.user, db_.name, host,
               role_word(primary), role_word(*was));
  // Every pool of the host, on every worker, knows it now: a read-write pool waiting for a
  // primary logs in to it at once instead of at its own next recheck.
  worker_.group().for_each_worker([](Worker& w) { w.post([&w] { w.on_host_role_news(); }); });
}

void Pool::note_login_ok(const Server& server, uint64_t now_ms) {
  if (hosts_.size() < 2) return;
  SharedLimits::host_logged_in(limit_slots_, server.address().to_string());
  if (const uint64_t since = hosts_.failing_since(server.host_index()); since != 0) {
    spdlog::info("{}@{}: host {} usable again after {:.1f} s", credentials_.user, db_.name,
                 server.address().to_string(), seconds_between(since, now_ms));
  }
}

void Pool::end_outage(const Server& server, uint64_t now_ms) {
  // A server older than 14 before its role check: not yet known to be of the right role.
  if (db_.target_session_attrs != TargetSessionAttrs::any && !server.role()) return;
  no_usable_host_ = false;
  trouble_since_ms_ = 0;
  // The pool's failover is one for every worker's share: the first share that has a server of
  // the right role again logs it, timed from the first trouble any share saw. Without an
  // outage (a host failed or refused, but another one served) there is nothing to log.
  const SharedLimits::Trouble trouble = SharedLimits::end_trouble(limit_slots_);
  if (!trouble.outage) return;
  const uint64_t oldest = oldest_wait_start_us();
  const uint64_t now = now_us();
  const double waited = oldest != 0 && now > oldest ? static_cast<double>(now - oldest) / 1e6 : 0;
  const std::optional<ServerRole> role = server.role();
  // The servers (mostly logins) that found a host of the wrong role meanwhile: what the
  // rechecks cost the hosts (a promoted standby is looked for every 100 ms, not in a storm).
  spdlog::warn(
      "{}@{}: new {} {} after {:.1f} s without one; {} clients waited up to {:.2f} s; {} servers "
      "had the wrong role meanwhile",
      credentials_.user, db_.name, role && role->hot_standby ? "standby" : "primary",
      server.address().to_string(), seconds_between(trouble.since_ms, now_ms),
      waiting_.size() + welcome_waiting_.size(), waited, trouble.role_refusals);
}

}  // namespace pgsluice
