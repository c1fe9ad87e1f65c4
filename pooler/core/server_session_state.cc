// The session-state guard on a server (members of Server, kept apart from server.cc): the
// `keep` action's read-back of settings, the pin and its check, and the `relay` action's LISTEN
// read-back and the pool's listener connection.
#include <spdlog/spdlog.h>

#include <charconv>
#include <utility>

#include "pgsluice/protocol/backend.h"
#include "pgsluice/protocol/writer.h"
#include "pooler/base/log_level.h"
#include "pooler/base/sqlstate.h"
#include "pooler/core/client.h"
#include "pooler/core/listen_relay.h"
#include "pooler/core/pool.h"
#include "pooler/core/server.h"
#include "pooler/core/session_checks.h"
#include "pooler/core/shared_limits.h"
#include "pooler/core/worker.h"

namespace pgsluice {

// ------------------------------------------------------------------------------------------------
// The `keep` action on a server: reading back the settings a client's transaction changed
// (pooler/session_state/kept_settings.h) before the server is released.

namespace pp = pgsluice::protocol;

// PostgreSQL reports a parameter only when its value changes: a client's DateStyle=ISO set on
// a server that has 'ISO, MDY' brings no ParameterStatus, and the client's value would differ
// from the server's at every link, each link setting it again (PgBouncer keeps the canonical
// value for the same reason). The server's value is the one PostgreSQL would have reported to
// the client at its login, so the client is told it too.
void Server::adopt_canonical_values() {
  parameter_sync_owed_ = false;
  if (internal_failed_ || client_ == nullptr) return;
  std::vector<std::pair<std::string, std::string>> adopted;
  for (const auto& [name, value] : client_->tracked_parameters().items()) {
    const std::string_view canonical = tracked_parameter_name(name);
    if (canonical.empty()) continue;
    const std::string* current = tracked_.get(name);
    if (current == nullptr || *current == value) continue;
    // PgBouncer's line for the same step (its varcache_set_canonical, issue #776 there).
    if (log_enabled(spdlog::level::debug)) {
      spdlog::debug("{} varcache_set_canonical: setting {} to its canonical version {} -> {}",
                    client_->log_id(), canonical, value, *current);
    }
    adopted.emplace_back(name, *current);
  }
  for (const auto& [name, value] : adopted) client_->on_server_parameter(name, value);
}

std::string_view Server::server_version() const {
  const std::string* version = tracked_.get("server_version");
  return version != nullptr ? std::string_view(*version) : std::string_view();
}

bool Server::read_back_kept_settings() {
  ParameterSet scratch;  // the client left meanwhile: only the server's side matters
  if (session_.kept.settle_known(pool_->set_values(), server_version(),
                                 client_ != nullptr ? client_->session_settings() : scratch,
                                 extras_)) {
    return false;
  }
  const ParameterSet none;
  std::string query =
      session_.kept.begin_query(client_ != nullptr ? client_->session_settings() : none, extras_);
  if (query.empty()) {
    session_.kept.forget_pending();
    return false;
  }
  // Sent at a transaction boundary with nothing owed: its replies come before anything the
  // client sends next, and the server stays linked until they have come.
  send_internal_query(query, InternalQuery::kept_read_back);
  return true;
}

bool Server::sync_parameters(const Client& client) {
  std::string sync = build_parameter_sync_query(client.tracked_parameters(), tracked_,
                                                client.session_settings(), extras_);
  if (sync.empty()) return false;
  // PgBouncer's name for this step (its varcache_apply sends the SETs of the client's
  // parameters when it links a server), which its log readers and test suite look for.
  // Without a RESET it only sets the client's values (and defaults): a refusal then is the
  // client's settings' own (note_sync_failure).
  send_internal_query(sync, "varcache_apply",
                      sync.find("RESET ") == std::string::npos ? InternalQuery::settings_only
                                                               : InternalQuery::other);
  parameter_sync_owed_ = true;
  held_messages_.sync_failure.clear();
  return true;
}

void Server::resume_client_after_read_back() {
  // Released meanwhile, the client went on at once (Client::on_server_released).
  if (state_ != State::active || client_ == nullptr || session_.kept.awaiting()) return;
  if (!client_->input_held_for_read_back()) return;
  // The sync's answer resumes the client (finish_parameter_sync).
  if (sync_parameters(*client_)) return;
  client_->resume_input_after_read_back();
}

// The client's statements were held back until this answer (Client::on_server_linked): they
// run on this server only when it is in the client's state. A sync that failed (a setting the
// server refuses, a role that no longer exists) leaves the server as the previous client left
// it, or in a state nobody knows: it is closed, and the client's request gets the error instead
// of running anywhere.
bool Server::finish_parameter_sync() {
  parameter_sync_owed_ = false;
  if (held_messages_.sync_failure.empty()) {
    adopt_canonical_values();
    if (client_ != nullptr) client_->note_settings_taken();
    return true;
  }
  std::string error = std::move(held_messages_.sync_failure);
  held_messages_.sync_failure.clear();
  Client* client = client_;
  client_ = nullptr;
  close("could not apply a client's session parameters");
  if (client == nullptr) return false;
  // note_sync_failure wrote a FATAL (its first field) when the client's startup settings are
  // at fault: the session ends as PostgreSQL would have ended its login.
  constexpr std::string_view kFatal = "SFATAL";
  if (std::string_view(error).substr(5, kFatal.size()) == kFatal) {
    client->end_with_startup_error(std::move(error));
  } else {
    client->refuse_held_request(std::move(error));
  }
  return false;
}

namespace {

// What PostgreSQL answers a setting it does not take: a bad value (class 22), an unknown name or
// a missing privilege (class 42), a parameter fixed at server start (55P02). Anything else (the
// server shutting down under the sync) is no fault of the client's settings.
bool refuses_a_setting(std::string_view sqlstate) {
  return sqlstate.starts_with("22") || sqlstate.starts_with("42") || sqlstate == "55P02";
}

}  // namespace

void Server::note_sync_failure(const pp::ErrorFields* error) {
  std::string names;
  if (client_ != nullptr) {
    for (const auto& [name, value] : client_->session_settings().items()) {
      names += names.empty() ? "" : ", ";
      names += name;
    }
  }
  const std::string_view text = error != nullptr ? error->message : "malformed ErrorResponse";
  held_messages_.sync_failure.clear();
  if (client_ != nullptr && !client_->settings_taken() && error != nullptr &&
      internal_front() == InternalQuery::settings_only && refuses_a_setting(error->code)) {
    // The startup packet's settings: PostgreSQL refuses such a login with this error as FATAL
    // (invalid value for parameter "work_mem": "abc"), and so does the pooler, at the first
    // statement since the login itself needed no server.
    pp::write_error_response(held_messages_.sync_failure, pp::ErrorNotice{.severity = "FATAL",
                                                                          .code = error->code,
                                                                          .message = error->message,
                                                                          .detail = error->detail,
                                                                          .hint = error->hint});
    spdlog::warn("{} could not apply the startup parameters of {}: {}; the client is refused",
                 log_id(), client_->log_id(), text);
    return;
  }
  pp::write_error_response(
      held_messages_.sync_failure,
      pp::ErrorNotice{
          .severity = "ERROR",
          .code = error != nullptr ? error->code : sqlstate::kInternalError,
          .message = fmt::format("pgsluice could not apply this session's settings on a "
                                 "server: {}",
                                 text),
          .detail =
              names.empty()
                  ? std::string("The statement was not run.")
                  : fmt::format("The statement was not run. This session's settings: {}.", names),
          .hint = "A setting or role that no server can take any more keeps failing; a new "
                  "connection starts without it."});
  spdlog::warn(
      "{} could not apply the session parameters of {}: {}; the client's statement "
      "is not run, the server is closed",
      log_id(), client_ != nullptr ? client_->log_id() : std::string("a client"), text);
}

bool Server::restore_startup_reported() {
  if (client_ == nullptr) {
    session_.kept.take_reported_resets(ParameterSet());
    return false;
  }
  const ParameterSet* defaults = pool_->welcome();
  std::string sets;
  for (const std::string& name : session_.kept.take_reported_resets(client_->startup_reported())) {
    const std::string* startup = client_->startup_reported().get(name);
    const std::string* now = tracked_.get(name);
    const std::string* fallback = defaults != nullptr ? defaults->get(name) : nullptr;
    // Only where the server is at its own default: a reset rolled back left the client's value.
    if (startup == nullptr || now == nullptr || fallback == nullptr || *now != *fallback ||
        *now == *startup) {
      continue;
    }
    sets += sets.empty() ? "SELECT " : ", ";
    sets += "pg_catalog.set_config(" + quote_literal(name) + ", " + quote_literal(*startup) +
            ", false)";
  }
  if (sets.empty()) return false;
  // Its ParameterStatus tells the client the value, as a direct connection's RESET would.
  send_internal_query(sets);
  parameter_sync_owed_ = true;
  held_messages_.sync_failure.clear();
  return true;
}

void Server::finish_kept_settings() {
  ParameterSet scratch;  // the client left meanwhile: only the server's side matters
  const ParameterSet none;
  const bool answered = session_.kept.finish(
      client_ != nullptr ? client_->startup_extras() : none, pool_->credentials().user,
      client_ != nullptr ? client_->session_settings() : scratch, extras_, &pool_->set_values(),
      server_version());
  if (!answered) {
    // What the server now has is unknown: it must not serve anyone else.
    spdlog::warn("{} could not read back the settings its client kept; closing at release",
                 log_id());
    timing.close_needed = true;
  }
}

// ------------------------------------------------------------------------------------------------
// Pinning without starving (issue 18): a pool's pins are counted over every worker and never
// take its last session_state_pin_reserve servers, and a pinned server is unpinned as soon as
// its session holds nothing that pinned it.

namespace {

// Everything the pin action pins for, counted in one row; 0 means the session could serve
// anyone again (LOAD is never undone: such a server is closed instead, never checked).
constexpr std::string_view kPinCheckQuery =
    "SELECT (SELECT count(*) FROM pg_catalog.pg_locks WHERE locktype = 'advisory' AND pid = "
    "pg_catalog.pg_backend_pid()) + (SELECT count(*) FROM pg_catalog.pg_listening_channels()) + "
    "(SELECT count(*) FROM pg_catalog.pg_prepared_statements WHERE from_sql AND name !~ "
    "'^pgsluice_s[0-9]+$') + (SELECT count(*) "
    "FROM pg_catalog.pg_cursors WHERE is_holdable) + (SELECT count(*) FROM pg_catalog.pg_class "
    "WHERE relnamespace = pg_catalog.pg_my_temp_schema())";

constexpr uint64_t kPinCheckIntervalMs = 1000;

}  // namespace

bool Server::pin(std::string why, bool past_reserve) {
  if (session_.pin.pinned) return true;
  const int limit =
      pool_->pool_size() - (past_reserve ? 0 : worker_->settings().session_state_pin_reserve);
  if (!SharedLimits::try_pin(pool_->limit_slots(), limit)) return false;
  session_.pin.pinned = true;
  session_.pin.why = std::move(why);
  session_.pin.may_end = false;
  session_.pin.checked_ms = worker_->now_ms();
  return true;
}

void Server::forget_other_clients_sequences(const Client& client) {
  if (session_.sequences_of == client.id() || !session_.link_untouched) return;
  send_internal_query("DISCARD SEQUENCES");
  session_.sequences_of = client.id();
}

void Server::unpin() {
  if (!session_.pin.pinned) return;
  session_.pin.pinned = false;
  session_.pin.why.clear();
  session_.pin.may_end = false;
  SharedLimits::unpin(pool_->limit_slots());
}

bool Server::run_due_boundary_checks() {
  // Pinned or not: the server's settings must be known when it is released at last.
  if (session_.kept.any() && read_back_kept_settings()) return true;
  if (session_.kept.resets_reported() && restore_startup_reported()) return true;
  return session_.pin.pinned && check_pin();
}

bool Server::check_pin() {
  if (session_.dirty.needs_close() || session_.pin.check_awaiting) return false;
  const uint64_t now = worker_->now_ms();
  if (!session_.pin.may_end && now < session_.pin.checked_ms + kPinCheckIntervalMs) return false;
  session_.pin.may_end = false;
  session_.pin.checked_ms = now;
  session_.pin.check_awaiting = true;
  session_.pin.check_held = -1;
  send_internal_query(std::string(kPinCheckQuery), InternalQuery::pin_check);
  return true;
}

void Server::on_pin_check_row(std::string_view data_row_body) {
  auto row = protocol::parse_data_row(data_row_body);
  if (!row || row.value.values.size() != 1 || !row.value.values[0]) return;
  const std::string_view text = *row.value.values[0];
  int64_t held = -1;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), held);
  if (ec == std::errc() && end == text.data() + text.size()) session_.pin.check_held = held;
}

void Server::finish_pin_check() {
  session_.pin.check_awaiting = false;
  if (session_.pin.check_held != 0) return;  // still held, or no answer: the pin stays
  if (client_ != nullptr) {
    spdlog::info("{} unpinned from {}: its session holds nothing that pinned it", client_->log_id(),
                 log_id());
  }
  unpin();
}

// ------------------------------------------------------------------------------------------------
// The `relay` action on servers (listen_relay.h): a pooled server's LISTEN read-back at the end of
// the client's transaction, and the pool's listener connection, whose messages go to its relay.

namespace pp = pgsluice::protocol;
using protocol::TransactionStatus;

void Server::sync_listen_channels(const ChannelSet& client_channels) {
  if (!session_.listen.any() || session_.listen.synced()) return;
  // Only where their replies are the next ones, and not in a failed transaction (where the
  // client's statement fails too, and the transaction ends in ROLLBACK).
  if (!owes_nothing() || replies_.transaction_status() == TransactionStatus::failed) return;
  std::string sql = session_.listen.sync_query(
      client_channels, replies_.transaction_status() == TransactionStatus::in_block);
  if (!sql.empty()) send_internal_query(sql);
}

bool Server::quiet_for_notifications() const {
  return state_ == State::active && at_transaction_boundary() &&
         replies_.transaction_status() == TransactionStatus::idle &&
         replies_.internal_ready_owed() == 0;
}

void Server::flush_client_output() {
  if (session_.pin.pinned && quiet_for_notifications()) client_->deliver_relayed();
  client_->channel().flush();
}

void Server::read_back_listen(std::string_view ready_wire) {
  session_.held_ready.assign(ready_wire);
  // At a boundary with nothing owed: its replies come before anything the client sends next.
  send_internal_query(session_.listen.begin_query(), InternalQuery::listen_read_back);
}

void Server::finish_listen_read_back() {
  const ChannelSet none;
  const ChannelSet& before = client_ != nullptr ? client_->listen_channels() : none;
  ChannelSet after;
  if (!session_.listen.finish(before, after)) {
    // The UNLISTEN * of the read-back did not run: the server may still listen.
    spdlog::warn("{} could not read back the channels its client listens on; closing at release",
                 log_id());
    timing.close_needed = true;
  }
  std::string ready = std::move(session_.held_ready);
  session_.held_ready.clear();
  if (client_ != nullptr) client_->on_listen_read_back(std::move(after), std::move(ready));
}

void Server::send_listener_query(const std::string& sql) {
  if (log_enabled(spdlog::level::debug)) spdlog::debug("{} relay query: {}", log_id(), sql);
  pp::write_query(channel_.output(), sql);
  rewrite_.unnamed = {};
  channel_.flush();
}

void Server::process_listener_input() {
  pp::FrameReader& in = channel_.input();
  while (state_ == State::listening) {
    pp::HeaderResult header = in.peek();
    if (header.status == pp::FrameStatus::need_more) return;
    if (header.status == pp::FrameStatus::error) {
      close(fmt::format("invalid message from server: {}", pp::to_string(header.error)));
      return;
    }
    if (header.header.wire_size() > in.unread_size()) return;
    relay_->on_listener_message(*this, in.take(header.header));
  }
}

// The opaque calls deferred until the Query's first reply (Server::defer_call).
void Server::settle_calls(const pp::Message* first_reply) {
  settle_deferred_calls(*worker_, session_.deferred_calls,
                        client_ != nullptr ? client_->log_id() : log_id(), first_reply);
}

}  // namespace pgsluice
