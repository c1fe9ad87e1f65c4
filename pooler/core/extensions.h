// What the core asks of the layers built on it. The admin console (admin/) and the operations
// (ops/: signals and shutdown, client limits and timeouts, pool maintenance) need the core's
// clients, servers and pools; the core needs a few of their decisions at a few points. Those
// points are this interface: main.cc wires one implementation into the WorkerGroup, so that the
// core includes none of those folders and can run (and be tested) without them.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

namespace pgsluice {

class Client;
class Pool;
class Worker;

inline constexpr const char* kShutdownMessage = "pgsluice is shutting down";
// The close line's reason for those clients: PgBouncer's words, which its log readers grep.
inline constexpr const char* kShutdownLogReason = "server shutting down";

// One console connection's protocol (admin/session.h); the client hands it what it receives.
class ConsoleSession {
 public:
  virtual ~ConsoleSession() = default;
  virtual void on_input() = 0;
};

class Extensions {
 public:
  virtual ~Extensions() = default;

  // The primary worker is about to listen (signal handlers go first: whoever sees the port open
  // may signal at once) and has listened (the metrics endpoint); false: pgsluice does not start.
  virtual void before_listen(Worker& primary) = 0;
  virtual bool after_listen(Worker& primary) = 0;
  // The primary stops: whatever before_listen/after_listen opened is closed.
  virtual void stop(Worker& primary) = 0;

  // A client of the console database has authenticated: the session that answers it, or null
  // once it has been failed (not in admin_users / stats_users).
  virtual std::unique_ptr<ConsoleSession> open_console(Worker& worker, Client& client) = 0;
  // A client whose user and database are known asks to log in: false once it has been failed
  // (max_db_client_connections, a DISABLEd database, …).
  virtual bool admit(Worker& worker, Client& client) = 0;
  // The database was DISABLEd from the console (an auth_dbname's lookups stop too).
  [[nodiscard]] virtual bool database_disabled(const std::string& db) const = 0;
  // A pool was created (a PAUSEd database's new pool starts paused).
  virtual void on_new_pool(Pool& pool) = 0;
  // Each worker's janitor tick, on its own thread and for its own clients and pools (pool
  // maintenance, client timeouts), after the core's own sweep: no other worker stops.
  virtual void on_worker_janitor(Worker& worker, uint64_t now_ms) = 0;
  // The primary's tick for what spans every worker: whether there is any now (a console command
  // waiting, the stats_period clock, a shutdown in progress), so that the world stops only then;
  // and doing it, on the primary with the world stopped.
  [[nodiscard]] virtual bool janitor_needs_world(uint64_t now_us) = 0;
  virtual void on_janitor(Worker& primary, uint64_t now_ms) = 0;
};

// The core on its own: nobody to ask, everything admitted (unit tests, tools).
class NoExtensions final : public Extensions {
 public:
  void before_listen(Worker&) override {}
  bool after_listen(Worker&) override { return true; }
  void stop(Worker&) override {}
  std::unique_ptr<ConsoleSession> open_console(Worker&, Client&) override { return nullptr; }
  bool admit(Worker&, Client&) override { return true; }
  [[nodiscard]] bool database_disabled(const std::string&) const override { return false; }
  void on_new_pool(Pool&) override {}
  void on_worker_janitor(Worker&, uint64_t) override {}
  [[nodiscard]] bool janitor_needs_world(uint64_t) override { return false; }
  void on_janitor(Worker&, uint64_t) override {}
};

}  // namespace pgsluice
