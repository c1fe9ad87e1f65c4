// A server connection lost while linked (the backend terminated, PostgreSQL crashed or shut
// down): the client keeps its connection when it can carry on (client_lost_server.h). Kept apart
// from the forwarding in server.cc, which only hands its FATAL and its loss here.
//
// It cannot carry on — it is closed with the server, FATAL 08006, as before — when:
// - the pool is in session mode: the client's session (its SETs, temporary tables, prepared
//   statements, LISTENs) was that server's and is gone with it, which a new server would hide;
// - its server was pinned to it (session state under the `pin` action): the same, for the
//   state that pinned it;
// - a COPY was in progress: the client is in COPY mode (sending CopyData, or reading it), which
//   an ErrorResponse does not end for every client the way PostgreSQL's own ending does;
// - a message was half forwarded either way (a large reply or request streamed in pieces):
//   what follows on the client's connection would not start at a message;
// - the pooler's own queries were in flight (the link's parameter sync, a read-back, a
//   statement check): the client's request was held for them and its state is the pooler's;
// - it is a replication connection: its walsender's stream cannot be resumed elsewhere.
#include <spdlog/spdlog.h>

#include <string>

#include "pgsluice/protocol/backend.h"
#include "pooler/base/sqlstate.h"
#include "pooler/core/client.h"
#include "pooler/core/pool.h"
#include "pooler/core/server.h"

namespace pgsluice {

namespace pp = pgsluice::protocol;

bool Server::swallow_server_fatal(const pp::Message& error) {
  // PostgreSQL sends the severity first: most errors cost this comparison only.
  if (!error.body.starts_with("SFATAL") || !client_may_carry_on()) return false;
  auto fields = pp::parse_error_fields(error.body);
  if (!fields) return false;
  // The connection ends next. A client that stays must not see a FATAL (a client library may
  // take it for the end of its connection): it gets the error when the connection goes, as an
  // ERROR, in answer to its request (its next one, when none is in flight).
  loss_note_.code = std::string(fields.value.code);
  loss_note_.message = std::string(fields.value.message);
  return true;
}

bool Server::client_may_carry_on() const {
  if (state_ != State::active || client_ == nullptr) return false;
  if (pool_->mode() == PoolMode::session || session_.pin.pinned) return false;
  if (replies_.copy() != ReplyQueue::Copy::none || client_->mid_message()) return false;
  if (passthrough_remaining_ > 0) return false;
  if (replies_.internal_ready_owed() > 0 || parameter_sync_owed_ || detach_pending_) return false;
  if (rewrite_.retry.holding_error || rewrite_.shape_check != nullptr) return false;
  return client_->replication() == protocol::ReplicationMode::none;
}

void Server::drop_pending_replies() {
  while (!rewrite_.pending.empty()) {
    skip_pending_to_sync();  // the Parses, Binds and Executes up to the next Sync or Query
    if (!rewrite_.pending.empty()) rewrite_.pending.pop_front();
  }
}

void Server::lose(int status) {
  const std::string reason = status == UV_EOF
                                 ? std::string("server closed the connection")
                                 : fmt::format("server connection failed: {}", uv_strerror(status));
  if (!client_may_carry_on()) {
    close(reason);
    return;
  }
  ServerLoss loss;
  loss.in_block = replies_.transaction_status() != pp::TransactionStatus::idle;
  loss.owed = replies_.client_ready_owed();
  loss.batch_open = replies_.extended_open();
  loss.code = loss_note_.code.empty() ? sqlstate::kConnectionFailure : loss_note_.code;
  loss.message = loss_note_.code.empty() ? fmt::format("server connection lost: {}", reason)
                                         : loss_note_.message;
  if (rewrite_.cache != nullptr) drop_pending_replies();
  Client* client = client_;
  client_ = nullptr;  // told below, not failed by close()
  close(reason);      // may delete this
  client->keep_after_server_loss(loss);
}

}  // namespace pgsluice
