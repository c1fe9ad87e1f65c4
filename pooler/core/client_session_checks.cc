// Where the session-state checks meet a client's Query or Parse: a refusal written in place of
// the statement, or a wait for a pin that the pool's reserve refuses now (issue 42): the client
// gives its server back (or keeps it, in a transaction block) and its pool asks again at each
// maintenance round.
#include <spdlog/spdlog.h>

#include <string>

#include "pgsluice/protocol/message_types.h"
#include "pooler/base/sqlstate.h"
#include "pooler/core/client.h"
#include "pooler/core/pool.h"
#include "pooler/core/server.h"
#include "pooler/core/session_checks.h"
#include "pooler/core/worker.h"
#include "pooler/net/forwarder.h"

namespace pgsluice {

namespace pp = pgsluice::protocol;
namespace fe = pgsluice::protocol::frontend;

bool Client::refused_by_session_checks(const pp::Message& message, Forwarder& batch,
                                       std::string& out) {
  std::string text, hint;
  const SessionCheckResult result = check_session_state(worker_, *this, *server_, session_policy_,
                                                        prefilter_, message, text, hint);
  if (result == SessionCheckResult::forward) {
    if (wait.pin_since_ms != 0) wait.pin_since_ms = 0;  // not written (a cache line) every time
    return false;
  }
  batch.flush(&out);
  if (result == SessionCheckResult::wait_for_pin) {
    // Read again when a pin may be free: nothing of it went to the server.
    channel_.input().give_back(message);
    server_->channel().flush();
    wait_for_pin();
    return true;
  }
  if (message.type == fe::kParse && server_->rewrites_statements()) {
    refuse_until_sync(sqlstate::kFeatureNotSupported, text, hint);
    server_->note_client_message(message.type, /*queue_reply=*/false);
  } else {
    write_refusal(message, text, hint, out);
    server_->note_client_message(message.type);
  }
  return true;
}

void Client::wait_for_pin() {
  if (wait.pin_since_ms == 0) wait.pin_since_ms = worker_.now_ms();
  spdlog::debug("{} waits for a pin (session_state_pin_reserve)", who_.log_id);
  if (server_->transaction_status() != pp::TransactionStatus::idle) {
    // In a transaction block the client keeps its server and waits on the pool's pin list.
    if (!wait.on_pin_list) pool_->wait_for_pin(*this);
    return;
  }
  // The server goes back at once (nothing was sent); once released the client queues on the
  // pool's pin list (process_regular_input), not for the next idle server.
  Server* server = server_;
  held_.for_read_back = true;
  server->release_if_nothing_owed();
}

void Client::retry_after_pin_wait() {
  if (state_ == State::waiting) {
    pool_->request_server(*this);
  } else if (state_ == State::active) {
    process_regular_input();  // still linked (a transaction block): the check runs again
  }
}

}  // namespace pgsluice
