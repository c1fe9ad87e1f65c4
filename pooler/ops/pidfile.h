// pidfile (PgBouncer's key): written with the process id at start, removed at exit. A start
// while another live process holds the file is refused; a stale file (its process gone) is
// replaced.
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>
#include <string_view>

namespace pgsluice {

// The process id a pidfile names: decimal digits, an optional newline (pure: unit-tested).
std::optional<pid_t> parse_pid(std::string_view text);

class PidFile {
 public:
  PidFile() = default;
  PidFile(const PidFile&) = delete;
  PidFile& operator=(const PidFile&) = delete;
  ~PidFile() { remove(); }

  // Before starting (and before daemonizing): false, with the reason, when a live process
  // holds `path`; a stale file is removed.
  static bool check(const std::string& path, std::string& error);
  // Creates the file with this process's id (exclusively: a concurrent start loses).
  bool write(const std::string& path, std::string& error);
  // Removes the file if it still names this process.
  void remove();

 private:
  std::string path_;
  pid_t pid_ = 0;
};

}  // namespace pgsluice
