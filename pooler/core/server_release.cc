// The end of a link: a server goes back to the pool at a transaction boundary (transaction mode)
// or when its client leaves, cleaned first of what the client left on it (server.h).
#include <spdlog/spdlog.h>

#include "pooler/core/client.h"
#include "pooler/core/pool.h"
#include "pooler/core/server.h"
#include "pooler/core/worker.h"

namespace pgsluice {

namespace pp = pgsluice::protocol;
using protocol::TransactionStatus;

void Server::release_to_pool() {
  if (client_ != nullptr) {
    Client* client = client_;
    client_ = nullptr;
    client->channel().flush();
    client->on_server_released();
  }
  internal_failed_ = false;
  rewrite_.forget_client_requests();  // none at a transaction boundary; a leftover: a bug's trace
  reset_retry_state();
  const Settings& settings = worker_->settings();
  // After a call of a function the checks cannot see into (opaque_call:reset), whatever
  // session_state_verify says: nobody else gets the server before its word on what it holds.
  if (shares_servers(pool_->mode()) &&
      (session_.verifier.opaque_call_ran() ||
       verify_turn(settings.session_state_verify, settings.session_state_verify_sample))) {
    session_.verifier.expect();
  }
  const bool reset_always = settings.server_reset_query_always &&
                            !settings.server_reset_query.empty() && shares_servers(pool_->mode());
  // SQL statements kept for clients that no longer hold them are deallocated here (lazily: a
  // client's DEALLOCATE or its leaving does not visit every server that prepared it).
  if (session_.dirty.any() || session_.verifier.awaiting() || reset_always ||
      rewrite_.sql.may_have_dead()) {
    // Cleaned now rather than when the next client comes, so that a lock or a LISTEN is not
    // held by an idle pooled server.
    clean_and_release(/*session_ended=*/false);
    return;
  }
  go_idle();
}

void Server::release_if_nothing_owed() {
  if (state_ != State::active || !shares_servers(pool_->mode())) return;
  if (!at_transaction_boundary()) return;
  // What was noted while the last check was under way is checked before the release.
  if (run_boundary_checks() || session_.pin.pinned) return;
  release_to_pool();
}

void Server::detach_client() {
  client_ = nullptr;
  if (replication_ != protocol::ReplicationMode::none) {
    // Never returned to the pool: a walsender serves the one client it was opened for.
    close("replication client closed");
    return;
  }
  if (state_ != State::active) return;
  const bool client_request_open = replies_.copy() != ReplyQueue::Copy::none ||
                                   replies_.client_ready_owed() > 0 || replies_.extended_open();
  if (passthrough_remaining_ == 0 && !client_request_open && replies_.internal_ready_owed() > 0) {
    // Only the pooler's own query is under way (a parameter sync, a read-back, a pin check):
    // its answer is awaited, then the server is cleaned as below (handle_internal_reply).
    detach_pending_ = true;
    return;
  }
  if (passthrough_remaining_ > 0 || replies_.request_open()) {
    if (may_drain_for_gone_client()) {
      // Whole requests, each ended by a Sync or a Query: their replies are read and dropped,
      // then the server is cleaned as for any client that leaves, without a new backend login
      // (node-postgres's end() right after an error leaves before the ReadyForQuery).
      draining_since_ms_ = worker_->now_ms();
      return;
    }
    // A COPY or a half-sent batch cannot be finished for a client that is gone: closing is
    // the only safe way.
    close("client left in the middle of a request");
    return;
  }
  clean_and_release(/*session_ended=*/true);
}

bool Server::may_drain_for_gone_client() const {
  if (passthrough_remaining_ > 0 || replies_.copy() != ReplyQueue::Copy::none ||
      replies_.extended_open() || replies_.internal_ready_owed() > 0 ||
      replies_.client_ready_owed() == 0 || rewrite_.retry.holding_error || query_sink_ != nullptr) {
    return false;
  }
  // Replies the pooler makes up are sent when they reach the front, to a client: none then.
  const PendingReplies& pending = rewrite_.pending;
  for (size_t i = 0; i < pending.size(); ++i) {
    if (is_made_up(pending[i].kind)) return false;
  }
  return true;
}

bool Server::finish_drain_if_done() {
  if (draining_since_ms_ == 0 || replies_.client_ready_owed() > 0) return false;
  draining_since_ms_ = 0;
  rewrite_.forget_client_requests();
  spdlog::debug("{} drained after its client left: cleaned and released", log_id());
  clean_and_release(/*session_ended=*/true);
  return true;
}

void Server::forget_reset_settings() {
  if (session_.dirty.resets_role()) {
    extras_.erase("role");
    extras_.erase("session_authorization");
  }
  if (session_.dirty.resets_all_settings()) {
    // RESET ALL leaves the role and the session authorization (GUC_NO_RESET_ALL): a server
    // believed to have neither would serve the next client as that role.
    ParameterSet roles;
    for (std::string_view name : {"role", "session_authorization"}) {
      if (const std::string* v = extras_.get(name)) roles.set(name, *v);
    }
    extras_ = std::move(roles);
  } else {
    for (const std::string& name : session_.dirty.reset_names()) extras_.erase(name);
  }
}

void Server::look_up_function(std::string_view name) {
  // A few per release; a transaction calling more unknown functions has them looked up later.
  constexpr size_t kMaxLookups = 8;
  if (session_.lookup_names.size() >= kMaxLookups) return;
  for (const std::string& n : session_.lookup_names) {
    if (n == name) return;
  }
  session_.lookup_names.emplace_back(name);
}

std::string Server::function_verdict_key(std::string_view name) const {
  const std::string* path = extras_.get("search_path");
  std::string key = verdict_key_prefix(pool_->database().name, pool_->credentials().user,
                                       path != nullptr ? std::string_view(*path) : "");
  key.append(name);
  return key;
}

void Server::clean_and_release(bool session_ended) {
  if (session_.dirty.needs_close()) {
    close(session_.dirty.close_reason());
    return;
  }
  // Each query is its own Query message: DISCARD ALL refuses to run inside the implicit
  // transaction of a multi-statement query.
  if (session_ended && shares_servers(pool_->mode()) && !session_.verifier.awaiting() &&
      (session_.verifier.opaque_call_ran() ||
       verify_turn(worker_->settings().session_state_verify,
                   worker_->settings().session_state_verify_sample))) {
    session_.verifier.expect();
  }
  std::vector<std::string> queries;
  if (replies_.transaction_status() != TransactionStatus::idle) queries.emplace_back("ROLLBACK");
  // Before the cleaning, which may reset the search_path the calls were resolved on.
  if (!session_.lookup_names.empty()) {
    queries.push_back(function_lookup_query(session_.lookup_names));
    const std::string* path = extras_.get("search_path");
    session_.lookup.start(std::move(session_.lookup_names),
                          verdict_key_prefix(pool_->database().name, pool_->credentials().user,
                                             path != nullptr ? std::string_view(*path) : ""));
    session_.lookup_names.clear();
  }
  // Before any DISCARD ALL or DEALLOCATE ALL, after which they would not exist.
  if (rewrite_.sql.may_have_dead()) {
    for (std::string& q : dead_sql_statement_queries()) queries.push_back(std::move(q));
  }
  const std::string& reset_query = worker_->settings().server_reset_query;
  // server_reset_query_always: after every transaction in transaction mode too (PgBouncer's).
  if (!reset_query.empty() && ((session_ended && pool_->mode() == PoolMode::session) ||
                               worker_->settings().server_reset_query_always)) {
    queries.push_back(reset_query);
    extras_.clear();  // DISCARD ALL (the usual reset) resets what the pooler applied
  }
  // Settings kept for a client whose transaction never reached a quiet boundary (it left with
  // more in flight): what stuck is unknown, so they are reset.
  if (session_.kept.any()) {
    session_.kept.mark_for_reset(session_.dirty);
    session_.kept.clear();
  }
  // Channels of a transaction that never reached its read-back (the client left meanwhile).
  if (session_.listen.any()) {
    queries.emplace_back("UNLISTEN *");
    session_.listen.clear();
  }
  for (std::string& q : session_.dirty.cleanup_queries()) queries.push_back(std::move(q));
  forget_reset_settings();
  session_.dirty.clear();
  unpin();
  for (const std::string& q : queries) {
    // These end every prepared statement on the server, the pooler's included.
    if (q.find("DISCARD ALL") != std::string::npos ||
        q.find("DEALLOCATE ALL") != std::string::npos) {
      forget_statements();
    }
    if (q.find("DISCARD ALL") != std::string::npos) session_.verifier.track().clear();
  }
  // Last, after the cleaning: it sees what the cleaning left.
  if (session_.verifier.awaiting()) {
    queries.push_back(
        verify_query(pool_->credentials().user, session_.verifier.strict() ? &extras_ : nullptr));
  }
  rewrite_.forget_client_requests();
  reset_retry_state();
  if (queries.empty()) {
    set_state(State::idle);
    pool_->on_server_idle(*this);
    return;
  }
  internal_failed_ = false;
  set_state(State::resetting);
  for (const std::string& q : queries) send_internal_query(q);
}

}  // namespace pgsluice
