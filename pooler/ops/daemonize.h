// `pgsluice -d`: runs in the background, as PgBouncer's -d. The starting process forks, the
// child starts a new session (setsid) and forks again, so that the daemon can never reacquire
// a terminal. The starting process waits until the daemon reports that it listens (or has
// failed) and exits with 0 or 1 accordingly, so that a service manager or script sees a failed
// start; the daemon's errors up to then still reach the original stderr.
#pragma once

#include <string>

namespace pgsluice {

class Daemon {
 public:
  // Forks. Returns only in the daemon (true), or false with `error` when the fork failed; the
  // starting process never returns from here.
  bool start(std::string& error);
  // The daemon is up: stdin, stdout and stderr go to /dev/null and the starting process exits 0.
  void ready();

 private:
  int ready_fd_ = -1;
};

}  // namespace pgsluice
