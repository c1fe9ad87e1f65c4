// PgBouncer's syslog_facility names and their syslog(3) codes (config checks the name, the syslog
// sink uses the code).
#pragma once

#include <syslog.h>

#include <array>
#include <string_view>

namespace pgsluice {

// The LOG_* code of one of PgBouncer's facility names (auth, authpriv, daemon, user, local0 to
// local7), or -1.
inline int syslog_facility_code(std::string_view name) {
  struct Facility {
    std::string_view name;
    int code;
  };
  static constexpr std::array<Facility, 12> kFacilities = {{
      {"auth", LOG_AUTH},
      {"authpriv", LOG_AUTHPRIV},
      {"daemon", LOG_DAEMON},
      {"user", LOG_USER},
      {"local0", LOG_LOCAL0},
      {"local1", LOG_LOCAL1},
      {"local2", LOG_LOCAL2},
      {"local3", LOG_LOCAL3},
      {"local4", LOG_LOCAL4},
      {"local5", LOG_LOCAL5},
      {"local6", LOG_LOCAL6},
      {"local7", LOG_LOCAL7},
  }};
  for (const Facility& f : kFacilities) {
    if (f.name == name) return f.code;
  }
  return -1;
}

}  // namespace pgsluice
