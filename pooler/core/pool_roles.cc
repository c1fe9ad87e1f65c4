// A pool's servers against target_session_attrs (host_roles.h): the check at login, at release
// and, for idle servers, every server_role_check_interval (role_check.h). Kept apart from
// pool.cc, which hands servers to clients.
#include <spdlog/spdlog.h>

#include <utility>

#include "pooler/core/host_roles.h"
#include "pooler/core/pool.h"
#include "pooler/core/worker.h"

namespace pgsluice {

bool Pool::accept_role(Server& server) {
  // The login may have been the process's check of a host skipped for its role: it is over.
  if (hosts_.mismatched(server.host_index())) {
    worker_.group().host_roles().end_check(server.address().to_string());
  }
  return !close_if_wrong_role(server, "wrong role at login");
}

bool Pool::close_if_wrong_role(Server& server, std::string_view what) {
  if (db_.target_session_attrs == TargetSessionAttrs::any) return false;
  // A server older than 14 has no role yet: it is asked before it serves (take_idle_server),
  // and its answer comes back here through on_server_idle.
  const std::optional<ServerRole> role = server.role();
  if (!role) return false;
  note_role_told(server, *role);
  const uint64_t now = worker_.now_ms();
  const std::string_view why = role_mismatch(db_.target_session_attrs, *role,
                                             hosts_.standby_may_exist(server.host_index(), now));
  if (why.empty()) return false;
  // Not a failed login: the host answered, with the wrong role (a standby for a read-write
  // entry, a primary before its promotion is over, or a standby just promoted). Waiting clients
  // go on waiting: the next host is tried now, this one again in a moment.
  hosts_.role_mismatched(server.host_index(), now, !role->hot_standby, role_recheck_ms());
  note_host_trouble(now);
  SharedLimits::count_role_refusal(limit_slots_);
  spdlog::info("{}: {}: {} (target_session_attrs = {}), trying another host", server.log_id(), what,
               why, to_string(db_.target_session_attrs));
  server.close(fmt::format("{}: {}", what, why));
  launch_for_waiters();
  return true;
}

bool Pool::take_role_answer(Server& server, uint64_t now_ms) {
  const bool checked = std::exchange(server.life.role_checking, false);
  if (checked && !server.role_check().error().empty()) {
    // Not a question of roles: a server that cannot answer this is not one to hand out.
    server.close(fmt::format("role check failed: {}", server.role_check().error()));
    return false;
  }
  // role_known_ms matters only to check_idle_roles, which runs only for a target_session_attrs:
  // without one, this runs at every release of a server and the lookup was a tenth of a
  // select-only transaction's instructions (docs/profile.md). An entry reloaded into having one
  // then checks its idle servers once at the next tick (role_known_ms 0), which is what it needs.
  if (checked ||
      (db_.target_session_attrs != TargetSessionAttrs::any && reports_role(server.parameters()))) {
    server.life.role_known_ms = now_ms;
  }
  return true;
}

void Pool::check_idle_roles(uint64_t now_ms) {
  if (db_.target_session_attrs == TargetSessionAttrs::any) return;
  const auto interval =
      static_cast<uint64_t>(worker_.settings().server_role_check_interval.count());
  if (interval == 0) return;
  // Without traffic nothing else would tell a promoted standby (or a demoted primary) from
  // what it was: its idle servers would serve the next transactions with the wrong role.
  idle_.for_each([&](Server& server) {
    if (now_ms < server.life.role_known_ms + interval) return;
    if (!server.check_role()) server.close("the role check could not start");
  });
}

}  // namespace pgsluice
