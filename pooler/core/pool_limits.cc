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

uint64_t staggered_lifetime_ms(uint64_t lifetime_ms, uint32_t random) {
  // quarter * random / 2^32, in two halves so that the product cannot overflow 64 bits for any
  // lifetime below 2^48 ms (the high half) while the low half keeps the precision.
  const uint64_t quarter = lifetime_ms / 4;
  const uint64_t extra =
      (quarter >> 16) * random / (uint64_t{1} << 16) + ((quarter & 0xffff) * random >> 32);
  return lifetime_ms + extra;
}

}  // namespace pgsluice
