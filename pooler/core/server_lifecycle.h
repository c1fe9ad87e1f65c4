// What a server's age and health checks need (server_lifetime, server_idle_timeout,
// server_check_query/server_check_delay): kept on each Server, read by its pool and the janitor.
// The arithmetic is in pool_limits.h.
#pragma once

#include <cstdint>

namespace pgsluice {

struct ServerLifecycle {
  uint64_t born_ms = 0;        // loop time the login completed
  uint32_t stagger = 0;        // random draw for staggered_lifetime_ms()
  uint64_t idle_since_ms = 0;  // loop time it last became idle
  bool fresh = true;           // logged in or checked, not linked since: no check needed
  bool checking = false;       // server_check_query runs (the server is in `resetting`)
  // server_role_check_interval: when the server last told its role (a reply of a server that
  // reports in_hot_standby, or the role check's answer), and whether the check runs now.
  uint64_t role_known_ms = 0;
  bool role_checking = false;  // with `checking` set too: it counts among the checks in flight
};

}  // namespace pgsluice
