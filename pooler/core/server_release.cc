// A server between two clients (members of Server, kept apart from server.cc): the end of a link
// (release, cleaning), cancel requests and the hold on a release until they are done, the move
// to another worker's share of the pool, the checks of an idle server and the pooler's own
// queries on it.
#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <cstdint>
#include <memory>
#include <utility>

#include "pgsluice/protocol/message_types.h"
#include "pooler/base/log_level.h"
#include "pooler/base/sqlstate.h"
#include "pooler/core/client.h"
#include "pooler/core/host_roles.h"
#include "pooler/core/pool.h"
#include "pooler/core/server.h"
#include "pooler/core/server_lifecycle.h"
#include "pooler/core/server_query.h"
#include "pooler/core/worker.h"

namespace pgsluice {

// ------------------------------------------------------------------------------------------------
// The end of a link: a server goes back to the pool at a transaction boundary (transaction mode)
// or when its client leaves, cleaned first of what the client left on it (server.h).

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
  rewrite_.reset_retry();
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
    draining_since_ms_ = 0;
    set_state(State::draining);
    return;
  }
  if (passthrough_remaining_ > 0 || replies_.request_open()) {
    if (may_drain_for_gone_client()) {
      // Whole requests, each ended by a Sync or a Query: their replies are read and dropped,
      // then the server is cleaned as for any client that leaves, without a new backend login
      // (node-postgres's end() right after an error leaves before the ReadyForQuery).
      draining_since_ms_ = worker_->now_ms();
      set_state(State::draining);
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
  if (state_ != State::draining || replies_.client_ready_owed() > 0) return false;
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
  size_t lookup_at = SIZE_MAX;  // none
  if (!session_.lookup_names.empty()) {
    lookup_at = queries.size();
    queries.push_back(function_lookup_query(session_.lookup_names));
    const std::string* path = extras_.get("search_path");
    session_.lookup.start(std::move(session_.lookup_names),
                          verdict_key_prefix(pool_->database().name, pool_->credentials().user,
                                             path != nullptr ? std::string_view(*path) : ""));
    session_.lookup_names.clear();
  }
  // Before any DISCARD ALL or DEALLOCATE ALL, after which they would not exist.
  if (rewrite_.sql.may_have_dead()) {
    // SQL statements no client holds any more (sql_prepared.h).
    for (const std::string& name : rewrite_.sql.take_dead())
      queries.push_back("DEALLOCATE " + name);
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
  size_t verify_at = SIZE_MAX;  // none
  if (session_.verifier.awaiting()) {
    verify_at = queries.size();
    queries.push_back(
        verify_query(pool_->credentials().user, session_.verifier.strict() ? &extras_ : nullptr));
  }
  rewrite_.forget_client_requests();
  rewrite_.reset_retry();
  if (queries.empty()) {
    set_state(State::idle);
    pool_->on_server_idle(*this);
    return;
  }
  internal_failed_ = false;
  set_state(State::resetting);
  for (size_t i = 0; i < queries.size(); ++i) {
    send_internal_query(queries[i], i == lookup_at   ? InternalQuery::function_lookup
                                    : i == verify_at ? InternalQuery::verify
                                                     : InternalQuery::other);
  }
}

// ------------------------------------------------------------------------------------------------
// Cancel requests for a server's running query, and the hold on its release until they are
// done (server.h, cancel_running_query).

void Server::cancel_running_query() {
  if ((state_ != State::active && state_ != State::replicating) || login_.backend_key.empty())
    return;
  if (!cancels_) {
    cancels_ = std::make_shared<CancelsInFlight>();
    cancels_->server = this;
  }
  ++cancels_->in_flight;
  CancelHooks hooks;
  // PostgreSQL closes a cancel request's connection once it has signalled the backend: after
  // that the request can no longer reach whatever the server runs next.
  hooks.await_close = true;
  hooks.done = [cancels = cancels_] {
    if (--cancels->in_flight == 0 && cancels->server != nullptr) {
      cancels->server->on_cancels_finished();
    }
  };
  worker_->send_cancel(cancel_address_, login_.backend_pid, login_.backend_key, std::move(hooks));
}

void Server::go_idle() {
  if (cancels_in_flight() > 0) {
    // Held, linked to nobody: no client's query may run here before the cancels have landed.
    if (log_enabled(spdlog::level::debug)) {
      spdlog::debug("{} released while {} cancel request(s) are in flight: held", log_id(),
                    cancels_in_flight());
    }
    set_state(State::being_canceled);
    return;
  }
  set_state(State::idle);
  pool_->on_server_idle(*this);
}

void Server::on_cancels_finished() {
  if (state_ == State::being_canceled) go_idle();  // else closed meanwhile, or never held
}

// ------------------------------------------------------------------------------------------------
// A server changing workers (one pool per process, docs/design.md): an idle server leaves one
// worker's share of its pool for another's without a new backend login. A libuv handle belongs
// to one loop, so the socket goes as a duplicate descriptor (Channel::detach/attach) and the
// Server object itself is posted to the other worker once its old loop has let go of it.

namespace {
// A server between two workers is owned by the task that carries it: a task that never runs
// (its worker stopped first) still closes the socket and frees the server.
struct ServerInTransit {
  Server* server;
  int fd;
  ServerInTransit(Server* s, int f) : server(s), fd(f) {}
  ServerInTransit(const ServerInTransit&) = delete;
  ServerInTransit& operator=(const ServerInTransit&) = delete;
  ~ServerInTransit() {
    if (server == nullptr) return;
    ::close(fd);
    delete server;
  }
};
}  // namespace

// --- Server ---

bool Server::movable() const {
  return state_ == State::idle && client_ == nullptr && query_sink_ == nullptr && !life.checking &&
         !session_.pin.pinned && !session_.dirty.any() && !rewrite_.retry.holding_error &&
         !session_.verifier.awaiting() && passthrough_remaining_ == 0 &&
         replies_.internal_ready_owed() == 0 && replies_.at_transaction_boundary() &&
         rewrite_.pending.empty() && handles_.channel_open && handles_.timer_open &&
         !handles_.resolving && !handles_.connecting &&
         !uv_is_closing(reinterpret_cast<const uv_handle_t*>(&handles_.timer)) &&
         channel_.can_detach();
}

bool Server::move_to(Worker& target, bool answers_ask) {
  if (!movable()) return false;
  const int fd = channel_.detach();
  if (fd < 0) return false;
  move_.target = &target;
  move_.fd = fd;
  move_.answers_ask = answers_ask;
  set_state(State::moving);  // off the pool's lists
  worker_->count_server_moved_out();
  if (log_enabled(spdlog::level::debug)) {
    spdlog::debug("{} moves to worker {}", log_id(), target.index());
  }
  uv_timer_stop(&handles_.timer);
  uv_close(reinterpret_cast<uv_handle_t*>(&handles_.timer), on_timer_closed);
  return true;
}

void Server::finish_move_out() {
  Worker& target = *move_.target;
  move_.target = nullptr;
  // After this call the server belongs to the target's thread.
  worker_->send_server(target, *this, std::exchange(move_.fd, -1), move_.answers_ask);
}

void Server::arrive(Pool& pool, int fd) {
  pool_ = &pool;
  worker_ = &pool.worker();
  uv_timer_init(worker_->loop(), &handles_.timer);
  handles_.timer.data = this;
  handles_.timer_open = true;
  handles_.channel_open = true;
  // Out of `moving` first: close() ignores a moving server, and a socket that cannot be opened
  // here must close like any other (its slot given back when the handles are done).
  set_state(State::idle);
  if (int rc = channel_.attach(worker_->loop(), fd); rc != 0) {
    close(
        fmt::format("could not take over the connection from another worker: {}", uv_strerror(rc)));
    return;
  }
  channel_.start_reading();
}

// --- Worker ---

void Worker::send_server(Worker& target, Server& server, int fd, bool answers_ask) {
  auto transit = std::make_shared<ServerInTransit>(&server, fd);
  const LimitSlots slots = server.pool().limit_slots();
  target.post([&target, transit, slots, db = server.pool().database(),
               user = server.pool().credentials().user, answers_ask] {
    Server* moved = std::exchange(transit->server, nullptr);
    target.receive_server(*moved, transit->fd, slots, db, user, answers_ask);
  });
  // A post refused (the target stopped) drops the task, and with it the server.
}

void Worker::receive_server(Server& server, int fd, const LimitSlots& slots,
                            const DatabaseEntry& db, const std::string& user, bool answers_ask) {
  ++servers_moved_in_;
  Pool* pool = find_pool(slots);
  // A worker is given servers for pools it has (it starved or asked); one whose share was
  // freed since (pool_idle_timeout) makes it again.
  if (pool == nullptr) pool = &pool_for(db, user);
  pool->adopt_moved_server(server, fd, answers_ask);
}

Pool* Worker::find_pool(const LimitSlots& slots) {
  for (auto& [key, pool] : pools_) {
    if (pool->limit_slots().pool == slots.pool) return pool.get();
  }
  return nullptr;
}

void Worker::offer_server(const LimitSlots& slots, int requester, int hops_left) {
  if (Pool* pool = find_pool(slots); pool != nullptr && pool->offer_idle_server(requester)) return;
  const int size = group_.size();
  if (hops_left > 1) {
    int next = (index_ + 1) % size;
    if (next == requester) next = (next + 1) % size;
    Worker& w = group_.worker(next);
    if (w.post([&w, slots, requester, hops_left] {
          w.offer_server(slots, requester, hops_left - 1);
        })) {
      return;
    }
  }
  Worker& back = group_.worker(requester);
  back.post([&back, slots] {
    if (Pool* pool = back.find_pool(slots)) pool->on_no_server_offered();
  });
}

// ------------------------------------------------------------------------------------------------
// server_check_query and the role check on an idle server; see server_lifecycle.h and
// Pool::take_idle_server().

void Server::run_check(const std::string& query) {
  if (state_ != State::idle) return;
  if (log_enabled(spdlog::level::debug)) {
    spdlog::debug("{} server_check_query after {} ms idle", log_id(),
                  worker_->now_ms() - life.idle_since_ms);
  }
  life.checking = true;
  internal_failed_ = false;
  // Resetting: not handed out until the answer; a failure closes it there
  // (handle_internal_reply), and the pool starts another if clients wait.
  set_state(State::resetting);
  send_internal_query(query);
}

bool Server::check_role() {
  role_check_.start();
  if (!run_query(RoleCheck::messages(), role_check_)) return false;
  if (log_enabled(spdlog::level::debug)) spdlog::debug("{} role check", log_id());
  life.checking = true;
  life.role_checking = true;
  return true;
}

std::optional<ServerRole> Server::role() const {
  // A server that reports in_hot_standby sends it again with the first reply after a change:
  // as current as its last reply. Otherwise only the role check knows.
  if (reports_role(tracked_)) return role_of(tracked_);
  return role_check_.answer();
}

// ------------------------------------------------------------------------------------------------
// Server::run_query and its replies; see server_query.h.

namespace be = pgsluice::protocol::backend;

bool Server::run_query(std::string_view messages, ServerQuerySink& sink) {
  if (state_ != State::idle || client_ != nullptr || query_sink_ != nullptr) return false;
  query_sink_ = &sink;
  internal_failed_ = false;
  set_state(State::resetting);
  channel_.output().append(messages);
  // The replies take the internal path (handle_internal_reply).
  replies_.on_internal_query(static_cast<uint8_t>(InternalQuery::run_query));
  rewrite_.unnamed = {};  // its Parse or Query replaces the unnamed statement
  channel_.flush();
  return true;
}

bool Server::deliver_query_reply(const protocol::Message& message) {
  switch (message.type) {
    case be::kDataRow: {
      auto row = protocol::parse_data_row(message.body);
      if (row) {
        query_sink_->on_query_row(row.value);
      } else {
        query_sink_->on_query_error(sqlstate::kProtocolViolation, "malformed DataRow");
      }
      return true;
    }
    case be::kErrorResponse: {
      // The query's own error (no permission on pg_authid, a bad auth_query): the sink's to
      // report; the server is fine and stays.
      auto error = protocol::parse_error_fields(message.body);
      query_sink_->on_query_error(
          error ? error.value.code : std::string_view(sqlstate::kInternalError),
          error ? error.value.message : std::string_view("malformed ErrorResponse"));
      return true;
    }
    case be::kParseComplete:
    case be::kBindComplete:
    case be::kNoData:
    case be::kRowDescription:
    case be::kCommandComplete:
    case be::kEmptyQueryResponse:
    case be::kPortalSuspended:
      return true;
    default:
      return false;  // ReadyForQuery, ParameterStatus, notices: as for any internal query
  }
}

void Server::finish_query() {
  ServerQuerySink* sink = std::exchange(query_sink_, nullptr);
  if (sink != nullptr) sink->on_query_done();
}

void Server::abandon_query(std::string_view reason) {
  ServerQuerySink* sink = std::exchange(query_sink_, nullptr);
  if (sink != nullptr) sink->on_query_lost(reason);
}

// ------------------------------------------------------------------------------------------------
// The replies to the pooler's own queries (send_internal_query, run_query): hidden from the
// client; rows go to the query that awaits them, the last ReadyForQuery finishes what they were
// for.

// A row of the pooler's own queries goes to the query it answers: the oldest owed.
void Server::on_internal_row(std::string_view body) {
  switch (internal_front()) {
    case InternalQuery::listen_read_back:
      session_.listen.on_row(body);
      return;
    case InternalQuery::kept_read_back:
      session_.kept.on_row(body);
      return;
    case InternalQuery::pin_check:
      on_pin_check_row(body);
      return;
    case InternalQuery::function_lookup:
      session_.lookup.on_row(body);
      return;
    case InternalQuery::verify:
      session_.verifier.on_data_row(body);
      return;
    case InternalQuery::other:
    case InternalQuery::settings_only:
    case InternalQuery::run_query:
      return;
  }
}

bool Server::handle_internal_reply(const pp::Message& message) {
  if (query_sink_ != nullptr && deliver_query_reply(message)) return true;
  switch (message.type) {
    case be::kParameterStatus: {
      auto ps = pp::parse_parameter_status(message.body);
      if (ps && may_track_parameter(ps.value.name)) {
        tracked_.set(ps.value.name, ps.value.value);
        if (client_ != nullptr) client_->on_server_parameter(ps.value.name, ps.value.value);
      }
      return true;
    }
    case be::kReadyForQuery: {
      if (!replies_.on_internal_ready(ReplyQueue::status_of(message)) && serves_nobody()) {
        close("unexpected ReadyForQuery from an idle server");
        return false;
      }
      // The finishing steps wait for the last of the pooler's queries sent together; each may
      // send another, and the steps after it then wait for that one's answer.
      const auto still_owed = [this] { return replies_.internal_ready_owed() > 0; };
      if (still_owed()) return true;
      const bool synced = parameter_sync_owed_;
      if (synced && !finish_parameter_sync()) return false;
      if (still_owed()) return true;
      if (session_.listen.awaiting()) finish_listen_read_back();
      if (still_owed()) return true;
      if (session_.kept.awaiting()) finish_kept_settings();
      if (still_owed()) return true;
      if (session_.pin.check_awaiting) finish_pin_check();
      if (still_owed()) return true;
      if (query_sink_ != nullptr) finish_query();
      if (still_owed()) return true;
      if (state_ == State::resetting) {
        if (internal_failed_ || replies_.transaction_status() != TransactionStatus::idle) {
          close(life.checking ? "server_check_query failed" : "cleaning the server failed");
          return false;
        }
        if (session_.verifier.awaiting() && finish_verify()) return true;
        go_idle();
        return serves_nobody();
      }
      if (state_ == State::draining) {
        clean_and_release(/*session_ended=*/true);
        return serves_nobody() || state_ == State::resetting;
      }
      if (state_ == State::active && client_ != nullptr) {
        if (synced && client_->input_held_for_read_back()) {
          // The server is in the client's state now: what the client sent goes on.
          client_->resume_input_after_read_back();
          if (state_ != State::active || client_ == nullptr) return state_ != State::closing;
        }
        // The link's parameter sync may have been all the server owed (the pooler answered
        // the client's DEALLOCATE itself): the link ends here, or nothing else would end it.
        release_if_nothing_owed();
        resume_client_after_read_back();
        return state_ != State::closing;
      }
      return true;
    }
    case be::kErrorResponse: {
      auto error = pp::parse_error_fields(message.body);
      std::string text = error ? std::string(error.value.message) : "malformed ErrorResponse";
      if (serves_nobody()) {
        // An error on an idle connection is the server ending it (shutdown, termination).
        close(fmt::format("server error on an idle connection: {}", text));
        return false;
      }
      internal_failed_ = true;
      spdlog::warn("{} pooler query failed: {}", log_id(), text);
      // The link's sync failed: the client's held request is refused at its ReadyForQuery
      // (finish_parameter_sync). Reading kept settings back is the pooler's business:
      // finish_kept_settings() closes the server, the client is not told.
      if (parameter_sync_owed_ && client_ != nullptr && held_messages_.sync_failure.empty()) {
        note_sync_failure(error ? &error.value : nullptr);
      }
      return true;
    }
    case be::kNotificationResponse:
      if (serves_nobody()) note_orphan_notification(message);
      return true;
    case be::kDataRow:
      on_internal_row(message.body);
      return true;
    case be::kCommandComplete:
      if (!message.body.starts_with("SELECT")) return true;
      // The LISTEN read-back's SELECT completed: no row then means no channel.
      if (internal_front() == InternalQuery::listen_read_back) session_.listen.on_select_complete();
      if (internal_front() == InternalQuery::function_lookup) {
        session_.lookup.finish(worker_->now_ms());
      }
      return true;
    case be::kNoticeResponse:
    case be::kRowDescription:
    case be::kEmptyQueryResponse:
      return true;
    default:
      close(fmt::format("unexpected message '{}' from the server", message.type));
      return false;
  }
}

}  // namespace pgsluice
