// The numbers SHOW POOLS / SHOW STATS and /metrics share, gathered from every worker's pools,
// servers and clients in one pass each, so that the console and Prometheus never disagree.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "pooler/config/config.h"
#include "pooler/config/console_database.h"
#include "pooler/core/stats.h"

namespace pgsluice {

class Pool;
class Server;
class Worker;

// One row per (database, user): the shares of that pool on every worker, summed.
struct PoolRow {
  Pool* pool = nullptr;       // the first worker's share (settings are the same on every one)
  std::vector<Pool*> shares;  // every worker's share, `pool` first
  std::string database;
  std::string user;
  uint64_t cl_active = 0;   // logged in, linked or not (PgBouncer's active_client_list)
  uint64_t cl_waiting = 0;  // queued for a server (or for the pool's first login)
  uint64_t sv_active = 0;
  uint64_t sv_being_canceled = 0;  // released, held until its cancel requests are done
  uint64_t sv_idle = 0;
  uint64_t sv_used = 0;  // being cleaned before reuse
  uint64_t sv_login = 0;
  uint64_t sv_pinned = 0;  // pgsluice: servers pinned to their client (session-state checks)
  uint64_t sv_dirty = 0;   // pgsluice: servers with session state to clean at release
  uint64_t maxwait_us = 0;
  // pgsluice: servers by the role they told (target_session_attrs other than any, or a
  // server that reports in_hot_standby), and by host and role (/metrics).
  uint64_t sv_primary = 0;
  uint64_t sv_standby = 0;
  std::map<std::pair<std::string, std::string>, uint64_t> servers_by_host;  // (host, role)
  uint64_t hosts = 0;                                                       // the entry's hosts
  uint64_t usable_hosts = 0;  // not skipped now (a failed login, a wrong role), in every share
  TargetSessionAttrs target_session_attrs = TargetSessionAttrs::any;
  PoolMode mode = PoolMode::session;
  int pool_size = 0;
  bool paused = false;
};

std::vector<PoolRow> collect_pool_rows(Worker& worker);

// The console's databases as PgBouncer lists its admin database `pgbouncer` in SHOW DATABASES,
// POOLS and LISTS (monitoring tools count on that row: check_postgres' pgb_pool_* items, Munin
// subtracting its own session, the exporter's database="pgbouncer" series). `pgbouncer` is
// always there, as in PgBouncer; pgsluice's own name only while a session is connected to it,
// so that a tool that asks through `pgbouncer` reads exactly what PgBouncer would show.
struct ConsoleDatabase {
  std::string name;       // also its pool's user, as PgBouncer forces user pgbouncer on its own
  uint64_t sessions = 0;  // logged-in console sessions: the admin pool's active clients
};

std::vector<ConsoleDatabase> collect_console_databases(Worker& worker);

// PgBouncer's values for its admin database: pool_size 2 and statement mode (its admin_setup());
// the console never opens a server whatever they say.
inline constexpr int kConsolePoolSize = 2;
inline constexpr PoolMode kConsolePoolMode = PoolMode::statement;

// The console databases' SHOW POOLS rows (cl_active: their sessions), for SHOW POOLS to sort in
// among the pools by (database, user), as PgBouncer keeps its pool list.
std::vector<PoolRow> console_pool_rows(const std::vector<ConsoleDatabase>& consoles);

// A server's role as SHOW SERVERS and /metrics name it: primary, standby or unknown (a server
// older than 14 not yet asked).
const char* server_role_name(const Server& server);

// SHOW STATS is per database: the pools of each database summed.
struct DatabaseStats {
  std::string database;
  PoolCounters totals;
  PoolCounters older;  // the snapshot the averages start from
};

std::vector<DatabaseStats> collect_database_stats(Worker& worker);

// "2024-05-01 12:00:00 UTC" for a loop-clock millisecond stamp, as PgBouncer prints times.
std::string format_loop_time(Worker& worker, uint64_t loop_ms);

}  // namespace pgsluice
