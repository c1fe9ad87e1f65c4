// The admin console as one object for main.cc to wire into the core: what the console commands
// change in the running pooler (control.h: paused, suspended, disabled databases, the commands
// that answer later), the console sessions it opens, and the /metrics endpoint. One per process,
// on the primary worker.
#pragma once

#include <memory>
#include <string>

#include "pooler/admin/control.h"
#include "pooler/admin/pause_signals.h"

namespace pgsluice {

class Client;
class ConsoleSession;
class MetricsServer;
class Pool;
class Shutdown;
class Worker;

class Console {
 public:
  Console(Worker& primary, Shutdown& shutdown);
  Console(const Console&) = delete;
  Console& operator=(const Console&) = delete;
  ~Console();

  AdminControl& control() { return control_; }
  // SHUTDOWN and its modes take the same path as the signals (shutdown.h).
  Shutdown& shutdown() { return shutdown_; }
  // A console login: checks admin_users / stats_users and greets, or fails the client (null).
  std::unique_ptr<ConsoleSession> open(Worker& worker, Client& client);
  // DISABLE db refuses new connections; false once the client is failed.
  bool admit(Client& client) { return control_.admit(client); }
  [[nodiscard]] bool db_disabled(const std::string& db) const { return control_.db_disabled(db); }
  void on_new_pool(Pool& pool) { control_.on_new_pool(pool); }
  // PAUSE / WAIT_CLOSE replies, stats_period, SHUTDOWN WAIT_FOR_CLIENTS (from the janitor).
  void tick() { control_.tick(); }
  [[nodiscard]] bool tick_due(uint64_t now_us) const { return control_.tick_due(now_us); }
  // SIGUSR1 / SIGUSR2: PAUSE and RESUME of every database (pause_signals.h).
  void start_signals(uv_loop_t* loop) { pause_signals_.start(loop); }
  void stop_signals() { pause_signals_.close(); }
  // The /metrics endpoint (metrics_port); false when it cannot listen.
  bool start_metrics(Worker& primary);
  void stop_metrics();

 private:
  Shutdown& shutdown_;
  AdminControl control_;
  PauseSignals pause_signals_;
  std::unique_ptr<MetricsServer> metrics_;
};

}  // namespace pgsluice
