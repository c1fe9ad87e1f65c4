// spdlog set-up: one logger, one line per event, millisecond timestamps; to syslog too when set.
#include "pooler/ops/logging.h"

#include <spdlog/sinks/basic_file_sink.h>
#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

#include <memory>
#include <vector>

#include "pooler/base/log_level.h"
#include "pooler/base/syslog_sink.h"
#include "pooler/ops/log_line_format.h"

namespace pgsluice {

bool init_logging(const Settings& settings, const LogTargets& targets, std::string& error) {
  std::vector<spdlog::sink_ptr> sinks;
  try {
    if (!settings.logfile.empty()) {
      sinks.push_back(std::make_shared<spdlog::sinks::basic_file_sink_mt>(settings.logfile));
    }
  } catch (const spdlog::spdlog_ex& e) {
    error = e.what();
    return false;
  }
  // Whoever started pgsluice in the foreground sees its log, startup errors included, even
  // when it also goes to a file.
  if (!targets.quiet && !targets.daemon) {
    sinks.push_back(std::make_shared<spdlog::sinks::stderr_sink_mt>());
  }
  // Always there, off unless `syslog` is set: RELOAD and SET may turn it on (syslog_sink.h).
  process_syslog_sink()->configure(settings.syslog, settings.syslog_ident,
                                   settings.syslog_facility);
  sinks.push_back(process_syslog_sink());
  auto logger = std::make_shared<spdlog::logger>("pgsluice", sinks.begin(), sinks.end());
  g_command_line_verbosity.store(targets.verbosity, std::memory_order_relaxed);
  // "%Y-%m-%d %H:%M:%S.%e %P %l %v", without the pattern engine's cost per line.
  logger->set_formatter(std::make_unique<LogLineFormatter>());
  logger->flush_on(spdlog::level::trace);
  spdlog::set_default_logger(logger);
  set_log_level(configured_log_level(settings.verbose_level, settings.verbose));
  return true;
}

}  // namespace pgsluice
