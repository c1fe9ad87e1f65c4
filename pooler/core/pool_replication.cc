// Replication clients in the pool (members of Pool; the connections themselves are
// client_replication.cc and server_login.cc). As PgBouncer 1.23+ counts them: a
// replication client's server takes a slot of pool_size, max_db_connections and
// max_user_connections like any server, for as long as the client stays; when the pool is full
// an idle server is closed to make room (PgBouncer's eviction), and otherwise the client waits,
// up to query_wait_timeout, for a server to be released (it is then closed for the client:
// pool.cc, on_server_idle) or to close. Replication servers never serve normal clients, so a
// normal client never waits behind one other than for the slot it holds.
#include <spdlog/spdlog.h>

#include "pooler/core/pool.h"
#include "pooler/core/worker.h"

namespace pgsluice {

void Pool::request_replication(Client& client) {
  replication_waiting_.push_back(client);
  client.wait.started_us = now_us();
  launch_replication_waiters(/*evict=*/true);
}

void Pool::launch_replication_waiters(bool evict) {
  while (!replication_waiting_.empty()) {
    if (paused_ || worker_.stopping()) return;
    // The slot is taken under the shared lock (shared_limits.h): every worker's servers count.
    const LaunchVerdict verdict =
        worker_.group().limits().reserve(limit_slots_, launch_input(), worker_.index());
    if (!launch_allowed(verdict)) {
      // The evicted server's slot comes back when its socket has closed
      // (on_server_destroyed), which calls launch_for_waiters and so this again.
      if (!evict || !make_room_for_replication(verdict)) note_starving(verdict);
      return;
    }
    launch_replication_server(*replication_waiting_.pop_front());
  }
}

bool Pool::make_room_for_replication(LaunchVerdict verdict) {
  // One eviction at a time: a closing server's slot is already on its way here.
  if (closing_open_ > 0) return true;
  if (!idle_.empty()) {
    // The oldest idle server (idle servers are a stack: the most recently used first).
    Server& oldest = idle_.back();
    oldest.close("evicted: a replication connection needs a slot of the pool");
    return true;
  }
  if (verdict == LaunchVerdict::db_full || verdict == LaunchVerdict::user_full) {
    return evict_idle_server(verdict);
  }
  return false;
}

void Pool::launch_replication_server(Client& client) {
  const uint64_t now = worker_.now_ms();
  const size_t host = pick_host(now);
  // The server deletes itself when its socket is closed; its slot is given back then
  // (on_server_destroyed), as any server's.
  auto* server = new Server(*this, worker_.next_socket_id(), host, hosts_.at(host));
  server->serve_replication(client);
  client.on_replication_server(*server);
  const uint64_t waited = client.wait.started_us != 0 && now_us() > client.wait.started_us
                              ? now_us() - client.wait.started_us
                              : 0;
  stats_.totals.wait_time_us += waited;
  stats_.wait_time.observe(waited);
  server->timing.connect_ms = now;
  move_server(*server, Server::State::closing, Server::State::connecting);
  server->connect();
}

void Pool::on_replication_login_ok(Server& server) {
  hosts_.logged_in(server.host_index());
  SharedLimits::login_succeeded(limit_slots_);
  server.life.born_ms = worker_.now_ms();
  ++stats_.totals.server_assignments;
  if (Client* client = server.client(); client != nullptr) {
    client->on_replication_ready(server);
  } else {
    server.close("replication client closed during the login");
  }
}

}  // namespace pgsluice
