// A client moving to the new process of an online restart (members of Client, kept apart from
// client.cc; the protocol is takeover.h): what it carries out of the old process, and how the
// new one goes on serving it, as if it had logged in there.
#include <spdlog/spdlog.h>

#include "pgsluice/protocol/scram.h"
#include "pooler/core/client.h"
#include "pooler/core/pool.h"
#include "pooler/core/takeover.h"
#include "pooler/core/worker.h"
#include "pooler/net/socket_names.h"

namespace pgsluice {

namespace pp = pgsluice::protocol;

bool Client::export_state(TakeoverClient& out) const {
  // Only what the new process can rebuild from these fields: a client between transactions with
  // no server (a linked server's session, a TLS session, prepared statements and LISTENs live
  // in this process and cannot move), nothing half-read or unsent, and not in a failed block
  // whose server was lost (its state is this process's: client_lost_server.h).
  if (state_ != State::idle || server_ != nullptr || pool_ == nullptr || admin_console_ ||
      lost_.active || replication_ != pp::ReplicationMode::none || channel_.tls() != nullptr ||
      !prepared_.by_name.empty() || !prepared_.sql.empty() || !listen_.channels.empty() ||
      listen_.relay != nullptr || !listen_.relayed.empty() || !channel_.idle_for_takeover()) {
    return false;
  }
  const ServerCredentials& cred = pool_->credentials();
  out = TakeoverClient{.user = who_.user,
                       .database = who_.database,
                       .protocol_version = who_.protocol_version,
                       .cancel_pid = cancel_.pid,
                       .cancel_key = cancel_.key,
                       .scram_client_key = cred.scram_client_key,
                       .scram_server_key = cred.scram_server_key,
                       .reported = params_.reported,
                       .extras = params_.extras,
                       .settings = params_.settings};
  return true;
}

bool Client::resume(TakeoverClient state) {
  who_.peer = channel_.is_tcp() ? tcp_peer_name(channel_.tcp()) : "unix";
  who_.user = std::move(state.user);
  who_.database = std::move(state.database);
  who_.log_id = fmt::format("C-{} {}@{} {}", id_, who_.user, who_.database, who_.peer);
  who_.connected_ms = last_request_ms_ = worker_.now_ms();
  std::optional<DatabaseEntry> entry = worker_.config().find_database(who_.database);
  if (!entry) {
    close("taken over, but its database is no longer configured");
    return false;
  }
  who_.protocol_version = state.protocol_version;
  params_.reported = std::move(state.reported);
  params_.extras = std::move(state.extras);
  params_.settings = std::move(state.settings);
  pool_ = &worker_.pool_for(*entry, who_.user);
  ServerCredentials& cred = pool_->credentials();
  if (state.scram_client_key && !cred.scram_client_key && cred.user == who_.user &&
      pp::is_scram_verifier(cred.password)) {
    // SCRAM pass-through: the pool logs in with the keys the client proved to the old process.
    cred.scram_client_key = state.scram_client_key;
    cred.scram_server_key = state.scram_server_key;
  }
  session_policy_ = worker_.config().session_policy_for(*entry, who_.user, pool_->mode());
  session_checks_ = shares_servers(pool_->mode()) && !session_policy_.all_off();
  listen_.relays = session_checks_ &&
                   session_policy_.action_for(pp::SessionStateKind::listen) == SessionAction::relay;
  set_cancel_key(state.cancel_pid, std::move(state.cancel_key));
  worker_.adopt_cancel_key(*this);
  cancel_.registered = true;
  if (worker_.settings().log_connections) spdlog::info("{} taken over", who_.log_id);
  // Past the startup packet: regular messages, within max_packet_size (as after a login here).
  channel_.input().set_phase(pp::FramePhase::regular);
  channel_.input().set_max_length(worker_.settings().max_packet_size);
  set_state(State::idle);
  channel_.start_reading();
  return true;
}

}  // namespace pgsluice
