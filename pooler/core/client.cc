// A client connection's life: startup, authentication, greeting, forwarding, close.
#include "pooler/core/client.h"

#include <openssl/rand.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <mutex>
#include <unordered_set>

#include "pgsluice/protocol/frontend.h"
#include "pgsluice/protocol/message_types.h"
#include "pgsluice/protocol/startup.h"
#include "pooler/base/log_level.h"
#include "pooler/base/sqlstate.h"
#include "pooler/config/console_database.h"
#include "pooler/core/auth_query.h"
#include "pooler/core/login_notice.h"
#include "pooler/core/pool.h"
#include "pooler/core/server.h"
#include "pooler/core/session_checks.h"
#include "pooler/core/worker.h"
#include "pooler/net/forwarder.h"
#include "pooler/net/socket_names.h"
#include "pooler/net/tls_session.h"

namespace pgsluice {

namespace pp = pgsluice::protocol;
namespace fe = pgsluice::protocol::frontend;

namespace {
std::string peer_name(Channel& channel) {
  return channel.is_tcp() ? tcp_peer_name(channel.tcp()) : "unix";
}

// The databases the "*" entry made, once each for the process (every worker), for the log line
// PgBouncer writes when it registers one.
bool first_use_of_auto_database(const std::string& name) {
  static std::mutex mutex;
  static std::unordered_set<std::string> seen;
  std::lock_guard lock(mutex);
  return seen.insert(name).second;
}

std::string_view state_name(Client::State s) {
  switch (s) {
    case Client::State::startup:
      return "startup";
    case Client::State::auth:
      return "auth";
    case Client::State::welcome_wait:
      return "welcome_wait";
    case Client::State::idle:
      return "idle";
    case Client::State::waiting:
      return "waiting";
    case Client::State::active:
      return "active";
    case Client::State::closing:
      return "closing";
  }
  return "?";
}

}  // namespace

Client::Client(Worker& worker, uint64_t id)
    : worker_(worker),
      id_(id),
      channel_(worker.loop(), *this, pp::FramePhase::startup, worker.settings().max_packet_size) {
  who_.log_id = fmt::format("C-{}", id);
}

Client::~Client() = default;

void Client::start() {
  who_.peer = peer_name(channel_);
  who_.log_id = fmt::format("C-{} {}", id_, who_.peer);
  who_.connected_ms = last_request_ms_ = worker_.now_ms();
  channel_.start_reading();
}

void Client::set_state(State state) {
  if (state == state_) return;
  // As Server::set_state logs its transitions: one line per change, at debug level.
  if (log_enabled(spdlog::level::debug)) {
    spdlog::debug("{} {} -> {}", who_.log_id, state_name(state_), state_name(state));
  }
  state_ = state;
}

// --- closing (errors: client_pooler_messages.cc) ---

void Client::close(std::string_view reason) {
  close_logged(reason, state_ != State::startup);
}

void Client::close_logged(std::string_view reason, bool log) {
  if (state_ == State::closing) return;
  if (log && worker_.settings().log_disconnections) {
    spdlog::info("{} closing because: {} (age={}s)", who_.log_id, reason,
                 (worker_.now_ms() - who_.connected_ms) / 1000);
  }
  if (pool_ != nullptr) pool_->forget_client(*this);
  if (server_ != nullptr) {
    Server* server = server_;
    server_ = nullptr;
    server->detach_client();
  }
  if (cancel_.registered) worker_.unregister_cancel_key(*this);
  if (login_.lookup_pending) worker_.auth_query().forget(*this);
  leave_relay();
  set_state(State::closing);
  if (close_when_client_closes_) {
    channel_.close_when_peer_closes(/*half_close=*/true);
  } else {
    channel_.close_when_flushed();
  }
}

void Client::on_channel_error(Channel&, int status) {
  if (!channel_.tls_error().empty()) {
    spdlog::info("{} {}", who_.log_id, channel_.tls_error());
    close(channel_.tls_error());
    return;
  }
  // PgBouncer's words for a client gone without Terminate.
  close(status == UV_EOF ? "client unexpected eof"
                         : fmt::format("client connection failed: {}", uv_strerror(status)));
}

void Client::on_channel_closed(Channel&) {
  worker_.on_client_closed(*this);
}

void Client::on_channel_drained(Channel&) {
  // The client took what its server sent: the server may read again.
  if (server_ != nullptr && state_ == State::active) server_->channel().start_reading();
}

void Client::on_server_drained() {
  if (state_ == State::active) channel_.start_reading();
}

// --- input dispatch ---

void Client::on_channel_readable(Channel&) {
  last_request_ms_ = worker_.now_ms();
  process_input();
}

void Client::process_input() {
  switch (state_) {
    case State::startup:
      process_startup_input();
      return;
    case State::auth:
      process_auth_input();
      return;
    case State::idle:
    case State::active:
      process_regular_input();
      return;
    case State::waiting:
      stop_reading_when_queued_input_is_full();
      return;
    case State::welcome_wait:
    case State::closing:
      return;
  }
}

// --- startup ---

void Client::process_startup_input() {
  if (opens_with_tls_record()) {
    accept_direct_tls();
    return;
  }
  while (state_ == State::startup) {
    pp::FrameResult frame = channel_.input().next();
    if (frame.status == pp::FrameStatus::need_more) return;
    if (frame.status == pp::FrameStatus::error) {
      protocol_violation(fmt::format("invalid startup packet: {}", pp::to_string(frame.error)));
      return;
    }
    // A false return ends the startup phase (or the connection); a PasswordMessage that came
    // in the same read as the StartupMessage is handled right below.
    if (!handle_startup_packet(frame.message)) break;
  }
  if (state_ == State::auth) process_auth_input();
}

bool Client::handle_startup_packet(const pp::Message& message) {
  auto packet = pp::parse_startup_packet(message.body);
  if (!packet) {
    protocol_violation(fmt::format("invalid startup packet: {}", pp::to_string(packet.error)));
    return false;
  }
  switch (packet.value.kind) {
    case pp::StartupKind::ssl_request:
    case pp::StartupKind::gssenc_request:
      // Bytes behind the request would be read as if they had come over the encrypted channel
      // (CVE-2021-23214): refuse them.
      if (channel_.input().unread_size() > 0) {
        protocol_violation("unexpected data after an encryption request");
        return false;
      }
      if (channel_.tls() != nullptr) {
        protocol_violation("SSL request inside SSL");
        return false;
      }
      if (packet.value.kind == pp::StartupKind::ssl_request && accept_tls()) return true;
      channel_.output().push_back('N');
      channel_.flush();
      return true;
    case pp::StartupKind::cancel_request:
      handle_cancel_request(packet.value);
      return false;
    case pp::StartupKind::startup_message:
      channel_.input().set_phase(pp::FramePhase::regular);
      // Until login, PostgreSQL's cap on an authentication message (max_packet_size after).
      channel_.input().set_max_length(
          std::min(worker_.settings().max_packet_size, pp::kMaxAuthMessageLength));
      if (!tls_requirement_met()) return false;
      return handle_startup_message(packet.value);
  }
  return false;
}

void Client::handle_cancel_request(const pp::StartupPacket& packet) {
  // The worker holding the client delivers it (this one, or another: the pid tells which).
  worker_.route_cancel(packet.cancel_pid, std::string(packet.cancel_key), who_.log_id);
  // The protocol answers a CancelRequest by closing the connection, never with a message.
  set_state(State::closing);
  channel_.close();
}

bool Client::handle_startup_message(const pp::StartupPacket& packet) {
  const Settings& settings = worker_.settings();
  pp::VersionNegotiation version = pp::negotiate_protocol_version(packet);
  who_.protocol_version = version.accepted_version;
  if (version.send_negotiate) {
    pp::write_negotiate_protocol_version(channel_.output(), version.accepted_version,
                                         version.unrecognized_options);
  }
  who_.user = std::string(packet.parameter("user"));
  who_.database = std::string(packet.parameter("database"));
  if (who_.database.empty()) who_.database = who_.user;
  who_.log_id = fmt::format("C-{} {}@{} {}", id_, who_.user, who_.database, who_.peer);
  if (who_.user.empty()) {
    fail(sqlstate::kInvalidAuthorizationSpecification,
         "no PostgreSQL user name specified in startup packet");
    return false;
  }

  if (!read_replication_parameter(packet)) return false;
  if (!read_startup_parameters(packet)) return false;

  // The admin console is a virtual database (config/console_database.h), never looked up in
  // [databases].
  admin_console_ = is_admin_database(who_.database);
  if (admin_console_ && replication_ != pp::ReplicationMode::none) {
    fail(sqlstate::kFeatureNotSupported,
         "replication connections to the admin console are not supported");
    return false;
  }
  if (!admin_console_) {
    if (auto entry = worker_.config().find_database(who_.database)) {
      login_.db_entry = std::make_unique<DatabaseEntry>(std::move(*entry));
    }
  }
  // An unknown database is told only after the authentication (PgBouncer's way): a client
  // without the password learns nothing about which databases exist (auth_succeeded).
  login_.unknown_database = !admin_console_ && !login_.db_entry;
  if (worker_.group().client_count().load(std::memory_order_relaxed) >
      static_cast<size_t>(settings.max_client_conn)) {
    fail(sqlstate::kTooManyConnections, "no more connections allowed (max_client_conn)");
    return false;
  }
  // max_db/user_client_connections, DISABLE db: refused clients are failed there.
  if (!worker_.extensions().admit(worker_, *this)) return false;

  log_login_attempt();
  begin_authentication();  // client_login.cc
  return false;
}

// --- authentication ---

void Client::process_auth_input() {
  if (!login_.auth) return;  // the secret is still being looked up (auth_query)
  while (state_ == State::auth) {
    pp::FrameResult frame = channel_.input().next();
    if (frame.status == pp::FrameStatus::need_more) return;
    if (frame.status == pp::FrameStatus::error) {
      if (frame.error == pp::ParseError::too_long) {
        refuse_oversized_login_message();
        return;
      }
      protocol_violation(fmt::format("invalid message: {}", pp::to_string(frame.error)));
      return;
    }
    if (frame.message.type != fe::kPasswordMessage) {
      protocol_violation(
          fmt::format("expected a password response, got message type '{}'", frame.message.type));
      return;
    }
    ClientAuth::Result result = login_.auth->on_response(frame.message.body, channel_.output());
    switch (result) {
      case ClientAuth::Result::need_response:
        channel_.flush();
        break;
      case ClientAuth::Result::ok:
        auth_succeeded();
        return;
      case ClientAuth::Result::failed:
        spdlog::warn("{} login failed: {}", who_.log_id, login_.auth->failure_reason());
        note_auth_failure();
        fail(sqlstate::kInvalidPassword,
             fmt::format("password authentication failed for user \"{}\"", who_.user));
        return;
      case ClientAuth::Result::protocol_violation:
        worker_.refusals().malformed_client_auth.fetch_add(1, std::memory_order_relaxed);
        protocol_violation(login_.auth->failure_reason().empty()
                               ? "malformed authentication response"
                               : login_.auth->failure_reason());
        return;
    }
  }
}

void Client::auth_succeeded() {
  channel_.input().set_max_length(worker_.settings().max_packet_size);
  if (admin_console_) {
    // No pool: the console session checks admin_users / stats_users and greets (or fails).
    login_.auth.reset();
    set_state(State::idle);
    admin_ = worker_.extensions().open_console(worker_, *this);
    return;
  }
  if (login_.unknown_database) {
    if (worker_.settings().log_connections) {
      spdlog::info("{} login failed: db={} user={}", who_.log_id, who_.database,
                   who_.user);  // PgBouncer's
    }
    fail(sqlstate::kInvalidCatalogName, fmt::format("no such database: {}", who_.database));
    return;
  }
  // After the authentication, as the pool it makes: unauthenticated names fill nothing.
  if (!worker_.config().databases.contains(who_.database) &&
      first_use_of_auto_database(who_.database)) {
    spdlog::info("{} registered new auto-database: {}", who_.log_id, who_.database);  // PgBouncer's
  }
  pool_ = &worker_.pool_for(*login_.db_entry, who_.user);
  ServerCredentials& cred = pool_->credentials();
  if (login_.secret_from_lookup && cred.user == who_.user && login_.auth->secret()) {
    // auth_query's secret logs the pool in (an MD5 hash, or SCRAM pass-through below); the
    // latest lookup wins, so a password changed on the server reaches the pool too.
    cred.password = *login_.auth->secret();
  }
  if (login_.auth->proven_client_key() && cred.user == who_.user &&
      pp::is_scram_verifier(cred.password)) {
    // SCRAM pass-through: the keys this client proved log the pool in to the server.
    cred.scram_client_key = login_.auth->proven_client_key();
    cred.scram_server_key = login_.auth->proven_server_key();
  }
  login_.auth.reset();
  if (replication_ != pp::ReplicationMode::none) {
    // Session semantics whatever pool_mode says, and none of the statement-level features:
    // a walsender speaks the replication command language and COPY both ways.
    login_.db_entry.reset();
    begin_replication();  // client_replication.cc
    return;
  }
  session_policy_ = worker_.config().session_policy_for(*login_.db_entry, who_.user, pool_->mode());
  login_.db_entry.reset();
  session_checks_ = shares_servers(pool_->mode()) && !session_policy_.all_off();
  listen_.relays = session_checks_ &&
                   session_policy_.action_for(pp::SessionStateKind::listen) == SessionAction::relay;
  set_state(State::welcome_wait);
  wait_started_ms_ = worker_.now_ms();  // query_wait_timeout, and which login failure it hears
  pool_->request_welcome(*this);
  // Reading pauses only while the welcome waits for a server's parameters (the pool's first
  // login): a welcome given at once (on_welcome above, the usual case) then costs no stop and
  // restart of the socket's polling, three epoll_ctl calls per login (docs/profile.md 0g).
  if (state_ == State::welcome_wait) channel_.stop_reading();
}

bool Client::register_for_cancel() {
  if (!worker_.register_cancel_key(*this)) {
    spdlog::error("{} could not generate a random cancel key", who_.log_id);
    fail(sqlstate::kInternalError, "could not generate random cancel key");
    return false;
  }
  cancel_.registered = true;
  return true;
}

void Client::on_welcome(const ParameterSet& server_parameters) {
  if (state_ != State::welcome_wait) return;
  if (!register_for_cancel()) return;
  std::string& out = channel_.output();
  // One allocation for what the server reports (some 14 parameters) rather than five growing
  // ones, whose freed arrays stayed as holes in the heap of a pooler with idle clients.
  params_.reported.add_missing(server_parameters);
  // The whole welcome in one allocation too: AuthenticationOk (9 bytes), a ParameterStatus per
  // parameter (5 + name + value + 2), BackendKeyData (9 + key), the login_notify_message
  // NOTICE (its text and some 25 bytes of fields) and ReadyForQuery (6).
  const std::string& notice = worker_.settings().login_notify_message;
  size_t welcome = 9 + 9 + cancel_.key.size() + (notice.empty() ? 0 : notice.size() + 32) + 6;
  for (const auto& [name, value] : params_.reported.items())
    welcome += 7 + name.size() + value.size();
  out.reserve(out.size() + welcome);
  pp::write_authentication_ok(out);
  for (const auto& [name, value] : params_.reported.items())
    pp::write_parameter_status(out, name, value);
  pp::write_backend_key_data(out, cancel_.pid, cancel_.key);
  write_login_notice(out, notice);
  pp::write_ready_for_query(out, pp::TransactionStatus::idle);
  channel_.flush();
  // PgBouncer's client_login_count: a login that reached its greeting, in its pool.
  ++pool_->stats().totals.client_logins;
  if (worker_.settings().log_connections) spdlog::info("{} login ok", who_.log_id);
  set_state(State::idle);
  channel_.start_reading();
  process_input();
}

void Client::set_cancel_key(int32_t pid, std::string key) {
  cancel_.pid = pid;
  cancel_.key = std::move(key);
}

// --- forwarding ---

void Client::process_regular_input() {
  if (admin_ != nullptr) {
    admin_->on_input();
    return;
  }
  if (replication_ != pp::ReplicationMode::none) {
    if (state_ == State::active) relay_replication_input();
    return;
  }
  // Its ReadyForQuery waits for the LISTEN relay: what it sends meanwhile waits too.
  if (listen_.awaiting) return;
  if (state_ == State::active) {
    // The server reads back the settings the last transaction changed (kept_settings.h): the
    // answer may call for a parameter sync first (a RESET of a setting of the startup packet
    // leaves the server's default there), so the next request waits for it; and nothing runs
    // before the sync has brought the server to this client's state.
    if (server_->holds_client_input()) {
      held_.for_read_back = channel_.input().unread_size() > 0;
      if (channel_.input().unread_size() > kQueuedInputLimit) channel_.stop_reading();
      return;
    }
    forward_to_server();
    return;
  }
  if (state_ != State::idle || !drop_late_copy_messages()) return;
  if (held_.answering && !answer_held_request()) return;
  if (lost_.active && !answer_after_server_loss()) return;
  // Its statement waits for a pin (wait_for_pin): the pool asks again when one may be free.
  if (wait.pin_since_ms != 0 && !wait.on_pin_list && channel_.input().unread_size() > 0) {
    set_state(State::waiting);
    pool_->wait_for_pin(*this);
    return;
  }
  pp::HeaderResult header = channel_.input().peek();
  if (header.status == pp::FrameStatus::need_more) return;
  if (header.status == pp::FrameStatus::error) {
    refuse_bad_header(header);
    return;
  }
  if (header.header.type == fe::kTerminate) {
    close("client close request");  // PgBouncer's words
    return;
  }
  if (refused_type(header.header.type)) {
    refuse_type(header.header.type);
    return;
  }
  // SHUTDOWN WAIT_FOR_SERVERS: a new transaction is never begun (PgBouncer closes the client).
  if (worker_.draining()) {
    fail(sqlstate::kAdminShutdown, kShutdownMessage, kShutdownLogReason);
    return;
  }
  set_state(State::waiting);
  wait_started_ms_ = worker_.now_ms();
  pool_->request_server(*this);
  // Queued: reading goes on (stopping and restarting it would cost two epoll_ctl calls per
  // transaction for every queued client, most of them at 1,000 clients on 20 servers), and
  // stops only when the client sends more than kQueuedInputLimit while it waits
  // (process_input), so that a client whose server is slow to come cannot fill the pooler's
  // memory.
  stop_reading_when_queued_input_is_full();
}

bool Client::refused_type(char type) const {
  return !pp::is_known_message(pp::Direction::frontend, type) || type == fe::kPasswordMessage ||
         (type == fe::kQuery && worker_.disable_pqexec());
}

void Client::stop_reading_when_queued_input_is_full() {
  if (state_ == State::waiting && channel_.input().unread_size() > kQueuedInputLimit) {
    channel_.stop_reading();
  }
}

void Client::on_server_linked(Server& server) {
  server_ = &server;
  set_state(State::active);
  channel_.start_reading();
  // The server is being brought to this client's settings: nothing the client sent may run
  // there before that has succeeded (Server::finish_parameter_sync resumes or refuses it).
  if (server.holds_client_input()) {
    held_.for_read_back = true;
    return;
  }
  forward_to_server();
}

void Client::forward_to_server() {
  pp::FrameReader& in = channel_.input();
  Channel& out = server_->channel();
  std::string* to_server = &out.output();
  Forwarder batch;
  auto flush_batch = [&] { batch.flush(to_server); };

  bool answered_here = false;
  while (state_ == State::active && !wait.on_pin_list) {
    if (passthrough_remaining_ > 0) {
      if (!batch.stream(in, passthrough_remaining_, to_server)) break;
      continue;
    }
    pp::HeaderResult header = in.peek();
    if (header.status == pp::FrameStatus::need_more) break;
    if (header.status == pp::FrameStatus::error) {
      flush_batch();
      out.flush();
      refuse_bad_header(header);
      return;
    }
    char type = header.header.type;
    if (refused_type(type)) {
      flush_batch();  // what came before it goes to the server, as it would have alone
      out.flush();
      refuse_type(type);
      return;
    }
    if (header.header.wire_size() > in.unread_size()) {
      if (header.header.wire_size() > kPassthroughThreshold && may_stream(type)) {
        flush_batch();
        server_->note_client_message(type);
        passthrough_remaining_ = header.header.wire_size();
        continue;
      }
      break;
    }
    const pp::Message message = in.take(header.header);
    prefilter_.forget();
    if (log_enabled(spdlog::level::trace)) {
      spdlog::trace("{} -> '{}' ({} bytes)", who_.log_id, type, message.wire.size());
    }
    if (type == fe::kTerminate) {
      flush_batch();
      out.flush();
      close("client close request");  // PgBouncer's words
      return;
    }
    if (discard_until_sync_) {
      // After an error the pooler gave in PostgreSQL's place, PostgreSQL would skip to Sync.
      if (type != fe::kSync) continue;
      discard_until_sync_ = false;
    }
    if (type == fe::kQuery || type == fe::kParse) {
      if (session_checks_ && refused_by_session_checks(message, batch, *to_server)) continue;
      if (notes_startup_resets()) note_session_mode_resets(message);
    }
    if (!prepared_.refused.empty() && !server_->rewrites_statements() &&
        (type == fe::kParse || type == fe::kBind || type == fe::kClose)) {
      flush_batch();
      if (bind_refused_statement(message, out.output())) {
        server_->note_client_message(type);
        continue;
      }
    }
    if (server_->rewrites_statements() && routes_statement_message(message)) {
      flush_batch();
      switch (route_statement_message(message, out.output())) {
        case Routed::as_is:
          break;
        case Routed::written:
          server_->note_client_message(type, /*queue_reply=*/false);
          continue;
        case Routed::answered:
          // A Query answered here owes no ReadyForQuery from the server.
          if (type != fe::kQuery) server_->note_client_message(type, /*queue_reply=*/false);
          answered_here = true;
          continue;
        case Routed::held:
          // Read again when the server has answered (Server::finish_shape_check_if_answered).
          in.give_back(message);
          held_.for_read_back = true;
          out.flush();
          return;
      }
    }
    std::string_view wire = message.wire;
    server_->note_client_message(type, /*queue_reply=*/true, wire);
    batch.add(wire, to_server);
  }
  flush_batch();
  out.flush();
  // The server (still this client's) cannot take more for now: stop reading until it drains.
  if (server_ != nullptr && out.over_high_water()) channel_.stop_reading();
  if (answered_here) {
    channel_.flush();
    // A DEALLOCATE answered here may have been all the client sent: the link ends as usual.
    if (server_ != nullptr) server_->release_if_nothing_owed();
  }
}

void Client::on_server_released() {
  server_ = nullptr;
  held_.for_read_back = false;  // the next link's sync comes before it
  set_state(State::idle);
  // SIGINT: the transaction this client ran is over; what it sends next is never begun.
  if (worker_.draining()) {
    fail(sqlstate::kAdminShutdown, kShutdownMessage, kShutdownLogReason);
    return;
  }
  if (!deliver_relayed_after_release()) return;
  channel_.start_reading();
  process_regular_input();
}

void Client::resume_input_after_read_back() {
  held_.for_read_back = false;
  channel_.start_reading();
  process_regular_input();
}

void Client::on_server_lost(std::string_view reason) {
  server_ = nullptr;
  if (state_ == State::closing) return;
  fail(sqlstate::kConnectionFailure, fmt::format("server connection lost: {}", reason));
}

void Client::on_server_parameter(std::string_view name, std::string_view value) {
  const std::string* current = params_.reported.get(name);
  if (current != nullptr && *current == value) return;
  params_.reported.set(name, value);
  pp::write_parameter_status(channel_.output(), name, value);
}

}  // namespace pgsluice
