// A server connection's life once logged in: serve linked clients, be cleaned, close (connecting
// and login: server_login.cc; prepared statements and stale plans: server_statements.cc).
#include "pooler/core/server.h"

#include <spdlog/spdlog.h>

#include <chrono>
#include <cstring>

#include "pgsluice/protocol/backend.h"
#include "pgsluice/protocol/message_types.h"
#include "pgsluice/protocol/writer.h"
#include "pooler/base/log_level.h"
#include "pooler/base/sqlstate.h"
#include "pooler/core/client.h"
#include "pooler/core/pool.h"
#include "pooler/core/session_checks.h"
#include "pooler/core/worker.h"
#include "pooler/net/forwarder.h"

namespace pgsluice {

namespace pp = pgsluice::protocol;
namespace be = pgsluice::protocol::backend;
using protocol::TransactionStatus;

namespace {
// Replies that may be streamed to the client before they have fully arrived (forwarder.h).
bool may_pass_through(char type) {
  return type == be::kDataRow || type == be::kCopyData || type == be::kNoticeResponse ||
         type == be::kRowDescription || type == be::kFunctionCallResponse;
}

std::string_view state_name(Server::State s) {
  switch (s) {
    case Server::State::connecting:
      return "connecting";
    case Server::State::login:
      return "login";
    case Server::State::idle:
      return "idle";
    case Server::State::active:
      return "active";
    case Server::State::resetting:
      return "resetting";
    case Server::State::being_canceled:
      return "being_canceled";
    case Server::State::draining:
      return "draining";
    case Server::State::closing:
      return "closing";
    case Server::State::moving:
      return "moving";
    case Server::State::listening:
      return "listening";
    case Server::State::replicating:
      return "replicating";
  }
  return "?";
}
}  // namespace

Server::Server(Pool& pool, uint64_t id, size_t host, ServerAddress address)
    : pool_(&pool),
      worker_(&pool.worker()),
      channel_(pool.worker().loop(), *this, pp::FramePhase::regular, pp::kDefaultMaxMessageLength),
      id_(id),
      host_index_(host),
      address_(std::move(address)),
      cancel_address_(address_) {
  int max_statements = pool.worker().settings().max_prepared_statements;
  if (shares_servers(pool.mode()) && max_statements > 0) {
    rewrite_.cache = std::make_unique<ServerStatementCache>(static_cast<size_t>(max_statements));
  }
}

Server::~Server() {
  if (cancels_) cancels_->server = nullptr;  // a sender's hook may outlive the server
}

std::string Server::log_id() const {
  return fmt::format("S-{} {}@{} {}", id_, pool_->credentials().user, pool_->database().name,
                     address_.to_string());
}

void Server::set_state(State state) {
  if (state == state_) return;
  if (log_enabled(spdlog::level::debug)) {
    spdlog::debug("{} {} -> {}", log_id(), state_name(state_), state_name(state));
  }
  State old = state_;
  state_ = state;
  pool_->move_server(*this, old, state);
  // No reply of the Query will be read as the client's now: its calls count as run. (A
  // draining server still reads them: the first settles them, as while its client was there.)
  if (old == State::active && state != State::draining && !session_.deferred_calls.empty()) {
    settle_calls(nullptr);
  }
}

bool Server::at_transaction_boundary() const {
  return replies_.at_transaction_boundary() && rewrite_.pending.empty() &&
         passthrough_remaining_ == 0;
}

// --- serving ---

void Server::on_channel_readable(Channel&) {
  switch (state_) {
    case State::connecting:
    case State::closing:
    case State::moving:
      return;
    case State::login:
      if (login_.awaiting_ssl_answer) {
        handle_ssl_answer();
        return;
      }
      process_login_input();
      return;
    case State::idle:
    case State::active:
    case State::resetting:
    case State::being_canceled:
    case State::draining:
      process_session_input();
      return;
    case State::listening:
      process_listener_input();
      return;
    case State::replicating:
      process_replication_input();
      return;
  }
}

void Server::link(Client& client) {
  client_ = &client;
  if (log_enabled(spdlog::level::debug)) {
    spdlog::debug("{} linked to {}", log_id(), client.log_id());
  }
  set_state(State::active);
  // The rewriter's cache as the settings say (server_statements.cc), unless it already is, as
  // at nearly every link: a RELOAD or another pool mode changes it.
  const int max_prepared = worker_->settings().max_prepared_statements;
  if (rewrite_.cache == nullptr || max_prepared <= 0 || !shares_servers(pool_->mode()) ||
      rewrite_.cache->capacity() != static_cast<size_t>(max_prepared)) {
    apply_statement_settings();
  }
  linked_at_ms_ = ready_ms_ = worker_->now_ms();
  session_.on_link(client.id());
  // The usual case: the server already has the client's values (a memcmp of each packed set);
  // otherwise the parameter sync is built and sent (server_session_state.cc).
  const bool in_client_state =
      client.tracked_parameters() == tracked_ && client.session_settings() == extras_;
  if (in_client_state || !sync_parameters(client)) client.note_settings_taken();
  if (worker_->settings().session_state_verify != SessionVerifyMode::off) {
    note_last_client(session_.verifier, client);
  }
  client.on_server_linked(*this);
}

void Server::send_internal_query(const std::string& sql, std::string_view what,
                                 InternalQuery whose) {
  if (log_enabled(spdlog::level::debug)) {
    spdlog::debug("{} {}: {}", log_id(), what, sql);
  }
  pp::write_query(channel_.output(), sql);
  replies_.on_internal_query(static_cast<uint8_t>(whose));
  rewrite_.unnamed = {};  // a Query drops the unnamed statement
  channel_.flush();
}

namespace fe = pgsluice::protocol::frontend;

void Server::note_client_message(char type, bool queue_reply, std::string_view wire) {
  if (rewrite_.cache != nullptr && queue_reply) {
    size_t queued = rewrite_.pending.size();
    switch (type) {
      case fe::kParse:
        rewrite_.pending.push_back_default().kind = PendingKind::parse;
        break;
      case fe::kBind:
        rewrite_.pending.push_back_default().kind = PendingKind::bind;
        break;
      case fe::kDescribe:
        rewrite_.pending.push_back_default().kind = PendingKind::describe;
        break;
      case fe::kExecute:
        rewrite_.pending.push_back_default().kind = PendingKind::execute;
        break;
      case fe::kClose:
        rewrite_.pending.push_back_default().kind = PendingKind::close;
        break;
      case fe::kSync:
        rewrite_.pending.push_back_default().kind = PendingKind::sync;
        break;
      case fe::kQuery:
      case fe::kFunctionCall:
        rewrite_.note_query();
        break;
      default:
        break;
    }
    if (rewrite_.retry.keep_wire && rewrite_.pending.size() > queued && !wire.empty()) {
      rewrite_.pending.back().wire.assign(wire);
      rewrite_.pending.back().replayable = true;
    }
  }
  if (type == fe::kQuery || type == fe::kFunctionCall || type == fe::kParse || type == fe::kBind ||
      type == fe::kExecute) {
    timing.on_request(worker_->turn_now_us(), pool_->counters());  // the query's clock starts
    if (type == fe::kQuery && rewrite_.cache != nullptr) {         // it drops the unnamed statement
      rewrite_.unnamed = {};
      if (client_ != nullptr) client_->forget_unnamed_statement();
    }
  }
  session_.link_untouched = false;
  replies_.on_client_message(type);
}

void Server::process_session_input() {
  pp::FrameReader& in = channel_.input();
  // Consecutive replies for the client are collected as one range and appended in one go.
  // The client is looked up at each step: a release at ReadyForQuery ends the link, and the
  // next waiting client may be linked before this loop ends.
  auto client_output = [this] {
    return client_ != nullptr ? &client_->channel().output() : nullptr;
  };
  Forwarder batch;
  auto flush_batch = [&] { batch.flush(client_output()); };
  auto forward = [&](std::string_view wire) { batch.add(wire, client_output()); };

  while (forwards_replies() || state_ == State::resetting || serves_nobody()) {
    if (passthrough_remaining_ > 0) {
      if (!batch.stream(in, passthrough_remaining_, client_output())) break;
      continue;
    }
    pp::HeaderResult header = in.peek();
    if (header.status == pp::FrameStatus::need_more) break;
    if (header.status == pp::FrameStatus::error) {
      flush_batch();
      close(fmt::format("invalid message from server: {}", pp::to_string(header.error)));
      return;
    }
    if (header.header.wire_size() > in.unread_size()) {
      if (!stream_reply(header.header)) break;
      continue;
    }
    const pp::Message message = in.take(header.header);
    if (log_enabled(spdlog::level::trace)) {
      spdlog::trace("S-{} <- '{}' pending {}", id_, message.type, rewrite_.pending.size());
    }
    if (!forwards_replies() || replies_.internal_ready_owed() > 0) {
      flush_batch();
      if (!handle_internal_reply(message)) return;
      continue;
    }
    // A ParameterStatus may make the client write a message of its own: what came before
    // it must be in the client's output first.
    if (message.type == be::kParameterStatus) flush_batch();
    if (rewrite_.cache != nullptr && !rewrite_.take_plain_query_reply(message.type)) {
      switch (match_pending(message)) {
        case Match::forward:
          break;
        case Match::swallow:
          flush_batch();
          send_made_up_replies();
          // The answer to the pooler's Describe: the client's Bind goes on.
          if (rewrite_.shape_check != nullptr) finish_shape_check_if_answered();
          continue;
        case Match::out_of_step:
          flush_batch();
          close(fmt::format("reply '{}' out of step with the requests", message.type));
          return;
        case Match::held_error_first:
          flush_batch();
          send_held_error();
          break;
        case Match::held_error_instead:
          flush_batch();
          send_held_error();
          send_made_up_replies();
          continue;
      }
    }
    Reply action = inspect_reply(message);
    switch (action) {
      case Reply::forward:
        forward(message.wire);
        if (!rewrite_.pending.empty() && is_made_up(rewrite_.pending.front().kind)) {
          flush_batch();
          send_made_up_replies();
        }
        break;
      case Reply::swallow:
        flush_batch();
        break;
      case Reply::forward_and_release:
        forward(message.wire);
        flush_batch();
        release_to_pool();
        break;
      case Reply::replace:
        flush_batch();
        if (client_ != nullptr) client_->channel().output().append(held_messages_.replacement);
        break;
    }
    if (rewrite_.shape_check != nullptr) {
      flush_batch();
      finish_shape_check_if_answered();
    }
  }
  flush_batch();
  if (client_ != nullptr) {
    flush_client_output();
    // The client cannot take more for now: stop reading until it drains. (A failed flush, the
    // client resetting the connection, has closed the client and unlinked it already.)
    if (client_ != nullptr && client_->channel().over_high_water()) channel_.stop_reading();
  }
}

bool Server::stream_reply(const pp::MessageHeader& header) {
  if (!forwards_replies() || replies_.internal_ready_owed() > 0 ||
      header.wire_size() <= kPassthroughThreshold || !may_pass_through(header.type)) {
    return false;
  }
  passthrough_remaining_ = header.wire_size();
  return true;
}

bool Server::refuses_transaction_block(const pp::Message& message) const {
  if (message.type != be::kReadyForQuery || pool_->mode() != PoolMode::statement) return false;
  auto ready = pp::parse_ready_for_query(message.body);
  return !ready || ready.value.transaction_status() != TransactionStatus::idle;
}

Server::Reply Server::refuse_transaction_block() {
  // As PgBouncer: the server is closed (PostgreSQL rolls the block back) and its client with
  // it, FATAL 08P01. The replies before this ReadyForQuery (BEGIN's CommandComplete) are not
  // forwarded: the client's link ends here, and the FATAL says why.
  constexpr std::string_view kReason = "transaction blocks not allowed in statement pooling mode";
  Client* client = client_;
  client_ = nullptr;  // the client is failed with the reason, not told the server was lost
  close(kReason);
  if (client != nullptr) client->fail(sqlstate::kProtocolViolation, kReason);
  return Reply::swallow;  // the session input loop ends: the server is closing
}

Server::Reply Server::inspect_reply(const pp::Message& message) {
  if (!session_.deferred_calls.empty() && message.type != be::kNoticeResponse &&
      message.type != be::kParameterStatus && message.type != be::kNotificationResponse) {
    settle_calls(&message);
  }
  switch (message.type) {
    case be::kReadyForQuery: {
      if (refuses_transaction_block(message)) return refuse_transaction_block();
      replies_.on_client_reply(message);
      ready_ms_ = worker_->now_ms();
      // Stats (stats.h): query and transaction times, transactions, bytes; all pool modes.
      timing.on_ready(pool_->stats(), static_cast<char>(replies_.transaction_status()),
                      channel_.bytes_sent(), channel_.bytes_received(), worker_->turn_now_us());
      if (finish_drain_if_done()) return Reply::swallow;
      if (replies_.transaction_status() == TransactionStatus::idle && !at_transaction_boundary() &&
          log_enabled(spdlog::level::debug)) {
        spdlog::debug(
            "{} kept at ReadyForQuery: owed {} internal {} extended {} copy {}/{} "
            "pending {} (front {})",
            log_id(), replies_.client_ready_owed(), replies_.internal_ready_owed(),
            replies_.extended_open(), replies_.copy_in(), replies_.copy_out(),
            rewrite_.pending.size(),
            rewrite_.pending.empty() ? -1 : static_cast<int>(rewrite_.pending.front().kind));
      }
      if (shares_servers(pool_->mode()) && at_transaction_boundary()) {
        // The client's ReadyForQuery waits for its channels (relay): server_session_state.cc.
        if (session_.listen.any() && client_ != nullptr) {
          read_back_listen(message.wire);
          return Reply::swallow;
        }
        if (run_boundary_checks()) return Reply::forward;
        if (!session_.pin.pinned) return Reply::forward_and_release;
      }
      // Session mode: a reset startup setting gets its startup value back, its ParameterStatus
      // telling the client; what the client sends meanwhile waits (holds_client_input).
      if (session_.kept.resets_reported() && at_transaction_boundary()) restore_startup_reported();
      return Reply::forward;
    }
    case be::kCopyInResponse:  // the Syncs owed now are ignored by PostgreSQL (reply_queue.h)
      rewrite_.forget_pending_syncs();
      [[fallthrough]];
    case be::kCopyOutResponse:
    case be::kCopyBothResponse:
    case be::kCopyDone:
      replies_.on_client_reply(message);
      return Reply::forward;
    case be::kErrorResponse:
      // A SET that failed, or a statement after it: what the SETs gave is read back.
      session_.kept.forget_literals();
      if (swallow_server_fatal(message)) return Reply::swallow;
      if (rename_sql_error(message)) return Reply::replace;
      return strip_refusal_context(message) ? Reply::replace : Reply::forward;
    case be::kCommandComplete:
      if (session_.listen.any()) session_.listen.on_client_command_complete(message.body);
      return Reply::forward;
    case be::kNotificationResponse:
      // Under relay the client's notifications come from the pool's listener: one that this
      // server got (its client's LISTEN committed, the read-back not yet run) is not sent twice.
      return client_ != nullptr && client_->relays_listen() ? Reply::swallow : Reply::forward;
    case be::kParameterStatus: {
      auto ps = pp::parse_parameter_status(message.body);
      if (!ps) return Reply::forward;
      if (!may_track_parameter(ps.value.name)) return Reply::swallow;
      tracked_.set(ps.value.name, ps.value.value);
      if (client_ != nullptr) client_->on_server_parameter(ps.value.name, ps.value.value);
      return Reply::swallow;
    }
    default:
      return Reply::forward;
  }
}

bool Server::may_track_parameter(std::string_view name) {
  // PostgreSQL reports a few dozen parameters at most (GUC_REPORT ones); a server that reports
  // thousands of names would make every report cost more (the sets are sorted and compared
  // whole). Beyond the cap new names are dropped, once logged; known ones still update.
  if (tracked_.size() < kMaxServerParameters || tracked_.get(name) != nullptr) return true;
  if (!std::exchange(login_.parameter_cap_logged, true)) {
    spdlog::warn("{} reports more than {} parameters: new ones are ignored", log_id(),
                 kMaxServerParameters);
  }
  return false;
}

bool Server::strip_refusal_context(const pp::Message& error) {
  // The common error costs one comparison of its body's start: the refusal's SQLSTATE field.
  constexpr std::string_view kCode = "C0A000";
  if (error.body.find(kCode) == std::string_view::npos) return false;
  auto fields = pp::parse_error_fields(error.body);
  if (!fields || fields.value.code != sqlstate::kFeatureNotSupported ||
      !fields.value.message.starts_with("pgsluice refused")) {
    return false;
  }
  held_messages_.replacement.clear();
  pp::MessageWriter w(held_messages_.replacement, be::kErrorResponse);
  for (const auto& [type, value] : fields.value.fields) {
    if (type != 'W') w.i8(static_cast<uint8_t>(type)).cstring(value);
  }
  w.i8(0).end();
  return true;
}

bool Server::finish_verify() {
  std::vector<VerifyDifference> differences = session_.verifier.finish(tracked_, extras_);
  if (differences.empty()) return false;
  record_hidden_findings(*worker_, *this, differences);
  // DISCARD ALL ends all of it; the next link applies its client's parameters again (the
  // ParameterStatus messages it brings keep tracked_ true, and no startup extra is left).
  extras_.clear();
  forget_statements();
  session_.verifier.track().clear();
  send_internal_query("DISCARD ALL");
  return true;
}

void Server::mark_dirty(const pp::SessionStateFinding& finding) {
  session_.dirty.add(finding);
}

void Server::note_orphan_notification(const pp::Message& message) {
  // A notification on a server nobody is linked to: some client LISTENed on it and left it
  // listening. The server itself is the evidence, whatever the SQL checks saw.
  auto n = pp::parse_notification_response(message.body);
  std::string channel = n ? std::string(n.value.channel) : std::string();
  FindingEvent event{.kind = "listen",
                     .detail = channel,
                     .certainty = "definite",
                     .action = "warn",
                     .database = pool_->database().name,
                     .user = pool_->credentials().user,
                     .application_name = "",
                     .client_addr = "",
                     .source = "server",
                     .statement = ""};
  int64_t now = std::chrono::duration_cast<std::chrono::seconds>(
                    std::chrono::system_clock::now().time_since_epoch())
                    .count();
  if (worker_->findings().record(event, now)) {
    spdlog::warn(
        "{} session state: a notification on channel \"{}\" reached an idle pooled "
        "server: a client LISTENed and left",
        log_id(), channel);
  }
}

void Server::mark_dirty_unknown() {
  session_.dirty.add_unknown();
}

// --- closing ---

void Server::close(std::string_view reason) {
  // A moving server is on no list and belongs to the worker it goes to once it arrives.
  if (state_ == State::closing || state_ == State::moving) return;
  // PgBouncer's shape (Client::close).
  if (worker_->settings().log_disconnections) {
    // Another worker's loop may have stamped a server that moved here: never a negative age.
    const uint64_t now = worker_->now_ms();
    spdlog::info("{} closing because: {} (age={}s)", log_id(), reason,
                 now > timing.connect_ms ? (now - timing.connect_ms) / 1000 : 0);
  }
  Client* client = client_;
  client_ = nullptr;
  set_state(State::closing);
  unpin();
  if (client != nullptr) client->on_server_lost(reason);
  abandon_query(reason);
  if (relay_ != nullptr) {
    relay_->on_listener_closed(*this);  // no slot to replace: the relay reconnects itself
  } else {
    pool_->on_server_closing();
  }
  if (handles_.resolving) uv_cancel(reinterpret_cast<uv_req_t*>(&handles_.resolve_req));
  // A logged-in server's slot is given back when its backend has gone (it closes the socket
  // after Terminate), so that pg_stat_activity never shows more than the pool size; bounded by
  // kLingerMs. Not while pgsluice stops: nobody needs the slot then.
  const bool linger = handles_.channel_open && !handles_.connecting &&
                      !login_.awaiting_ssl_answer && !worker_->stopping() && handles_.timer_open;
  if (handles_.timer_open && !uv_is_closing(reinterpret_cast<uv_handle_t*>(&handles_.timer))) {
    uv_timer_stop(&handles_.timer);
    if (linger) {
      uv_timer_start(&handles_.timer, on_linger_timeout, kLingerMs, 0);
    } else {
      uv_close(reinterpret_cast<uv_handle_t*>(&handles_.timer), on_timer_closed);
    }
  }
  if (handles_.channel_open) {
    // Terminate tells PostgreSQL this is a clean goodbye, not a lost connection (but not in
    // answer to a refused SSLRequest: nothing goes to that server in plaintext).
    if (!handles_.connecting && !login_.awaiting_ssl_answer) {
      pp::write_terminate(channel_.output());
      if (linger) {
        channel_.close_when_peer_closes();
      } else {
        channel_.close_when_flushed();
      }
    } else {
      channel_.close();
    }
  }
  maybe_destroy();
}

void Server::on_timer_closed(uv_handle_t* handle) {
  auto* self = static_cast<Server*>(handle->data);
  self->handles_.timer_open = false;
  self->maybe_destroy();
}

void Server::on_linger_timeout(uv_timer_t* timer) {
  auto* self = static_cast<Server*>(timer->data);
  spdlog::warn("{} the server did not close its connection after Terminate", self->log_id());
  self->channel_.close();
}

void Server::on_channel_closed(Channel&) {
  handles_.channel_open = false;
  if (state_ == State::closing && handles_.timer_open &&
      !uv_is_closing(reinterpret_cast<uv_handle_t*>(&handles_.timer))) {
    uv_timer_stop(&handles_.timer);
    uv_close(reinterpret_cast<uv_handle_t*>(&handles_.timer), on_timer_closed);
  }
  maybe_destroy();
}

void Server::maybe_destroy() {
  // Every handle and request of libuv that points here must have called back first.
  if (state_ == State::moving) {
    if (!handles_.timer_open && !handles_.channel_open) finish_move_out();
    return;
  }
  if (state_ == State::closing && !handles_.timer_open && !handles_.channel_open &&
      !handles_.resolving) {
    // Its backend is gone: max_db_connections room (the listener took no slot).
    if (relay_ == nullptr) pool_->on_server_destroyed();
    delete this;
  }
}

void Server::on_channel_error(Channel&, int status) {
  if (!channel_.tls_error().empty()) {
    if (state_ == State::login || state_ == State::connecting) {
      login_failed(sqlstate::kConnectionFailure, channel_.tls_error());
    } else {
      close(channel_.tls_error());
    }
    return;
  }
  if (state_ == State::login || state_ == State::connecting) {
    login_failed(sqlstate::kConnectionFailure,
                 fmt::format("server closed the connection during login: {}",
                             status == UV_EOF ? "end of file" : uv_strerror(status)));
    return;
  }
  lose(status);
}

void Server::on_channel_drained(Channel&) {
  // The server took what the client sent: the client may read again.
  if (client_ != nullptr) client_->on_server_drained();
}

// ------------------------------------------------------------------------------------------------
// A server connection lost while linked (the backend terminated, PostgreSQL crashed or shut
// down): the client keeps its connection when it can carry on (client_lost_server.h). The
// forwarding above only hands its FATAL and its loss here.
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

bool Server::swallow_server_fatal(const pp::Message& error) {
  // PostgreSQL sends the severity first: most errors cost this comparison only.
  if (!error.body.starts_with("SFATAL") || !client_may_carry_on()) return false;
  auto fields = pp::parse_error_fields(error.body);
  if (!fields) return false;
  // The connection ends next. A client that stays must not see a FATAL (a client library may
  // take it for the end of its connection): it gets the error when the connection goes, as an
  // ERROR, in answer to its request (its next one, when none is in flight).
  held_messages_.loss_code = std::string(fields.value.code);
  held_messages_.loss_message = std::string(fields.value.message);
  return true;
}

bool Server::client_may_carry_on() const {
  if (state_ != State::active || client_ == nullptr) return false;
  if (pool_->mode() == PoolMode::session || session_.pin.pinned) return false;
  if (replies_.copy() != ReplyQueue::Copy::none || client_->mid_message()) return false;
  if (passthrough_remaining_ > 0) return false;
  if (replies_.internal_ready_owed() > 0 || parameter_sync_owed_) return false;
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
  loss.code =
      held_messages_.loss_code.empty() ? sqlstate::kConnectionFailure : held_messages_.loss_code;
  loss.message = held_messages_.loss_code.empty()
                     ? fmt::format("server connection lost: {}", reason)
                     : held_messages_.loss_message;
  if (rewrite_.cache != nullptr) drop_pending_replies();
  Client* client = client_;
  client_ = nullptr;  // told below, not failed by close()
  close(reason);      // may delete this
  client->keep_after_server_loss(loss);
}

}  // namespace pgsluice
