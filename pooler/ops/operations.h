// The operations side of the pooler as one object for main.cc to wire into the core: the
// signals and the shutdown they start (shutdown.h), the client limits a login is checked against
// (client_limits.h), and the janitor's maintenance of pools and client timeouts
// (pool_maintenance.h, client_timeouts.h). One per process, on the primary worker.
#pragma once

#include <cstdint>

#include "pooler/ops/shutdown.h"

namespace pgsluice {

class Client;
class Worker;

class Operations {
 public:
  explicit Operations(Worker& primary) : shutdown_(primary) {}
  Operations(const Operations&) = delete;
  Operations& operator=(const Operations&) = delete;

  Shutdown& shutdown() { return shutdown_; }
  void start_signals(Worker& primary);
  void stop_signals() { shutdown_.close_signals(); }
  // A shutdown's refusal (Shutdown::admit), max_db_client_connections /
  // max_user_client_connections; false once the client is failed.
  bool admit(Worker& worker, Client& client);
  // Each worker's tick, for its own pools and clients: pool sizes, lifetimes and checks, then
  // client timeouts.
  void maintain(Worker& worker, uint64_t now_ms);
  // The primary's, with the world stopped: the shutdown's progress (it may stop the worker).
  void progress(Worker& primary, uint64_t now_ms);
  [[nodiscard]] bool shutting_down() const { return shutdown_.mode() != Shutdown::Mode::none; }

 private:
  Shutdown shutdown_;
};

}  // namespace pgsluice
