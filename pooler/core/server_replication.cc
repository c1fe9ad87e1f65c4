// A replication client's walsender connection (members of Server, kept apart from server.cc;
// the client side is client_replication.cc). PgBouncer 1.23+'s rules: the server is opened for
// one client, with `replication` and the client's startup parameters in its StartupMessage
// (a physical walsender refuses SET, so nothing can be applied after the login), linked to that
// client from the start, never put on the idle list, never given to another client, and closed
// when the client leaves. Its slot counts against pool_size, max_db_connections and
// max_user_connections as any server's does (pool_replication.cc).
#include <spdlog/spdlog.h>

#include "pooler/base/sqlstate.h"
#include "pooler/core/client.h"
#include "pooler/core/pool.h"
#include "pooler/core/server.h"
#include "pooler/core/worker.h"

namespace pgsluice {

namespace pp = pgsluice::protocol;

void Server::serve_replication(Client& client) {
  client_ = &client;
  replication_ = client.replication();
}

void Server::add_replication_parameters(
    std::vector<std::pair<std::string_view, std::string_view>>& params) {
  // The client may have gone while this server connected: its close closed this server, and
  // nothing is sent then; the check is for a client unlinked in between all the same.
  if (client_ == nullptr) return;
  params.emplace_back("replication",
                      replication_ == pp::ReplicationMode::logical ? "database" : "true");
  for (const auto& [name, value] : client_->replication_parameters()) {
    params.emplace_back(name, value);
  }
}

void Server::finish_replication_login() {
  uv_timer_stop(&handles_.timer);
  channel_.input().set_max_length(pp::kDefaultMaxMessageLength);
  replies_.on_login_ready();
  if (worker_->settings().log_connections) {
    spdlog::info("{} login ok (replication={}), protocol 3.{}", log_id(),
                 pp::to_string(replication_), login_.protocol_version & 0xffff);
  }
  linked_at_ms_ = ready_ms_ = worker_->now_ms();
  set_state(State::replicating);
  pool_->on_replication_login_ok(*this);
  // Anything that came behind the login's ReadyForQuery follows the greeting.
  if (state_ == State::replicating) process_replication_input();
}

void Server::replication_login_failed(std::string_view code, std::string_view message) {
  // Not the pool's login failure: a replication login fails for reasons of its own (no
  // REPLICATION attribute, no pg_hba.conf line for replication, max_wal_senders reached)
  // while normal logins work, so it neither fails the waiting clients nor starts
  // server_login_retry (PgBouncer's rule too). The message is in the "server login failed"
  // line; the close lines of both sides say "login failed", PgBouncer's words, which its suite
  // and operators' tools match.
  Client* client = client_;
  client_ = nullptr;
  close("login failed");
  if (client != nullptr) client->on_replication_refused(code, message);
}

void Server::process_replication_input() {
  pp::FrameReader& in = channel_.input();
  if (client_ == nullptr) {
    in.skip(in.unread_size());
    return;
  }
  if (in.unread_size() == 0) return;
  Channel& out = client_->channel();
  out.output().append(in.unread());
  in.skip(in.unread_size());
  out.flush();
  // The client is slower than the stream (a busy pg_receivewal, a large base backup): this
  // side waits until it drains (Client::on_channel_drained), so at most about the high-water
  // mark of each direction is held here.
  if (client_ != nullptr && out.over_high_water()) channel_.stop_reading();
}

}  // namespace pgsluice
