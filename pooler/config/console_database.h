// The virtual databases of the admin console: a client that asks for one of these is answered by
// the console, never looked up in [databases] — pgsluice, and pgbouncer for existing tools.
#pragma once

#include <string_view>

namespace pgsluice {

inline constexpr const char* kAdminDatabaseNames[] = {"pgsluice", "pgbouncer"};

inline bool is_admin_database(std::string_view name) {
  for (const char* n : kAdminDatabaseNames) {
    if (name == n) return true;
  }
  return false;
}

}  // namespace pgsluice
