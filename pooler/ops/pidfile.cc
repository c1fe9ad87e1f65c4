// See pidfile.h.
#include "pooler/ops/pidfile.h"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstring>
#include <fstream>
#include <sstream>

namespace pgsluice {

namespace {
std::optional<std::string> read_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) return std::nullopt;
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

bool alive(pid_t pid) {
  // EPERM: the process exists but belongs to someone else - still a live holder.
  return ::kill(pid, 0) == 0 || errno == EPERM;
}
}  // namespace

std::optional<pid_t> parse_pid(std::string_view text) {
  while (!text.empty() && (text.back() == '\n' || text.back() == '\r' || text.back() == ' ')) {
    text.remove_suffix(1);
  }
  pid_t pid = 0;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), pid);
  if (text.empty() || ec != std::errc{} || ptr != text.data() + text.size() || pid <= 0) {
    return std::nullopt;
  }
  return pid;
}

bool PidFile::check(const std::string& path, std::string& error) {
  std::optional<std::string> text = read_file(path);
  if (!text) return true;  // no file (or unreadable: write() reports that)
  std::optional<pid_t> pid = parse_pid(*text);
  if (pid && *pid != ::getpid() && alive(*pid)) {
    error = "pidfile " + path + " names process " + std::to_string(*pid) +
            ", which is running: is pgsluice already running?";
    return false;
  }
  // Stale (its process is gone) or garbage: a crashed run's leftover.
  if (::unlink(path.c_str()) != 0 && errno != ENOENT) {
    error = "cannot remove stale pidfile " + path + ": " + std::strerror(errno);
    return false;
  }
  return true;
}

bool PidFile::write(const std::string& path, std::string& error) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) {
    error = "cannot create pidfile " + path + ": " + std::strerror(errno);
    return false;
  }
  const pid_t pid = ::getpid();
  const std::string text = std::to_string(pid) + "\n";
  const bool ok = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  const int err = errno;
  ::close(fd);
  if (!ok) {
    ::unlink(path.c_str());
    error = "cannot write pidfile " + path + ": " + std::strerror(err);
    return false;
  }
  path_ = path;
  pid_ = pid;
  return true;
}

void PidFile::remove() {
  if (path_.empty()) return;
  std::optional<std::string> text = read_file(path_);
  // Only our own file: a newer process may have replaced a file we thought was ours.
  if (text && parse_pid(*text) == pid_) ::unlink(path_.c_str());
  path_.clear();
}

}  // namespace pgsluice
