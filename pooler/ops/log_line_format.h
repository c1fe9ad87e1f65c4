// The log line "2026-12-05 10:08:50.126 19518 info <message>", written by hand instead of by
// spdlog's pattern_formatter for the pattern "%Y-%m-%d %H:%M:%S.%e %P %l %v" (the same bytes,
// tested against it).
//
// Why: every log line went through the general pattern engine (a formatter object per field)
// and, for %P, a getpid(2) system call per line. A login writes two or three lines
// (log_connections, log_disconnections): about 3,000 instructions each, a tenth of a whole md5
// login's instructions (callgrind, docs/profile.md 0g). Here the date and time are rebuilt once
// a second, the pid once per process (again in a forked child).
#pragma once

#include <spdlog/formatter.h>

#include <cstdint>
#include <memory>

namespace pgsluice {

class LogLineFormatter final : public spdlog::formatter {
 public:
  void format(const spdlog::details::log_msg& msg, spdlog::memory_buf_t& dest) override;
  std::unique_ptr<spdlog::formatter> clone() const override;

 private:
  int64_t cached_second_ = -1;  // since the epoch; -1: nothing cached
  char date_time_[20] = {};     // "YYYY-MM-DD HH:MM:SS" of cached_second_, local time
  int cached_pid_ = 0;
  int pid_length_ = 0;
  char pid_text_[16] = {};  // cached_pid_ in decimal
};

}  // namespace pgsluice
