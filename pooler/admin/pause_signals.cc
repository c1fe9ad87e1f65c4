// See pause_signals.h.
#include "pooler/admin/pause_signals.h"

#include <spdlog/spdlog.h>

#include <csignal>

#include "pooler/admin/control.h"
#include "pooler/core/worker.h"
#include "pooler/ops/shutdown.h"

namespace pgsluice {

void PauseSignals::start(uv_loop_t* loop) {
  signals_.start(loop, {SIGUSR1, SIGUSR2}, on_signal, this);
}

void PauseSignals::close() {
  signals_.close();
}

void PauseSignals::on_signal(uv_signal_t* handle, int signum) {
  auto* self = static_cast<PauseSignals*>(handle->data);
  WorldPause pause = self->primary_.pause_world();  // every worker's pools
  if (signum == SIGUSR1) {
    self->on_pause_signal();
  } else {
    self->on_resume_signal();
  }
}

void PauseSignals::on_pause_signal() {
  if (control_.mode() != AdminControl::Mode::active) {
    spdlog::info("got SIGUSR1, but already paused/suspended");
    return;
  }
  spdlog::info("got SIGUSR1, pausing all activity");
  control_.pause("");
}

void PauseSignals::on_resume_signal() {
  if (shutdown_.mode() != Shutdown::Mode::none) {
    spdlog::info("got SIGUSR2 while shutting down, ignoring");
    return;
  }
  switch (control_.mode()) {
    case AdminControl::Mode::suspended:
      spdlog::info("got SIGUSR2, continuing from SUSPEND");
      control_.resume("");
      return;
    case AdminControl::Mode::paused:
      spdlog::info("got SIGUSR2, continuing from PAUSE");
      control_.resume("");
      return;
    case AdminControl::Mode::active:
      spdlog::info("got SIGUSR2, but not paused/suspended");
      return;
  }
}

}  // namespace pgsluice
