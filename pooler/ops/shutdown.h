// How pgsluice stops, PgBouncer (>= 1.23) style. One code path for the signals and the admin
// console's SHUTDOWN:
//   SIGTERM, SHUTDOWN WAIT_FOR_CLIENTS  close the TCP ports; exit when the last client has left
//                                       (rolling restarts behind so_reuseport); no bound.
//   SIGINT, SHUTDOWN WAIT_FOR_SERVERS   close the TCP ports; no server is handed out any more:
//                                       a client is closed when it starts a new transaction (or
//                                       is queued for a server), one holding a server (inside a
//                                       transaction; in session mode, its session) is served
//                                       until it releases it; exit when no client holds one, or
//                                       after shutdown_timeout (pgsluice's key; PgBouncer has
//                                       no bound) - then the remaining servers are closed and
//                                       PostgreSQL rolls their transactions back.
//   SIGQUIT, SHUTDOWN, any second signal  exit now.
// In both waiting modes the Unix socket stays open until the exit, for the admin console only
// (as in PgBouncer): other logins on it are refused with 57P03. A server is never returned to
// the pool or left open inside a transaction: it is released at a transaction boundary, or
// closed.
#pragma once

#include <uv.h>

#include <array>
#include <cstdint>

#include "pooler/core/signal_handlers.h"

namespace pgsluice {

class Client;
class Worker;

class Shutdown {
 public:
  enum class Mode { none, wait_for_clients, wait_for_servers, immediate };

  explicit Shutdown(Worker& worker) : worker_(worker) {}
  Shutdown(const Shutdown&) = delete;
  Shutdown& operator=(const Shutdown&) = delete;

  // SIGINT, SIGTERM and SIGQUIT handlers on the worker's loop; closed by close_signals().
  void start_signals(uv_loop_t* loop);
  void close_signals();

  void wait_for_clients();
  void wait_for_servers();
  void immediate();
  // What a signal asks for, given the shutdown already in progress (pure: unit-tested).
  static Mode mode_for_signal(int signum, Mode current);

  // From the janitor: closes clients whose transaction ended, exits when done or past due.
  void tick(uint64_t now_ms);

  // A login during a shutdown: refused unless it is for the console (the client is failed,
  // false returned).
  bool admit(Client& client) const;

  [[nodiscard]] Mode mode() const { return mode_; }

 private:
  static void on_signal(uv_signal_t* handle, int signum);
  // Closes the clients queued for a server (and replication streams); returns how many clients
  // still hold a server.
  size_t close_queued_clients();
  size_t clients_holding_servers();
  size_t remaining_clients();

  Worker& worker_;
  Mode mode_ = Mode::none;
  uint64_t deadline_ms_ = 0;  // 0: none
  SignalHandlers<3> signals_;
};

}  // namespace pgsluice
