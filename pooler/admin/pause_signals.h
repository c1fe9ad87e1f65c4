// SIGUSR1 and SIGUSR2, PgBouncer's signals for PAUSE and RESUME of every database: SIGUSR1
// pauses (as the console's PAUSE without a database: no server is handed out, the ones in use
// are released as their transactions end), SIGUSR2 resumes from PAUSE or SUSPEND. Without them
// the default action of either signal ended the process. Handled on the primary worker, with
// the world stopped, as the console's commands are.
#pragma once

#include <uv.h>

#include "pooler/core/signal_handlers.h"

namespace pgsluice {

class AdminControl;
class Shutdown;
class Worker;

class PauseSignals {
 public:
  PauseSignals(Worker& primary, AdminControl& control, Shutdown& shutdown)
      : primary_(primary), control_(control), shutdown_(shutdown) {}
  PauseSignals(const PauseSignals&) = delete;
  PauseSignals& operator=(const PauseSignals&) = delete;

  void start(uv_loop_t* loop);
  void close();

  // What a signal does, and the line it logs (PgBouncer's words); public for the tests.
  void on_pause_signal();
  void on_resume_signal();

 private:
  static void on_signal(uv_signal_t* handle, int signum);

  Worker& primary_;
  AdminControl& control_;
  Shutdown& shutdown_;
  SignalHandlers<2> signals_;
};

}  // namespace pgsluice
