// server_check_query on an idle server; see server_lifecycle.h and Pool::take_idle_server().
#include "pooler/core/server_lifecycle.h"

#include <spdlog/spdlog.h>

#include "pooler/base/log_level.h"
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

}  // namespace pgsluice
