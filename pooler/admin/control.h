// What the admin console changes in a running worker: paused, suspended, disabled and killed
// databases; the console commands that answer only later (PAUSE and SUSPEND wait for busy
// servers, WAIT_CLOSE for servers to close, SHUTDOWN WAIT_FOR_CLIENTS for clients to leave);
// and the stats_period clock (PgBouncer's averages). The worker's janitor ticks it.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "pooler/core/stats.h"

namespace pgsluice {

class AdminSession;
class Client;
class Pool;
class Shutdown;
class Worker;

class AdminControl {
 public:
  enum class Mode { active, paused, suspended };

  AdminControl(Worker& primary, Shutdown& shutdown);

  // New connections to a DISABLEd database are refused (the client is failed, false returned).
  bool admit(Client& client);
  // A pool created while its database is paused starts paused.
  void on_new_pool(Pool& pool);

  // Each returns an error message, empty on success. `db` empty: every database.
  std::string pause(const std::string& db);
  std::string resume(const std::string& db);
  std::string suspend();
  std::string disable(const std::string& db);
  std::string enable(const std::string& db);
  std::string reconnect(const std::string& db);
  std::string kill(const std::string& db);
  std::string kill_client(uint64_t id);
  void shutdown_when_clients_gone();

  // A console command that answers when its condition holds (checked at every tick).
  enum class WaitKind { pause, wait_close };
  void wait(AdminSession& session, WaitKind kind, std::string db, std::string tag);
  void forget(AdminSession& session);
  // Whether the condition already holds (the command answers at once).
  [[nodiscard]] bool settled(WaitKind kind, const std::string& db);
  // Checks the waits and answers those that are done (from the janitor).
  void check_waits();

  // Console connections open (any worker's, admin or stats): SUSPEND ends by itself once the
  // last one has gone, as in PgBouncer, so that a restart script that died cannot leave the
  // pooler suspended for good.
  // A console login: one more open, and one more login in the console's SHOW STATS row.
  void console_opened() {
    consoles_.fetch_add(1, std::memory_order_relaxed);
    console_logins_.fetch_add(1, std::memory_order_relaxed);
  }
  void console_closed() { consoles_.fetch_sub(1, std::memory_order_relaxed); }

  // The janitor: waits, stats_period, SHUTDOWN WAIT_FOR_CLIENTS, the end of an abandoned SUSPEND.
  void tick();
  // Whether tick() has anything to do at `now_us` (read by the primary without stopping the
  // world: what it reads changes only with the world stopped).
  [[nodiscard]] bool tick_due(uint64_t now_us) const;

  [[nodiscard]] Mode mode() const { return mode_; }
  [[nodiscard]] bool db_paused(const std::string& db) const;
  [[nodiscard]] bool db_disabled(const std::string& db) const;
  [[nodiscard]] bool known_database(const std::string& db) const;
  // The stats_period clock: the stamp of the tick before the last one (PgBouncer's old_stamp).
  [[nodiscard]] uint64_t stats_old_stamp_us() const { return stats_old_stamp_us_; }
  // The console's own sessions (any worker's), counted as PgBouncer 1.25 counts its admin
  // database: a query and a transaction per session that sent a message, however many commands
  // it ran, in a SHOW STATS row of its own and in SHOW TOTALS.
  void count_console_session() { console_sessions_.fetch_add(1, std::memory_order_relaxed); }
  [[nodiscard]] PoolCounters console_totals() const;
  [[nodiscard]] const PoolCounters& console_older() const { return console_older_; }

 private:
  struct Waiter {
    AdminSession* session;
    WaitKind kind;
    std::string db;
    std::string tag;
  };
  void set_pool_paused(const std::string& db, bool paused);
  // KILL of one database: paused, its clients failed, its servers closed.
  void kill_database(const std::string& db);
  // Suspended, the suspension complete, and no console connection left to RESUME it.
  [[nodiscard]] bool suspend_abandoned() const;

  Worker& worker_;
  Shutdown& shutdown_;
  Mode mode_ = Mode::active;
  std::map<std::string, bool> paused_dbs_;  // PAUSE db / KILL db (true: servers close)
  std::set<std::string> disabled_dbs_;
  std::vector<Waiter> waiters_;
  std::atomic<int> consoles_{0};
  uint64_t stats_old_stamp_us_;
  uint64_t stats_new_stamp_us_;
  std::atomic<uint64_t> console_sessions_{0};
  std::atomic<uint64_t> console_logins_{0};
  PoolCounters console_newer_;  // console_totals() at the last two stats_period ticks
  PoolCounters console_older_;
};

}  // namespace pgsluice
