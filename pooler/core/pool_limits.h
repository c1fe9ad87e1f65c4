// The arithmetic of pool limits and server ages, kept free of sockets and loops so that it is
// unit-tested on its own (tests/unit/pooler/pool_limits_test.cc). Pool and the janitor feed it
// counts and clocks; it answers whether one more server may be started, how many servers
// min_pool_size still wants, and when a server is old or idle enough to go.
#pragma once

#include <cstdint>
#include <string_view>

namespace pgsluice {

// What a pool knows when it wants one more server. Server counts include the servers still
// logging in; db_servers and user_servers also count servers that are closing but whose socket
// is not closed yet (PostgreSQL still counts their backend).
struct LaunchInput {
  int pool_size = 0;
  int reserve_pool = 0;          // extra servers allowed once a client waited reserve_pool_timeout
  bool reserve_due = false;      // the oldest waiting client waited at least reserve_pool_timeout
  int pool_servers = 0;          // this pool's servers
  int max_db_connections = 0;    // 0: unlimited
  int db_servers = 0;            // servers of every pool of the database
  int max_user_connections = 0;  // 0: unlimited
  int user_servers = 0;          // servers of every pool of the server user
};

enum class LaunchVerdict {
  allowed,          // within pool_size
  allowed_reserve,  // beyond pool_size, from the reserve pool
  pool_full,
  db_full,   // max_db_connections reached
  user_full  // max_user_connections reached
};

std::string_view to_string(LaunchVerdict verdict);

// PgBouncer's order: the pool's own size (and reserve) first, then the database's, then the
// user's limit.
LaunchVerdict launch_verdict(const LaunchInput& in);

[[nodiscard]] inline bool launch_allowed(LaunchVerdict v) {
  return v == LaunchVerdict::allowed || v == LaunchVerdict::allowed_reserve;
}

// How many servers min_pool_size still wants: min_pool_size capped at pool_size, less the
// servers there are; 0 when not enforced. As in PgBouncer, it is enforced only for a pool with a
// forced user (the [databases] line names one) or with at least one client.
int min_pool_deficit(int min_pool_size, int pool_size, int pool_servers, bool enforced);

// server_lifetime, staggered: a server lives lifetime_ms plus up to a quarter more, drawn from
// `random` (any 32-bit value). Servers opened together then do not all reconnect in the same
// janitor tick; none is closed before server_lifetime, which is what PgBouncer promises.
// Inline: every release asks (Pool::on_server_idle).
inline uint64_t staggered_lifetime_ms(uint64_t lifetime_ms, uint32_t random) {
  // quarter * random / 2^32, in two halves so that the product cannot overflow 64 bits for any
  // lifetime below 2^48 ms (the high half) while the low half keeps the precision.
  const uint64_t quarter = lifetime_ms / 4;
  const uint64_t extra =
      (quarter >> 16) * random / (uint64_t{1} << 16) + ((quarter & 0xffff) * random >> 32);
  return lifetime_ms + extra;
}

// A released or idle server past its (staggered) lifetime goes; 0 means "used only once", as in
// PgBouncer: every released server is past it.
[[nodiscard]] inline bool past_lifetime(uint64_t born_ms, uint64_t staggered_ms, uint64_t now_ms) {
  return now_ms >= born_ms && now_ms - born_ms > staggered_ms;
}

// server_idle_timeout: an idle server unused for longer goes, unless the pool would fall below
// min_pool_size. 0 disables.
[[nodiscard]] inline bool past_idle_timeout(uint64_t idle_since_ms, uint64_t timeout_ms,
                                            uint64_t now_ms) {
  return timeout_ms > 0 && now_ms >= idle_since_ms && now_ms - idle_since_ms > timeout_ms;
}

// server_check_query runs on a server before it is handed out when the query is set and the
// server was idle for longer than server_check_delay (always with a delay of 0); a server that
// passed its check, or just logged in, is not checked again before its next client.
[[nodiscard]] inline bool check_due(bool have_query, bool fresh, uint64_t idle_since_ms,
                                    uint64_t delay_ms, uint64_t now_ms) {
  if (!have_query || fresh) return false;
  return delay_ms == 0 || (now_ms >= idle_since_ms && now_ms - idle_since_ms > delay_ms);
}

}  // namespace pgsluice
