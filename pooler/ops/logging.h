// Process-wide logging: spdlog to stderr or to the configured logfile, and to syslog.
#pragma once

#include <string>

#include "pooler/config/config.h"

namespace pgsluice {

// Where the log goes, as PgBouncer's: the logfile when set, and stderr too unless `quiet`
// (-q, "do not log to stderr") or `daemon` (stderr is /dev/null then). `verbosity`, the -v count,
// adds to the configured level (+1 debug, +2 trace) unless the file sets PgBouncer's `verbose`,
// which replaces it (base/log_level.h).
struct LogTargets {
  int verbosity = 0;
  bool quiet = false;
  bool daemon = false;
};
bool init_logging(const Settings& settings, const LogTargets& targets, std::string& error);

}  // namespace pgsluice
