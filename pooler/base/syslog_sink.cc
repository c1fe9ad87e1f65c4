// The syslog sink; see syslog_sink.h.
#include "pooler/base/syslog_sink.h"

#include <syslog.h>

#include "pooler/base/syslog_facility.h"

namespace pgsluice {

namespace {

// PgBouncer's priorities: FATAL is LOG_CRIT, its LOG lines LOG_INFO.
int priority(spdlog::level::level_enum level) {
  switch (level) {
    case spdlog::level::critical:
      return LOG_CRIT;
    case spdlog::level::err:
      return LOG_ERR;
    case spdlog::level::warn:
      return LOG_WARNING;
    case spdlog::level::info:
      return LOG_INFO;
    case spdlog::level::debug:
    case spdlog::level::trace:
    case spdlog::level::off:
    case spdlog::level::n_levels:
      return LOG_DEBUG;
  }
  return LOG_DEBUG;
}

}  // namespace

SyslogSink::SyslogSink() {
  set_level(spdlog::level::info);
}

SyslogSink::~SyslogSink() {
  if (open_) closelog();
}

void SyslogSink::configure(bool enabled, const std::string& ident, std::string_view facility) {
  std::lock_guard<std::mutex> lock(mutex_);
  const int code = syslog_facility_code(facility);
  const int next = code < 0 ? LOG_DAEMON : code;
  if (enabled == enabled_ && ident == ident_ && next == facility_) return;
  // Opened again, lazily, with the new ident and facility.
  if (open_) closelog();
  open_ = false;
  enabled_ = enabled;
  ident_ = ident;
  facility_ = next;
}

void SyslogSink::sink_it_(const spdlog::details::log_msg& msg) {
  if (!enabled_) return;
  if (!open_) {
    openlog(ident_.c_str(), LOG_PID, facility_);
    open_ = true;
  }
  // The message alone: syslog stamps the time, the ident and the PID itself.
  syslog(priority(msg.level), "%.*s", static_cast<int>(msg.payload.size()), msg.payload.data());
}

std::shared_ptr<SyslogSink> process_syslog_sink() {
  static const std::shared_ptr<SyslogSink> sink = std::make_shared<SyslogSink>();
  return sink;
}

}  // namespace pgsluice
