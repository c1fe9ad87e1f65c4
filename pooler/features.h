// The pooler's features wired into its core: the operations (ops/) and the admin console
// (admin/) behind the one interface the core calls (core/extensions.h). Built by main.cc once
// the workers exist, since both act on the primary worker.
#pragma once

#include "pooler/admin/console.h"
#include "pooler/core/extensions.h"
#include "pooler/ops/operations.h"

namespace pgsluice {

class Features final : public Extensions {
 public:
  explicit Features(Worker& primary) : ops_(primary), console_(primary, ops_.shutdown()) {}

  void before_listen(Worker& primary) override {
    ops_.start_signals(primary);
    console_.start_signals(primary.loop());
  }
  bool after_listen(Worker& primary) override { return console_.start_metrics(primary); }
  void stop(Worker&) override {
    console_.stop_metrics();
    console_.stop_signals();
    ops_.stop_signals();
  }
  std::unique_ptr<ConsoleSession> open_console(Worker& worker, Client& client) override {
    return console_.open(worker, client);
  }
  bool admit(Worker& worker, Client& client) override {
    // The console is never DISABLEd; its sessions are counted against the client limits.
    return ops_.admit(worker, client) && (client.is_admin_console() || console_.admit(client));
  }
  [[nodiscard]] bool database_disabled(const std::string& db) const override {
    return console_.db_disabled(db);
  }
  void on_new_pool(Pool& pool) override { console_.on_new_pool(pool); }
  void on_worker_janitor(Worker& worker, uint64_t now_ms) override {
    ops_.maintain(worker, now_ms);
  }
  [[nodiscard]] bool janitor_needs_world(uint64_t now_us) override {
    return console_.tick_due(now_us) || ops_.shutting_down();
  }
  void on_janitor(Worker& primary, uint64_t now_ms) override {
    console_.tick();
    ops_.progress(primary, now_ms);  // last: it may stop the worker
  }

 private:
  Operations ops_;
  Console console_;
};

}  // namespace pgsluice
