// See pause_signals.h.
#include "pooler/admin/pause_signals.h"

#include <spdlog/spdlog.h>

#include <csignal>

#include "pooler/admin/control.h"
#include "pooler/core/worker.h"
#include "pooler/ops/shutdown.h"

namespace pgsluice {

void PauseSignals::start(uv_loop_t* loop) {
  const std::array<int, 2> numbers = {SIGUSR1, SIGUSR2};
  for (size_t i = 0; i < signals_.size(); ++i) {
    uv_signal_init(loop, &signals_[i]);
    signals_[i].data = this;
    uv_signal_start(&signals_[i], on_signal, numbers[i]);
  }
  started_ = true;
}

void PauseSignals::close() {
  if (!started_) return;
  started_ = false;
  for (auto& s : signals_) uv_close(reinterpret_cast<uv_handle_t*>(&s), nullptr);
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
