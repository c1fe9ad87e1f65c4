// Whether a log level is enabled, answered without a call into libspdlog.
//
// spdlog::should_log goes through the shared library (default_logger_raw, the registry
// singleton) on every call: at 20 clients, with set_state and link checking for debug lines on
// every transaction, that was ~1.6 % of the pooler's CPU (perf, pgbench -S). The level is set
// in two places (start-up, reload), both through set_log_level, which keeps this copy.
#pragma once

#include <spdlog/spdlog.h>

#include <algorithm>
#include <atomic>
#include <optional>
#include <string>

namespace pgsluice {

inline std::atomic<int> g_log_level{spdlog::level::info};
// The command line's -v count: what `verbose` stands for until the file or SET gives it.
inline std::atomic<int> g_command_line_verbosity{0};

// The level verbose_level and verbose (PgBouncer's count of -v) make together: each count one
// level more (info, debug, trace).
inline spdlog::level::level_enum configured_log_level(const std::string& verbose_level,
                                                      std::optional<int> verbose) {
  const int more = verbose ? *verbose : g_command_line_verbosity.load(std::memory_order_relaxed);
  const int level = spdlog::level::from_str(verbose_level) - std::min(more, 10);
  return static_cast<spdlog::level::level_enum>(
      std::clamp(level, 0, static_cast<int>(spdlog::level::off)));
}

// Sets the default logger's level and the copy log_enabled reads.
inline void set_log_level(spdlog::level::level_enum level) {
  spdlog::set_level(level);
  g_log_level.store(level, std::memory_order_relaxed);
}

inline bool log_enabled(spdlog::level::level_enum level) {
  return level >= g_log_level.load(std::memory_order_relaxed);
}

}  // namespace pgsluice
