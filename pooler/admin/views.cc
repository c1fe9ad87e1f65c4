// Gathering pool and stats rows for the console and /metrics; see admin_views.h.
#include "pooler/admin/views.h"

#include <algorithm>
#include <chrono>
#include <ctime>
#include <map>
#include <string_view>
#include <unordered_map>

#include "pooler/admin/control.h"
#include "pooler/core/client.h"
#include "pooler/core/pool.h"
#include "pooler/core/server.h"
#include "pooler/core/worker.h"

namespace pgsluice {

std::vector<PoolRow> collect_pool_rows(Worker& worker) {
  std::vector<PoolRow> rows;
  std::unordered_map<Pool*, size_t> index;
  std::map<std::pair<std::string, std::string>, size_t> by_key;
  const uint64_t now_ms = worker.now_ms();
  worker.for_each_pool([&](Pool& p) {
    auto [at, created] = by_key.try_emplace({p.database().name, p.credentials().user}, rows.size());
    if (created) {
      PoolRow fresh;
      fresh.pool = &p;
      fresh.database = p.database().name;
      fresh.user = p.credentials().user;
      fresh.mode = p.mode();
      fresh.pool_size = p.pool_size();
      fresh.paused = p.paused();
      fresh.hosts = p.hosts().size();
      fresh.usable_hosts = fresh.hosts;
      fresh.target_session_attrs = p.database().target_session_attrs;
      rows.push_back(std::move(fresh));
    }
    PoolRow& r = rows[at->second];
    r.shares.push_back(&p);
    // A host one share skips is skipped for that share's clients: the fewest usable counts.
    r.usable_hosts = std::min<uint64_t>(r.usable_hosts, p.hosts().usable_count(now_ms));
    p.for_each_server([&r](Server& s) {
      const char* role = server_role_name(s);
      if (std::string_view(role) == "primary") ++r.sv_primary;
      if (std::string_view(role) == "standby") ++r.sv_standby;
      ++r.servers_by_host[{s.address().to_string(), role}];
      switch (s.state()) {
        case Server::State::connecting:
        case Server::State::login:
          ++r.sv_login;
          break;
        case Server::State::idle:
          ++r.sv_idle;
          break;
        case Server::State::active:
        case Server::State::draining:     // still busy with its gone client's replies
        case Server::State::replicating:  // as PgBouncer counts them
          ++r.sv_active;
          break;
        case Server::State::being_canceled:
          ++r.sv_being_canceled;
          break;
        case Server::State::resetting:
          ++r.sv_used;
          break;
        case Server::State::closing:
        case Server::State::moving:     // on no list: never walked
        case Server::State::listening:  // not among for_each_server's
          break;
      }
      if (s.pinned()) ++r.sv_pinned;
      if (s.dirty()) ++r.sv_dirty;
    });
    const uint64_t oldest = p.oldest_wait_start_us();
    const uint64_t now = now_us();
    r.maxwait_us = std::max(r.maxwait_us, oldest != 0 && now > oldest ? now - oldest : 0);
    index.emplace(&p, at->second);
  });
  worker.for_each_client([&](Client& c) {
    if (c.pool() == nullptr) return;
    auto it = index.find(c.pool());
    if (it == index.end()) return;
    PoolRow& r = rows[it->second];
    switch (c.state()) {
      case Client::State::idle:
      case Client::State::active:
        ++r.cl_active;
        break;
      case Client::State::waiting:
      case Client::State::welcome_wait:
        ++r.cl_waiting;
        break;
      case Client::State::startup:
      case Client::State::auth:
      case Client::State::closing:
        break;
    }
  });
  return rows;
}

std::vector<ConsoleDatabase> collect_console_databases(Worker& worker) {
  std::map<std::string, uint64_t> sessions;
  worker.for_each_client([&](Client& c) {
    if (!c.is_admin_console()) return;
    // Logged in (an AdminSession was opened): idle between commands. PgBouncer's admin clients
    // still authenticating are login_clients, not the pool's.
    if (c.state() == Client::State::idle || c.state() == Client::State::active) {
      ++sessions[c.database()];
    }
  });
  std::vector<ConsoleDatabase> out;
  for (const char* name : kAdminDatabaseNames) {
    auto it = sessions.find(name);
    const uint64_t n = it != sessions.end() ? it->second : 0;
    if (n == 0 && std::string_view(name) != "pgbouncer") continue;
    out.push_back(ConsoleDatabase{name, n});
  }
  std::sort(out.begin(), out.end(),
            [](const ConsoleDatabase& a, const ConsoleDatabase& b) { return a.name < b.name; });
  return out;
}

std::vector<PoolRow> console_pool_rows(const std::vector<ConsoleDatabase>& consoles) {
  std::vector<PoolRow> rows;
  for (const ConsoleDatabase& c : consoles) {
    PoolRow r;
    r.database = c.name;
    r.user = c.name;
    r.cl_active = c.sessions;
    r.mode = kConsolePoolMode;
    r.pool_size = kConsolePoolSize;
    rows.push_back(std::move(r));
  }
  return rows;
}

const char* server_role_name(const Server& server) {
  const std::optional<ServerRole> role = server.role();
  if (!role) return "unknown";
  return role->hot_standby ? "standby" : "primary";
}

std::vector<DatabaseStats> collect_database_stats(Worker& worker) {
  std::map<std::string, DatabaseStats> by_db;
  worker.for_each_pool([&](Pool& p) {
    DatabaseStats& d = by_db[p.database().name];
    d.database = p.database().name;
    d.totals += p.stats().totals;
    d.older += p.stats().older;
  });
  std::vector<DatabaseStats> out;
  out.reserve(by_db.size());
  for (auto& [name, d] : by_db) out.push_back(std::move(d));
  return out;
}

std::string format_loop_time(Worker& worker, uint64_t loop_ms) {
  if (loop_ms == 0) return {};
  const uint64_t now_ms = worker.now_ms();
  const auto age = std::chrono::milliseconds(now_ms > loop_ms ? now_ms - loop_ms : 0);
  const std::time_t t =
      std::chrono::system_clock::to_time_t(std::chrono::system_clock::now() - age);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[64];
  std::strftime(buf, sizeof(buf), "%Y-%m-%d %H:%M:%S UTC", &tm);
  return buf;
}

}  // namespace pgsluice
