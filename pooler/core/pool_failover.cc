// Failover events of a multi-host pool, logged with their timing: a host that becomes unusable
// (its login fails) or usable again, a host whose role changes (a promotion, a demotion), and
// the pool's time without any usable host, with how many clients waited through it and for how
// long. One line per event and per worker's share of the pool. A failed host is skipped by every
// share (the first failure is shared: pick_host), its other events each share learns on its own.
#include <spdlog/spdlog.h>

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
  learn_host_failures(now_ms);
  const size_t host = hosts_.pick(now_ms, stagger_draw(), SharedLimits::host_turn(limit_slots_));
  return host == PoolHosts::kNone ? 0 : host;
}

void Pool::learn_host_failures(uint64_t now_ms) {
  if (hosts_.size() < 2) return;
  for (size_t i = 0; i < hosts_.size(); ++i) {
    const uint64_t until = SharedLimits::host_skip_until(limit_slots_, hosts_.at(i).to_string());
    if (until > now_ms) hosts_.learn_failed(i, until);
  }
}

void Pool::skip_host(const Server& server, uint64_t until_ms) {
  hosts_.login_failed(server.host_index(), until_ms);
  SharedLimits::host_failed(limit_slots_, server.address().to_string(), until_ms);
}

void Pool::note_login_failure(const Server& server, std::string_view message, uint64_t now_ms) {
  if (hosts_.start_failing(server.host_index(), now_ms)) {
    spdlog::warn("{}@{}: host {} unusable: {}; asked again every server_login_retry",
                 credentials_.user, db_.name, server.address().to_string(), message);
  }
  note_host_trouble(now_ms);
}

void Pool::note_host_trouble(uint64_t now_ms) {
  if (trouble_since_ms_ == 0) trouble_since_ms_ = now_ms;
  if (no_usable_host_ || hosts_.any_usable(now_ms)) return;
  no_usable_host_ = true;
  spdlog::warn(
      "{}@{}: no usable host of {} (target_session_attrs = {}); clients wait, up to "
      "query_wait_timeout",
      credentials_.user, db_.name, hosts_.size(), to_string(db_.target_session_attrs));
}

void Pool::note_role_told(const Server& server, const ServerRole& role) {
  const bool primary = !role.hot_standby;
  if (const std::optional<bool> was = hosts_.note_primary(server.host_index(), primary)) {
    spdlog::warn("{}@{}: host {} is now a {} (was a {})", credentials_.user, db_.name,
                 server.address().to_string(), role_word(primary), role_word(*was));
  }
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
  if (!no_usable_host_) {
    trouble_since_ms_ = 0;  // a host failed or refused, but another one served
    return;
  }
  const uint64_t oldest = oldest_wait_start_us();
  const uint64_t now = now_us();
  const double waited = oldest != 0 && now > oldest ? static_cast<double>(now - oldest) / 1e6 : 0;
  const std::optional<ServerRole> role = server.role();
  spdlog::warn("{}@{}: new {} {} after {:.1f} s without one; {} clients waited up to {:.2f} s",
               credentials_.user, db_.name, role && role->hot_standby ? "standby" : "primary",
               server.address().to_string(), seconds_between(trouble_since_ms_, now_ms),
               waiting_.size() + welcome_waiting_.size(), waited);
  no_usable_host_ = false;
  trouble_since_ms_ = 0;
}

}  // namespace pgsluice
