// spdlog set-up: one logger, one line per event, millisecond timestamps.
#include "pooler/ops/logging.h"

#include <spdlog/sinks/basic_file_sink.h>
#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

#include "pooler/base/log_level.h"

namespace pgsluice {

bool init_logging(const Settings& settings, int verbosity, std::string& error) {
  std::shared_ptr<spdlog::logger> logger;
  try {
    if (settings.logfile.empty()) {
      logger = spdlog::stderr_logger_mt("pgsluice");
    } else {
      logger = spdlog::basic_logger_mt("pgsluice", settings.logfile);
    }
  } catch (const spdlog::spdlog_ex& e) {
    error = e.what();
    return false;
  }
  int level = spdlog::level::from_str(settings.verbose_level);
  level = std::clamp(level - verbosity, 0, static_cast<int>(spdlog::level::off));
  logger->set_pattern("%Y-%m-%d %H:%M:%S.%e %P %l %v");
  logger->flush_on(spdlog::level::trace);
  spdlog::set_default_logger(logger);
  set_log_level(static_cast<spdlog::level::level_enum>(level));
  return true;
}

}  // namespace pgsluice
