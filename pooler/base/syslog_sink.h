// PgBouncer's syslog, syslog_ident and syslog_facility: a spdlog sink that sends each log line of
// level info and above to syslog(3), as PgBouncer's does (debug lines stay out of syslog, what
// verbose says). One sink for the process, always in the logger (ops/logging.cc) and off until
// configured: RELOAD and SET turn it on or off and change its ident and facility in place
// (core/worker_reload.cc), which a logger's sink list, not thread-safe to change, would not let.
#pragma once

#include <spdlog/sinks/base_sink.h>

#include <memory>
#include <mutex>
#include <string>
#include <string_view>

namespace pgsluice {

class SyslogSink final : public spdlog::sinks::base_sink<std::mutex> {
 public:
  SyslogSink();
  ~SyslogSink() override;
  // Lines from now on go to syslog under `ident` and `facility` (a name of syslog_facility.h),
  // or nowhere when not `enabled`.
  void configure(bool enabled, const std::string& ident, std::string_view facility);

 protected:
  void sink_it_(const spdlog::details::log_msg& msg) override;
  void flush_() override {}

 private:
  bool enabled_ = false;
  std::string ident_;  // openlog keeps the pointer: it lives here until closelog
  int facility_ = 0;
  bool open_ = false;
};

// The process's sink.
std::shared_ptr<SyslogSink> process_syslog_sink();

}  // namespace pgsluice
