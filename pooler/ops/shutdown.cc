// See shutdown.h.
#include "pooler/ops/shutdown.h"

#include <spdlog/spdlog.h>

#include <csignal>
#include <vector>

#include "pooler/base/sqlstate.h"
#include "pooler/core/client.h"
#include "pooler/core/extensions.h"
#include "pooler/core/pool.h"
#include "pooler/core/server.h"
#include "pooler/core/worker.h"

namespace pgsluice {

namespace {
constexpr std::array<int, 3> kSignals = {SIGINT, SIGTERM, SIGQUIT};

const char* signal_name(int signum) {
  switch (signum) {
    case SIGINT:
      return "SIGINT";
    case SIGTERM:
      return "SIGTERM";
    case SIGQUIT:
      return "SIGQUIT";
    default:
      return "signal";
  }
}
}  // namespace

void Shutdown::start_signals(uv_loop_t* loop) {
  signals_.start(loop, kSignals, on_signal, this);
}

void Shutdown::close_signals() {
  signals_.close();
}

Shutdown::Mode Shutdown::mode_for_signal(int signum, Mode current) {
  // PgBouncer: a signal while a shutdown is already in progress means "now".
  if (current != Mode::none || signum == SIGQUIT) return Mode::immediate;
  return signum == SIGINT ? Mode::wait_for_servers : Mode::wait_for_clients;
}

void Shutdown::on_signal(uv_signal_t* handle, int signum) {
  auto* self = static_cast<Shutdown*>(handle->data);
  WorldPause pause = self->worker_.pause_world();  // every worker's clients
  Mode next = mode_for_signal(signum, self->mode_);
  spdlog::info("got {}: {}", signal_name(signum),
               next == Mode::immediate          ? "shutting down now"
               : next == Mode::wait_for_servers ? "shutting down when servers are released"
                                                : "shutting down when clients leave");
  switch (next) {
    case Mode::wait_for_clients:
      self->wait_for_clients();
      break;
    case Mode::wait_for_servers:
      self->wait_for_servers();
      break;
    default:
      self->immediate();
      break;
  }
}

void Shutdown::wait_for_clients() {
  if (mode_ != Mode::none) return;
  mode_ = Mode::wait_for_clients;
  // The TCP ports close (behind so_reuseport the other processes take the next connections);
  // the Unix socket stays for the console until the process exits, as in PgBouncer: an operator
  // can still look (SHOW) or SHUTDOWN at once. Other logins on it are refused (admit()).
  worker_.drain_tcp_listeners();
  worker_.close_tcp_listeners();
  spdlog::info("no longer accepting connections; waiting for {} clients to leave",
               remaining_clients());
  tick(worker_.now_ms());
}

void Shutdown::wait_for_servers() {
  if (mode_ == Mode::wait_for_servers || mode_ == Mode::immediate) return;
  mode_ = Mode::wait_for_servers;
  // Every worker's clients are stopped with it (the signal's pause, the console's command).
  worker_.group().for_each_worker([](Worker& w) { w.start_draining(); });
  worker_.close_tcp_listeners();
  // As PgBouncer's pause: no server is handed out any more, idle ones close now and busy ones
  // when released. A client is let be until it starts its next transaction (then closed,
  // Client::process_regular_input); the queued ones are closed by the next tick, not here, so
  // that the console's answer comes first.
  worker_.for_each_pool([](Pool& p) { p.set_paused(true, true); });
  const auto timeout = static_cast<uint64_t>(worker_.settings().shutdown_timeout.count());
  deadline_ms_ = timeout > 0 ? worker_.now_ms() + timeout : 0;
  spdlog::info("no longer accepting connections; waiting for {} clients to release their servers",
               clients_holding_servers());
}

void Shutdown::immediate() {
  mode_ = Mode::immediate;
  worker_.group().stop_all();
}

size_t Shutdown::remaining_clients() {
  // A connection on its way to a worker is a client that has not arrived yet.
  size_t n = worker_.group().handoffs_in_flight().load(std::memory_order_relaxed);
  worker_.for_each_client([&](Client& c) {
    if (!c.is_admin_console() && c.state() != Client::State::closing) ++n;
  });
  return n;
}

bool Shutdown::admit(Client& client) const {
  // Only the Unix socket is still open (the TCP ports closed when the shutdown began): what
  // comes on it is for the console. PgBouncer's words; PostgreSQL's SQLSTATE for a server that
  // is shutting down.
  if (mode_ == Mode::none || client.is_admin_console() || client.channel().is_tcp()) return true;
  client.fail(sqlstate::kCannotConnectNow, "pooler is shutting down", "pooler is shutting down");
  return false;
}

size_t Shutdown::clients_holding_servers() {
  size_t busy = 0;
  worker_.for_each_client([&](Client& c) {
    if (!c.is_admin_console() && c.replication() == protocol::ReplicationMode::none &&
        c.state() == Client::State::active && c.server() != nullptr) {
      ++busy;
    }
  });
  return busy;
}

size_t Shutdown::close_queued_clients() {
  std::vector<Client*> queued;
  size_t busy = 0;
  worker_.for_each_client([&](Client& c) {
    if (c.is_admin_console() || c.state() == Client::State::closing) return;
    // A replication stream has no transaction to finish: closed.
    if (c.replication() != protocol::ReplicationMode::none) {
      queued.push_back(&c);
    } else if (c.state() == Client::State::active && c.server() != nullptr) {
      // Linked: a transaction (in session mode, the session) in progress, which may finish.
      ++busy;
    } else if (c.state() == Client::State::waiting || c.state() == Client::State::welcome_wait) {
      // Its request would begin a new transaction: never served (PgBouncer closes them so).
      queued.push_back(&c);
    }
  });
  for (Client* c : queued) c->fail(sqlstate::kAdminShutdown, kShutdownMessage, kShutdownLogReason);
  return busy;
}

void Shutdown::tick(uint64_t now_ms) {
  switch (mode_) {
    case Mode::none:
    case Mode::immediate:
      return;
    case Mode::wait_for_clients:
      if (remaining_clients() == 0) {
        spdlog::info("client connections dropped, exiting");
        immediate();
      }
      return;
    case Mode::wait_for_servers: {
      size_t busy = close_queued_clients();
      if (busy == 0) {
        spdlog::info("server connections dropped, exiting");  // PgBouncer's words
        immediate();
      } else if (deadline_ms_ != 0 && now_ms >= deadline_ms_) {
        spdlog::warn(
            "shutdown_timeout: {} transactions still running, closing their servers (rolled "
            "back)",
            busy);
        immediate();
      }
      return;
    }
  }
}

}  // namespace pgsluice
