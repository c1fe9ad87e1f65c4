// See daemonize.h.
#include "pooler/ops/daemonize.h"

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace pgsluice {

bool Daemon::start(std::string& error) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) {
    error = std::string("pipe: ") + std::strerror(errno);
    return false;
  }
  pid_t child = ::fork();
  if (child < 0) {
    error = std::string("fork: ") + std::strerror(errno);
    return false;
  }
  if (child > 0) {
    // The starting process: wait for the daemon's word. End of file without it means the
    // daemon stopped before it was ready (it said why on stderr).
    ::close(fds[1]);
    char c = 0;
    ssize_t n = 0;
    do {
      n = ::read(fds[0], &c, 1);
    } while (n < 0 && errno == EINTR);
    int status = 0;
    ::waitpid(child, &status, 0);
    ::_exit(n == 1 && c == 'R' ? 0 : 1);
  }
  ::close(fds[0]);
  ::setsid();
  pid_t daemon = ::fork();
  if (daemon < 0) ::_exit(1);
  if (daemon > 0) ::_exit(0);  // the session leader goes; the daemon is not one
  ready_fd_ = fds[1];
  return true;
}

void Daemon::ready() {
  if (ready_fd_ < 0) return;
  int null = ::open("/dev/null", O_RDWR);
  if (null >= 0) {
    ::dup2(null, STDIN_FILENO);
    ::dup2(null, STDOUT_FILENO);
    ::dup2(null, STDERR_FILENO);
    if (null > STDERR_FILENO) ::close(null);
  }
  const char c = 'R';
  ssize_t n = 0;
  do {
    n = ::write(ready_fd_, &c, 1);
  } while (n < 0 && errno == EINTR);
  ::close(ready_fd_);
  ready_fd_ = -1;
}

}  // namespace pgsluice
