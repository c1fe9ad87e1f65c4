// Pool limits and server ages; see pool_limits.h.
#include "pooler/core/pool_limits.h"

#include <algorithm>

namespace pgsluice {

std::string_view to_string(LaunchVerdict verdict) {
  switch (verdict) {
    case LaunchVerdict::allowed:
      return "allowed";
    case LaunchVerdict::allowed_reserve:
      return "allowed from the reserve pool";
    case LaunchVerdict::pool_full:
      return "pool full";
    case LaunchVerdict::db_full:
      return "max_db_connections reached";
    case LaunchVerdict::user_full:
      return "max_user_connections reached";
  }
  return "?";
}

LaunchVerdict launch_verdict(const LaunchInput& in) {
  LaunchVerdict verdict = LaunchVerdict::allowed;
  if (in.pool_servers >= in.pool_size) {
    if (!in.reserve_due || in.reserve_pool <= 0 ||
        in.pool_servers >= in.pool_size + in.reserve_pool) {
      return LaunchVerdict::pool_full;
    }
    verdict = LaunchVerdict::allowed_reserve;
  }
  if (in.max_db_connections > 0 && in.db_servers >= in.max_db_connections) {
    return LaunchVerdict::db_full;
  }
  if (in.max_user_connections > 0 && in.user_servers >= in.max_user_connections) {
    return LaunchVerdict::user_full;
  }
  return verdict;
}

int min_pool_deficit(int min_pool_size, int pool_size, int pool_servers, bool enforced) {
  if (!enforced) return 0;
  return std::max(0, std::min(min_pool_size, pool_size) - pool_servers);
}

}  // namespace pgsluice
