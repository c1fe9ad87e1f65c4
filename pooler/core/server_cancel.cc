// Cancel requests for a server's running query, and the hold on its release until they are
// done (server.h, cancel_running_query).
#include <spdlog/spdlog.h>

#include <utility>

#include "pooler/base/log_level.h"
#include "pooler/core/pool.h"
#include "pooler/core/server.h"
#include "pooler/core/worker.h"

namespace pgsluice {

void Server::cancel_running_query() {
  if ((state_ != State::active && state_ != State::replicating) || login_.backend_key.empty())
    return;
  if (!cancels_) {
    cancels_ = std::make_shared<CancelsInFlight>();
    cancels_->server = this;
  }
  ++cancels_->in_flight;
  CancelHooks hooks;
  // PostgreSQL closes a cancel request's connection once it has signalled the backend: after
  // that the request can no longer reach whatever the server runs next.
  hooks.await_close = true;
  hooks.done = [cancels = cancels_] {
    if (--cancels->in_flight == 0 && cancels->server != nullptr) {
      cancels->server->on_cancels_finished();
    }
  };
  worker_->send_cancel(cancel_address_, login_.backend_pid, login_.backend_key, std::move(hooks));
}

void Server::go_idle() {
  if (cancels_in_flight() > 0) {
    // Held, linked to nobody: no client's query may run here before the cancels have landed.
    if (log_enabled(spdlog::level::debug)) {
      spdlog::debug("{} released while {} cancel request(s) are in flight: held", log_id(),
                    cancels_in_flight());
    }
    idle_after_cancels_ = true;
    if (state_ != State::active) set_state(State::active);  // out of resetting: held as active
    return;
  }
  set_state(State::idle);
  pool_->on_server_idle(*this);
}

void Server::on_cancels_finished() {
  if (!std::exchange(idle_after_cancels_, false)) return;
  if (state_ != State::active || client_ != nullptr) return;  // closed, or taken otherwise
  go_idle();
}

}  // namespace pgsluice
