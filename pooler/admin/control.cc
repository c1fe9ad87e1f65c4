// Admin-driven worker state; see admin_control.h.
#include "pooler/admin/control.h"

#include <spdlog/spdlog.h>

#include <algorithm>

#include "pooler/admin/session.h"
#include "pooler/base/sqlstate.h"
#include "pooler/core/client.h"
#include "pooler/core/pool.h"
#include "pooler/core/stats.h"
#include "pooler/core/worker.h"
#include "pooler/ops/shutdown.h"

namespace pgsluice {

AdminControl::AdminControl(Worker& primary, Shutdown& shutdown)
    : worker_(primary), shutdown_(shutdown) {
  stats_new_stamp_us_ = now_us();
  // As PgBouncer: before the first tick, averages run over one second back.
  stats_old_stamp_us_ = stats_new_stamp_us_ - 1'000'000;
}

bool AdminControl::admit(Client& client) {
  if (!db_disabled(client.database())) return true;
  // PgBouncer's words (its users and its tests match them), PostgreSQL's SQLSTATE for a database
  // that does not take connections now.
  client.fail(sqlstate::kCannotConnectNow, "database \"" + client.database() + "\" is disabled");
  return false;
}

bool AdminControl::db_paused(const std::string& db) const {
  return mode_ != Mode::active || paused_dbs_.contains(db);
}

bool AdminControl::db_disabled(const std::string& db) const {
  return disabled_dbs_.contains(db);
}

bool AdminControl::known_database(const std::string& db) const {
  if (worker_.config().databases.contains(db)) return true;
  bool found = false;
  worker_.for_each_pool([&](Pool& p) { found |= p.database().name == db; });
  return found;
}

void AdminControl::on_new_pool(Pool& pool) {
  if (mode_ == Mode::suspended) {
    pool.set_paused(true, false);
  } else if (mode_ == Mode::paused) {
    pool.set_paused(true, true);
  } else if (auto it = paused_dbs_.find(pool.database().name); it != paused_dbs_.end()) {
    pool.set_paused(true, it->second);
  }
}

void AdminControl::set_pool_paused(const std::string& db, bool paused) {
  worker_.for_each_pool([&](Pool& p) {
    if (db.empty() || p.database().name == db) p.set_paused(paused, true);
  });
}

std::string AdminControl::pause(const std::string& db) {
  if (db.empty()) {
    if (mode_ != Mode::active) return "already suspended/paused";
    mode_ = Mode::paused;
  } else {
    if (!known_database(db)) return "no such database: " + db;
    if (mode_ != Mode::active || paused_dbs_.contains(db))
      return "database " + db + " is already paused";
    paused_dbs_[db] = true;
  }
  spdlog::info("PAUSE {}", db.empty() ? "(all databases)" : db);
  set_pool_paused(db, true);
  return {};
}

std::string AdminControl::resume(const std::string& db) {
  // As PgBouncer: a shutdown's pause (SHUTDOWN WAIT_FOR_SERVERS) is not undone, nor anything
  // else while the pooler stops.
  if (shutdown_.mode() != Shutdown::Mode::none) return "pooler is shutting down";
  if (db.empty()) {
    if (mode_ == Mode::active && paused_dbs_.empty()) return "pooler is not paused/suspended";
    mode_ = Mode::active;
    paused_dbs_.clear();
  } else {
    if (!paused_dbs_.contains(db)) return "database " + db + " is not paused";
    if (mode_ != Mode::active) return "pooler is paused/suspended: RESUME without a database";
    paused_dbs_.erase(db);
  }
  spdlog::info("RESUME {}", db.empty() ? "(all databases)" : db);
  set_pool_paused(db, false);
  return {};
}

std::string AdminControl::suspend() {
  if (mode_ != Mode::active) return "already suspended/paused";
  // SUSPEND is for a restart of the pooler: hand out no server, keep the servers (PgBouncer
  // hands them over to its successor). The listening sockets stay open, as in PgBouncer: a
  // client connecting now waits (for its login's first server, or for its query's) until
  // RESUME instead of being refused.
  mode_ = Mode::suspended;
  worker_.for_each_pool([](Pool& p) { p.set_paused(true, false); });
  spdlog::info("SUSPEND");
  return {};
}

std::string AdminControl::disable(const std::string& db) {
  if (!known_database(db)) return "no such database: " + db;
  disabled_dbs_.insert(db);
  spdlog::info("DISABLE {}", db);
  return {};
}

std::string AdminControl::enable(const std::string& db) {
  if (!known_database(db)) return "no such database: " + db;
  disabled_dbs_.erase(db);
  spdlog::info("ENABLE {}", db);
  return {};
}

std::string AdminControl::reconnect(const std::string& db) {
  if (!db.empty() && !known_database(db)) return "no such database: " + db;
  worker_.for_each_pool([&](Pool& p) {
    if (db.empty() || p.database().name == db) p.mark_close_needed();
  });
  spdlog::info("RECONNECT {}", db.empty() ? "(all databases)" : db);
  return {};
}

std::string AdminControl::kill(const std::string& db) {
  // As PgBouncer 1.25: not while the pooler is paused or suspended; without a database, every
  // database that has a pool.
  if (mode_ != Mode::active) return "already suspended/paused";
  std::set<std::string> victims;
  if (db.empty()) {
    worker_.for_each_pool([&](Pool& p) { victims.insert(p.database().name); });
  } else {
    if (!known_database(db)) return "no such database: " + db;
    victims.insert(db);
  }
  spdlog::info("KILL {}", db.empty() ? "(all databases)" : db);
  for (const std::string& name : victims) kill_database(name);
  return {};
}

void AdminControl::kill_database(const std::string& db) {
  // The database is paused too, so new clients wait for RESUME.
  paused_dbs_[db] = true;
  const std::string reason = "database " + db + " killed by the administrator (KILL)";
  // Paused first, so that no server released by a leaving client serves anyone again.
  worker_.for_each_pool([&](Pool& p) {
    if (p.database().name == db) p.set_paused(true, true);
  });
  worker_.for_each_client([&](Client& c) {
    if (!c.is_admin_console() && c.database() == db) c.fail(sqlstate::kAdminShutdown, reason);
  });
  worker_.for_each_pool([&](Pool& p) {
    if (p.database().name == db) p.kill(reason);
  });
}

std::string AdminControl::kill_client(uint64_t id) {
  Client* target = nullptr;
  worker_.for_each_client([&](Client& c) {
    if (c.id() == id && c.state() != Client::State::closing) target = &c;
  });
  if (target == nullptr) return "client not found: " + std::to_string(id);
  spdlog::info("KILL_CLIENT {} ({})", id, target->log_id());
  target->fail(sqlstate::kAdminShutdown, "client killed by the administrator (KILL_CLIENT)");
  return {};
}

void AdminControl::shutdown_when_clients_gone() {
  shutdown_.wait_for_clients();  // the same path as SIGTERM (shutdown.h)
}

void AdminControl::wait(AdminSession& session, WaitKind kind, std::string db, std::string tag) {
  waiters_.push_back({&session, kind, std::move(db), std::move(tag)});
}

void AdminControl::forget(AdminSession& session) {
  std::erase_if(waiters_, [&](const Waiter& w) { return w.session == &session; });
}

bool AdminControl::settled(WaitKind kind, const std::string& db) {
  size_t busy = 0;
  worker_.for_each_pool([&](Pool& p) {
    if (!db.empty() && p.database().name != db) return;
    busy += kind == WaitKind::pause ? p.busy_count() : p.close_needed_count();
  });
  return busy == 0;
}

void AdminControl::check_waits() {
  // A completion writes to its session, which may run the client's next command and add or
  // remove waiters: take the ready ones out first.
  std::vector<Waiter> ready;
  std::erase_if(waiters_, [&](const Waiter& w) {
    if (!settled(w.kind, w.db)) return false;
    ready.push_back(w);
    return true;
  });
  for (const Waiter& w : ready) w.session->complete(w.tag);
}

bool AdminControl::suspend_abandoned() const {
  return mode_ == Mode::suspended && consoles_.load(std::memory_order_relaxed) == 0;
}

bool AdminControl::tick_due(uint64_t now) const {
  const auto period_us = static_cast<uint64_t>(worker_.settings().stats_period.count()) * 1000;
  return !waiters_.empty() || (period_us > 0 && now >= stats_new_stamp_us_ + period_us) ||
         suspend_abandoned();
}

void AdminControl::tick() {
  if (!waiters_.empty()) check_waits();
  // PgBouncer looks once the suspension is complete (no server busy any more): the console
  // that asked for it answered, or went before.
  if (suspend_abandoned() && settled(WaitKind::pause, "")) {
    spdlog::info("admin disappeared when suspended, doing RESUME");
    resume("");
  }
  const uint64_t now = now_us();
  const auto period_us = static_cast<uint64_t>(worker_.settings().stats_period.count()) * 1000;
  if (period_us > 0 && now >= stats_new_stamp_us_ + period_us) {
    stats_old_stamp_us_ = stats_new_stamp_us_;
    stats_new_stamp_us_ = now;
    console_older_ = console_newer_;
    console_newer_ = console_totals();
    PoolCounters total, older;
    worker_.for_each_pool([&](Pool& p) {
      p.stats().roll();
      total += p.stats().totals;
      older += p.stats().older;
    });
    // log_stats: PgBouncer's line over the period that just ended, every database together.
    if (worker_.settings().log_stats) {
      spdlog::info("{}", stats_log_line(compute_averages(total, older, now - stats_old_stamp_us_)));
    }
  }
}

PoolCounters AdminControl::console_totals() const {
  PoolCounters c;
  c.transactions = c.queries = console_sessions_.load(std::memory_order_relaxed);
  c.client_logins = console_logins_.load(std::memory_order_relaxed);
  return c;
}

}  // namespace pgsluice
