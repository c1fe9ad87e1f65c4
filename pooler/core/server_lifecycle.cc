// server_check_query and the role check on an idle server; see server_lifecycle.h and
// Pool::take_idle_server().
#include "pooler/core/server_lifecycle.h"

#include <spdlog/spdlog.h>

#include "pooler/base/log_level.h"
#include "pooler/core/host_roles.h"
#include "pooler/core/pool.h"
#include "pooler/core/server.h"
#include "pooler/core/worker.h"

namespace pgsluice {

void Server::run_check(const std::string& query) {
  if (state_ != State::idle) return;
  if (log_enabled(spdlog::level::debug)) {
    spdlog::debug("{} server_check_query after {} ms idle", log_id(),
                  worker_->now_ms() - life.idle_since_ms);
  }
  life.checking = true;
  internal_failed_ = false;
  // Resetting: not handed out until the answer; a failure closes it there
  // (handle_internal_reply), and the pool starts another if clients wait.
  set_state(State::resetting);
  send_internal_query(query);
}

bool Server::check_role() {
  role_check_.start();
  if (!run_query(RoleCheck::messages(), role_check_)) return false;
  if (log_enabled(spdlog::level::debug)) spdlog::debug("{} role check", log_id());
  life.checking = true;
  life.role_checking = true;
  return true;
}

std::optional<ServerRole> Server::role() const {
  // A server that reports in_hot_standby sends it again with the first reply after a change:
  // as current as its last reply. Otherwise only the role check knows.
  if (reports_role(tracked_)) return role_of(tracked_);
  return role_check_.answer();
}

}  // namespace pgsluice
