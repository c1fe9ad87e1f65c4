// Process-wide logging: spdlog to stderr or to the configured logfile.
#pragma once

#include <string>

#include "pooler/config/config.h"

namespace pgsluice {

// `verbosity` adds to the configured level: +1 debug, +2 trace; -1 warnings only.
bool init_logging(const Settings& settings, int verbosity, std::string& error);

}  // namespace pgsluice
