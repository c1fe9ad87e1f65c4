// A server connection's life: connect, log in, serve linked clients, be cleaned, close.
#include "pooler/core/server.h"

#include <spdlog/spdlog.h>

#include <chrono>
#include <cstring>

#include "pgsluice/protocol/backend.h"
#include "pgsluice/protocol/md5.h"
#include "pgsluice/protocol/message_types.h"
#include "pgsluice/protocol/startup.h"
#include "pgsluice/protocol/writer.h"
#include "pooler/base/sqlstate.h"
#include "pooler/core/client.h"
#include "pooler/core/pool.h"
#include "pooler/core/session_checks.h"
#include "pooler/core/worker.h"
#include "pooler/net/forwarder.h"

namespace pgsluice {

namespace pp = pgsluice::protocol;
namespace be = pgsluice::protocol::backend;
using protocol::DescribeTarget;
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
    case Server::State::closing:
      return "closing";
  }
  return "?";
}
}  // namespace

Server::Server(Pool& pool, uint64_t id)
    : pool_(pool),
      worker_(pool.worker()),
      id_(id),
      channel_(pool.worker().loop(), *this, pp::FramePhase::regular, pp::kDefaultMaxMessageLength) {
  int max_statements = pool.worker().settings().max_prepared_statements;
  if (pool.mode() == PoolMode::transaction && max_statements > 0) {
    statements_ = std::make_unique<ServerStatementCache>(static_cast<size_t>(max_statements));
  }
}

Server::~Server() = default;

std::string Server::log_id() const {
  return fmt::format("S-{} {}@{} {}", id_, pool_.credentials().user, pool_.database().name,
                     pool_.address().to_string());
}

void Server::set_state(State state) {
  if (state == state_) return;
  if (spdlog::should_log(spdlog::level::debug)) {
    spdlog::debug("{} {} -> {}", log_id(), state_name(state_), state_name(state));
  }
  State old = state_;
  state_ = state;
  pool_.move_server(*this, old, state);
}

bool Server::at_transaction_boundary() const {
  return replies_.at_transaction_boundary() && passthrough_remaining_ == 0;
}

// --- connecting ---

void Server::connect() {
  uv_timer_init(worker_.loop(), &connect_timer_);
  connect_timer_.data = this;
  timer_open_ = true;
  auto timeout = static_cast<uint64_t>(worker_.settings().server_connect_timeout.count());
  if (timeout > 0) uv_timer_start(&connect_timer_, on_connect_timeout, timeout, 0);

  const ServerAddress& address = pool_.address();
  connect_req_.data = this;
  if (!address.unix_path.empty()) {
    if (channel_.init_pipe() != 0) {
      login_failed(sqlstate::kConnectionFailure, "could not create a socket");
      return;
    }
    channel_open_ = true;
    connecting_ = true;
    uv_pipe_connect(&connect_req_, channel_.pipe(), address.unix_path.c_str(), on_connected);
    return;
  }
  sockaddr_storage storage{};
  if (uv_ip4_addr(address.host.c_str(), address.port, reinterpret_cast<sockaddr_in*>(&storage)) ==
          0 ||
      uv_ip6_addr(address.host.c_str(), address.port, reinterpret_cast<sockaddr_in6*>(&storage)) ==
          0) {
    start_connect(reinterpret_cast<const sockaddr*>(&storage));
    return;
  }
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  resolve_req_.data = this;
  std::string port = std::to_string(address.port);
  if (uv_getaddrinfo(worker_.loop(), &resolve_req_, on_resolved, address.host.c_str(), port.c_str(),
                     &hints) == 0) {
    resolving_ = true;
  } else {
    login_failed(sqlstate::kConnectionFailure,
                 fmt::format("could not resolve host \"{}\"", address.host));
  }
}

void Server::on_resolved(uv_getaddrinfo_t* req, int status, addrinfo* res) {
  auto* self = static_cast<Server*>(req->data);
  self->resolving_ = false;
  if (self->state_ == State::closing) {
    uv_freeaddrinfo(res);
    self->maybe_destroy();
    return;
  }
  if (status < 0 || res == nullptr) {
    self->login_failed(sqlstate::kConnectionFailure,
                       fmt::format("could not resolve host \"{}\": {}", self->pool_.address().host,
                                   uv_strerror(status)));
  } else {
    self->start_connect(res->ai_addr);
  }
  uv_freeaddrinfo(res);
}

void Server::start_connect(const sockaddr* addr) {
  if (channel_.init_tcp() != 0) {
    login_failed(sqlstate::kConnectionFailure, "could not create a socket");
    return;
  }
  channel_open_ = true;
  uv_tcp_nodelay(channel_.tcp(), 1);
  connecting_ = true;
  int rc = uv_tcp_connect(&connect_req_, channel_.tcp(), addr, on_connected);
  if (rc != 0) {
    connecting_ = false;
    login_failed(sqlstate::kConnectionFailure,
                 fmt::format("could not connect to server: {}", uv_strerror(rc)));
  }
}

void Server::on_connected(uv_connect_t* req, int status) {
  auto* self = static_cast<Server*>(req->data);
  self->connecting_ = false;
  if (self->state_ == State::closing) return;
  if (status < 0) {
    self->login_failed(sqlstate::kConnectionFailure,
                       fmt::format("could not connect to server {}: {}",
                                   self->pool_.address().to_string(), uv_strerror(status)));
    return;
  }
  self->set_state(State::login);
  if (self->request_tls()) return;  // the StartupMessage follows the handshake
  self->send_startup_message();
}

void Server::send_startup_message() {
  const DatabaseEntry& db = pool_.database();
  std::vector<std::pair<std::string_view, std::string_view>> params;
  params.emplace_back("user", pool_.credentials().user);
  params.emplace_back("database", db.dbname.empty() ? db.name : db.dbname);
  if (!db.client_encoding.empty()) params.emplace_back("client_encoding", db.client_encoding);
  if (!db.datestyle.empty()) params.emplace_back("DateStyle", db.datestyle);
  if (!db.timezone.empty()) params.emplace_back("TimeZone", db.timezone);
  if (!db.application_name.empty()) params.emplace_back("application_name", db.application_name);
  pp::write_startup_message(channel_.output(), pp::kProtocolVersion30, params);
  channel_.flush();
  channel_.start_reading();
}

void Server::on_connect_timeout(uv_timer_t* timer) {
  auto* self = static_cast<Server*>(timer->data);
  if (self->state_ == State::connecting || self->state_ == State::login) {
    self->login_failed(sqlstate::kConnectionFailure,
                       "server_connect_timeout: the server did not complete the login in time");
  }
}

// --- login ---

void Server::login_failed(std::string_view code, std::string_view message) {
  if (state_ == State::closing) return;
  spdlog::warn("{} login failed: {}", log_id(), message);
  pool_.on_server_login_failed(*this, code, message);
}

void Server::process_login_input() {
  while (state_ == State::login) {
    pp::FrameResult frame = channel_.input().next();
    if (frame.status == pp::FrameStatus::need_more) return;
    if (frame.status == pp::FrameStatus::error) {
      login_failed(sqlstate::kProtocolViolation,
                   fmt::format("invalid message from server: {}", pp::to_string(frame.error)));
      return;
    }
    if (!handle_login_message(frame.message)) return;
  }
}

bool Server::handle_login_message(const pp::Message& message) {
  switch (message.type) {
    case be::kAuthentication:
      return handle_authentication(message);
    case be::kParameterStatus: {
      auto ps = pp::parse_parameter_status(message.body);
      if (ps) tracked_.set(ps.value.name, ps.value.value);
      return true;
    }
    case be::kBackendKeyData: {
      auto key = pp::parse_backend_key_data(message.body);
      if (key) {
        backend_pid_ = key.value.process_id;
        backend_key_ = std::string(key.value.secret_key);
      }
      return true;
    }
    case be::kNoticeResponse:
    case be::kNegotiateProtocolVersion:
      return true;
    case be::kErrorResponse: {
      auto error = pp::parse_error_fields(message.body);
      if (error) {
        login_failed(error.value.code, connect_query_sent_ ? fmt::format("connect_query failed: {}",
                                                                         error.value.message)
                                                           : std::string(error.value.message));
      } else {
        login_failed(sqlstate::kProtocolViolation, "malformed ErrorResponse from server");
      }
      return false;
    }
    case be::kRowDescription:
    case be::kDataRow:
    case be::kCommandComplete:
    case be::kEmptyQueryResponse:
      if (connect_query_sent_) return true;  // the connect_query's result, not for anyone
      login_failed(sqlstate::kProtocolViolation,
                   fmt::format("unexpected message '{}' from server during login", message.type));
      return false;
    case be::kReadyForQuery:
      if (!connect_query_sent_ && !pool_.database().connect_query.empty()) {
        // The server is logged in; it is ready for others once its connect_query has run.
        connect_query_sent_ = true;
        pp::write_query(channel_.output(), pool_.database().connect_query);
        channel_.flush();
        return true;
      }
      uv_timer_stop(&connect_timer_);
      replies_.on_login_ready();
      if (worker_.settings().log_connections) spdlog::info("{} login ok", log_id());
      set_state(State::idle);
      pool_.on_server_login_ok(*this);
      return false;
    default:
      login_failed(sqlstate::kProtocolViolation,
                   fmt::format("unexpected message '{}' from server during login", message.type));
      return false;
  }
}

bool Server::handle_authentication(const pp::Message& message) {
  auto auth = pp::parse_authentication(message.body);
  if (!auth) {
    login_failed(sqlstate::kProtocolViolation, "malformed authentication request from server");
    return false;
  }
  const ServerCredentials& cred = pool_.credentials();
  const std::string& secret = cred.password;
  bool secret_is_plain =
      !secret.empty() && !pp::is_md5_password_hash(secret) && !pp::is_scram_verifier(secret);
  std::string& out = channel_.output();
  switch (auth.value.code) {
    case pp::AuthCode::ok:
      return true;
    case pp::AuthCode::cleartext_password:
      if (!secret_is_plain) {
        login_failed(sqlstate::kInvalidPassword,
                     "the server asks for a cleartext password and pgsluice has none for user \"" +
                         cred.user + "\"");
        return false;
      }
      pp::write_password_message(out, secret);
      break;
    case pp::AuthCode::md5_password:
      if (secret.empty() || pp::is_scram_verifier(secret)) {
        login_failed(sqlstate::kInvalidPassword,
                     "the server asks for an MD5 password and pgsluice has no password or MD5 "
                     "hash for user \"" +
                         cred.user + "\"");
        return false;
      }
      pp::write_password_message(out,
                                 pp::md5_salted_response(secret, cred.user, auth.value.md5_salt));
      break;
    case pp::AuthCode::sasl: {
      bool offers_scram = false;
      bool offers_plus = false;
      for (auto m : auth.value.mechanisms) {
        offers_scram |= (m == "SCRAM-SHA-256");
        offers_plus |= (m == "SCRAM-SHA-256-PLUS");
      }
      if (!offers_scram && !(offers_plus && channel_.tls() != nullptr)) {
        login_failed(sqlstate::kFeatureNotSupported,
                     "the server offers no SASL mechanism pgsluice supports");
        return false;
      }
      if (secret_is_plain) {
        scram_ = pp::ScramClient::with_password(secret);
      } else if (cred.scram_client_key && cred.scram_server_key) {
        scram_ = pp::ScramClient::with_keys(*cred.scram_client_key, *cred.scram_server_key);
      } else {
        login_failed(sqlstate::kInvalidPassword,
                     "the server asks for SCRAM and pgsluice has neither a password nor SCRAM "
                     "keys proven by a client for user \"" +
                         cred.user + "\"");
        return false;
      }
      std::string_view mechanism = choose_scram_mechanism(offers_plus);
      pp::write_sasl_initial_response(out, mechanism, scram_->client_first());
      break;
    }
    case pp::AuthCode::sasl_continue: {
      std::string client_final;
      if (!scram_ ||
          scram_->handle_server_first(auth.value.data, client_final) != pp::ScramStatus::ok) {
        login_failed(sqlstate::kProtocolViolation, "invalid SCRAM server-first-message");
        return false;
      }
      pp::write_sasl_response(out, client_final);
      break;
    }
    case pp::AuthCode::sasl_final:
      if (!scram_ || scram_->handle_server_final(auth.value.data) != pp::ScramStatus::ok) {
        login_failed(sqlstate::kInvalidAuthorizationSpecification,
                     "the server's SCRAM signature is wrong");
        return false;
      }
      return true;
    case pp::AuthCode::kerberos_v5:
    case pp::AuthCode::gss:
    case pp::AuthCode::gss_continue:
    case pp::AuthCode::sspi:
      login_failed(sqlstate::kFeatureNotSupported,
                   "the server asks for an authentication method pgsluice does not support");
      return false;
  }
  channel_.flush();
  return true;
}

// --- serving ---

void Server::on_channel_readable(Channel&) {
  switch (state_) {
    case State::connecting:
    case State::closing:
      return;
    case State::login:
      if (awaiting_ssl_answer_) {
        handle_ssl_answer();
        return;
      }
      process_login_input();
      return;
    case State::idle:
    case State::active:
    case State::resetting:
      process_session_input();
      return;
  }
}

void Server::link(Client& client) {
  client_ = &client;
  if (spdlog::should_log(spdlog::level::debug)) {
    spdlog::debug("{} linked to {}", log_id(), client.log_id());
  }
  set_state(State::active);
  linked_at_ms_ = ready_ms_ = worker_.now_ms();
  std::string sync = build_parameter_sync_query(client.tracked_parameters(), tracked_,
                                                client.startup_extras(), extras_);
  if (!sync.empty()) send_internal_query(sync);
  if (worker_.settings().session_state_verify != SessionVerifyMode::off) {
    note_last_client(verifier_, client);
  }
  client.on_server_linked(*this);
}

void Server::send_internal_query(const std::string& sql) {
  if (spdlog::should_log(spdlog::level::debug)) {
    spdlog::debug("{} internal query: {}", log_id(), sql);
  }
  pp::write_query(channel_.output(), sql);
  replies_.on_internal_query();
  channel_.flush();
}

namespace fe = pgsluice::protocol::frontend;

void Server::note_client_message(char type, bool queue_reply, std::string_view wire) {
  if (statements_ != nullptr && queue_reply) {
    size_t queued = replies_.pending().size();
    switch (type) {
      case fe::kParse:
        replies_.pending().push_back(PendingReply{.kind = PendingKind::parse});
        break;
      case fe::kBind:
        replies_.pending().push_back(PendingReply{.kind = PendingKind::bind});
        break;
      case fe::kDescribe:
        replies_.pending().push_back(PendingReply{.kind = PendingKind::describe});
        break;
      case fe::kExecute:
        replies_.pending().push_back(PendingReply{.kind = PendingKind::execute});
        break;
      case fe::kClose:
        replies_.pending().push_back(PendingReply{.kind = PendingKind::close});
        break;
      case fe::kSync:
        replies_.pending().push_back(PendingReply{.kind = PendingKind::sync});
        break;
      case fe::kQuery:
      case fe::kFunctionCall:
        replies_.pending().push_back(PendingReply{.kind = PendingKind::query});
        break;
      default:
        break;
    }
    if (keep_wire_ && replies_.pending().size() > queued && !wire.empty()) {
      replies_.pending().back().wire.assign(wire);
      replies_.pending().back().replayable = true;
    }
  }
  if (type == fe::kQuery || type == fe::kFunctionCall || type == fe::kParse || type == fe::kBind ||
      type == fe::kExecute) {
    timing.on_request();  // stats: the query (and transaction) clock starts, once
  }
  if (type == fe::kQuery || type == fe::kFunctionCall || type == fe::kExecute) {
    ++pool_.counters().queries;
  }
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

  while (state_ == State::active || state_ == State::idle || state_ == State::resetting) {
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
      if (state_ == State::active && replies_.internal_ready_owed() == 0 &&
          header.header.wire_size() > kPassthroughThreshold &&
          may_pass_through(header.header.type)) {
        passthrough_remaining_ = header.header.wire_size();
        continue;
      }
      break;
    }
    pp::FrameResult frame = in.next();
    const pp::Message& message = frame.message;
    if (spdlog::should_log(spdlog::level::trace)) {
      spdlog::trace("S-{} <- '{}' pending {}", id_, message.type, replies_.pending().size());
    }
    if (state_ != State::active || replies_.internal_ready_owed() > 0) {
      flush_batch();
      if (!handle_internal_reply(message)) return;
      continue;
    }
    // A ParameterStatus may make the client write a message of its own: what came before
    // it must be in the client's output first.
    if (message.type == be::kParameterStatus) flush_batch();
    if (statements_ != nullptr) {
      switch (match_pending(message)) {
        case Match::forward:
          break;
        case Match::swallow:
          flush_batch();
          send_made_up_replies();
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
        if (!replies_.pending().empty() && is_made_up(replies_.pending().front().kind)) {
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
    }
  }
  flush_batch();
  if (client_ != nullptr) {
    client_->channel().flush();
    // The client cannot take more for now: stop reading until it drains.
    if (client_->channel().over_high_water()) channel_.stop_reading();
  }
}

Server::Reply Server::inspect_reply(const pp::Message& message) {
  switch (message.type) {
    case be::kReadyForQuery: {
      replies_.on_client_reply(message);
      ready_ms_ = worker_.now_ms();
      // Stats (stats.h): query and transaction times, transactions, bytes; all pool modes.
      timing.on_ready(pool_.stats(), static_cast<char>(replies_.transaction_status()),
                      channel_.bytes_sent(), channel_.bytes_received());
      if (replies_.transaction_status() == TransactionStatus::idle && !at_transaction_boundary() &&
          spdlog::should_log(spdlog::level::debug)) {
        spdlog::debug(
            "{} kept at ReadyForQuery: owed {} internal {} extended {} copy {}/{} "
            "pending {} (front {})",
            log_id(), replies_.client_ready_owed(), replies_.internal_ready_owed(),
            replies_.extended_open(), replies_.copy_in(), replies_.copy_out(),
            replies_.pending().size(),
            replies_.pending().empty() ? -1 : static_cast<int>(replies_.pending().front().kind));
      }
      if (pool_.mode() == PoolMode::transaction && !pinned_ && at_transaction_boundary()) {
        return Reply::forward_and_release;
      }
      return Reply::forward;
    }
    case be::kCopyInResponse:
    case be::kCopyOutResponse:
    case be::kCopyBothResponse:
    case be::kCopyDone:
      replies_.on_client_reply(message);
      return Reply::forward;
    case be::kParameterStatus: {
      auto ps = pp::parse_parameter_status(message.body);
      if (!ps) return Reply::forward;
      tracked_.set(ps.value.name, ps.value.value);
      client_->on_server_parameter(ps.value.name, ps.value.value);
      return Reply::swallow;
    }
    default:
      return Reply::forward;
  }
}

bool Server::handle_internal_reply(const pp::Message& message) {
  if (query_sink_ != nullptr && deliver_query_reply(message)) return true;
  switch (message.type) {
    case be::kParameterStatus: {
      auto ps = pp::parse_parameter_status(message.body);
      if (ps) {
        tracked_.set(ps.value.name, ps.value.value);
        if (client_ != nullptr) client_->on_server_parameter(ps.value.name, ps.value.value);
      }
      return true;
    }
    case be::kReadyForQuery: {
      if (!replies_.on_internal_ready(ReplyQueue::status_of(message)) && state_ == State::idle) {
        close("unexpected ReadyForQuery from an idle server");
        return false;
      }
      if (query_sink_ != nullptr && replies_.internal_ready_owed() == 0) finish_query();
      if (state_ == State::resetting && replies_.internal_ready_owed() == 0) {
        if (internal_failed_ || replies_.transaction_status() != TransactionStatus::idle) {
          close(life.checking ? "server_check_query failed" : "cleaning the server failed");
          return false;
        }
        if (verifier_.awaiting() && finish_verify()) return true;
        set_state(State::idle);
        pool_.on_server_idle(*this);
        return state_ == State::idle || state_ == State::active;
      }
      if (state_ == State::active && replies_.internal_ready_owed() == 0 && client_ != nullptr) {
        // The link's parameter sync may have been all the server owed (the pooler answered
        // the client's DEALLOCATE itself): the link ends here, or nothing else would end it.
        release_if_nothing_owed();
        return state_ != State::closing;
      }
      return true;
    }
    case be::kErrorResponse: {
      auto error = pp::parse_error_fields(message.body);
      std::string text = error ? std::string(error.value.message) : "malformed ErrorResponse";
      if (state_ == State::idle) {
        // An error on an idle connection is the server ending it (shutdown, termination).
        close(fmt::format("server error on an idle connection: {}", text));
        return false;
      }
      internal_failed_ = true;
      spdlog::warn("{} pooler query failed: {}", log_id(), text);
      if (client_ != nullptr) {
        pp::ErrorNotice notice{.severity = "WARNING",
                               .code = error ? error.value.code : sqlstate::kInternalError,
                               .message = text,
                               .detail =
                                   "pgsluice could not apply the session parameters "
                                   "of this client on the server",
                               .hint = {}};
        pp::write_notice_response(client_->channel().output(), notice);
      }
      return true;
    }
    case be::kNotificationResponse:
      if (state_ == State::idle) note_orphan_notification(message);
      return true;
    case be::kDataRow:
      if (verifier_.awaiting()) verifier_.on_data_row(message.body);
      return true;
    case be::kNoticeResponse:
    case be::kRowDescription:
    case be::kCommandComplete:
    case be::kEmptyQueryResponse:
      return true;
    default:
      close(fmt::format("unexpected message '{}' from the server", message.type));
      return false;
  }
}

void Server::release_to_pool() {
  if (client_ != nullptr) {
    Client* client = client_;
    client_ = nullptr;
    client->channel().flush();
    client->on_server_released();
  }
  internal_failed_ = false;
  replies_.forget_client_requests();  // none at a transaction boundary; a leftover: a bug's trace
  reset_retry_state();
  const Settings& settings = worker_.settings();
  if (pool_.mode() == PoolMode::transaction &&
      verify_turn(settings.session_state_verify, settings.session_state_verify_sample)) {
    verifier_.expect();
  }
  const bool reset_always = settings.server_reset_query_always &&
                            !settings.server_reset_query.empty() &&
                            pool_.mode() == PoolMode::transaction;
  if (dirty_.any() || verifier_.awaiting() || reset_always) {
    // Cleaned now rather than when the next client comes, so that a lock or a LISTEN is not
    // held by an idle pooled server.
    clean_and_release(/*session_ended=*/false);
    return;
  }
  set_state(State::idle);
  pool_.on_server_idle(*this);
}

// --- protocol-level prepared statements ---

void Server::expect(PendingReply reply) {
  if (replies_.skipping_to_sync() && is_made_up(reply.kind)) {
    // PostgreSQL skips everything up to the Sync after an error, so it would not have
    // answered this request either; a statement "parsed" here does not exist for the client.
    if (reply.kind == PendingKind::made_parse_complete && client_ != nullptr) {
      client_->forget_statement(reply.client_name, reply.statement_id);
    }
    return;
  }
  replies_.pending().push_back(std::move(reply));
  if (replies_.pending().size() == 1 && is_made_up(replies_.pending().front().kind) &&
      !holding_error_) {
    send_made_up_replies();
  }
}

void Server::prepare_statement(const PreparedStatement& stmt, bool hidden, std::string client_name,
                               std::string& out) {
  std::vector<std::string> to_close;
  pool_.counters().prepared_evictions +=
      statements_->add(stmt.id, stmt.server_name, stmt.generation, to_close, stmt.stats);
  for (std::string& name : to_close) {
    // Closing costs nothing visible: the CloseComplete is swallowed. The client messages it
    // travels with carry the Sync that makes the server answer.
    size_t mark = out.size();
    pp::write_close(out, DescribeTarget::statement, name);
    replies_.pending().push_back(
        PendingReply{.kind = PendingKind::close_hidden, .server_name = std::move(name)});
    keep_request(out, mark);
  }
  size_t mark = out.size();
  pp::write_parse(out, stmt.server_name, stmt.query, stmt.parameter_types);
  replies_.pending().push_back(
      PendingReply{.kind = hidden ? PendingKind::parse_hidden : PendingKind::parse,
                   .statement_id = stmt.id,
                   .client_name = std::move(client_name)});
  keep_request(out, mark);
  ++pool_.counters().server_parse_count;
  ++stmt.stats->server_parses;
}

void Server::forget_statements() {
  if (statements_ != nullptr) statements_->clear();
}

void Server::send_made_up_replies() {
  if (client_ == nullptr || holding_error_) return;
  std::string& out = client_->channel().output();
  while (!replies_.pending().empty() && is_made_up(replies_.pending().front().kind)) {
    PendingReply reply = std::move(replies_.pending().front());
    replies_.pending().pop_front();
    switch (reply.kind) {
      case PendingKind::made_parse_complete:
        pp::write_parse_complete(out);
        break;
      case PendingKind::made_close_complete:
        pp::write_close_complete(out);
        break;
      case PendingKind::made_error:
        out.append(reply.answer);
        break;
      case PendingKind::made_command_done:
        out.append(reply.answer);
        pp::write_ready_for_query(out, replies_.transaction_status());
        break;
      case PendingKind::parse:
      case PendingKind::parse_hidden:
      case PendingKind::parse_duplicate:
      case PendingKind::close_hidden:
      case PendingKind::bind:
      case PendingKind::bind_refused:
      case PendingKind::describe:
      case PendingKind::execute:
      case PendingKind::close:
      case PendingKind::sync:
      case PendingKind::query:
        break;
    }
  }
}

void Server::skip_pending_to_sync() {
  while (!replies_.pending().empty() && replies_.pending().front().kind != PendingKind::sync &&
         replies_.pending().front().kind != PendingKind::query) {
    PendingReply reply = std::move(replies_.pending().front());
    replies_.pending().pop_front();
    if (reply.kind == PendingKind::close_hidden) {
      // The server skipped the Close: the statement is still there, out of the cache.
      statements_->mark_to_close(std::move(reply.server_name));
      continue;
    }
    if (reply.kind == PendingKind::parse || reply.kind == PendingKind::parse_hidden ||
        reply.kind == PendingKind::made_parse_complete) {
      // PostgreSQL skipped that Parse: the statement does not exist there, and a client Parse
      // that "failed" must not leave its name taken.
      if (reply.kind != PendingKind::made_parse_complete) statements_->remove(reply.statement_id);
      if (reply.kind != PendingKind::parse_hidden && client_ != nullptr &&
          !reply.client_name.empty()) {
        client_->forget_statement(reply.client_name, reply.statement_id);
      }
    }
  }
}

Server::Match Server::match_pending(const pp::Message& message) {
  switch (message.type) {
    case be::kParameterStatus:
    case be::kNoticeResponse:
    case be::kNotificationResponse:
      return Match::forward;  // may come at any time
    default:
      break;
  }
  if (holding_error_) return on_ready_after_held_error(message);
  // Whether a stale plan may be retried: ParseComplete and hidden CloseComplete only say that
  // statements exist, which a retry does not change.
  if (message.type != be::kParseComplete && message.type != be::kCloseComplete &&
      message.type != be::kErrorResponse && message.type != be::kReadyForQuery) {
    batch_reached_client_ = true;
  }
  if (replies_.pending().empty()) {
    // A FATAL the server sends on its own (terminated, shutting down) belongs to no request;
    // the client should see PostgreSQL's reason before the connection goes.
    return message.type == be::kErrorResponse ? Match::forward : Match::out_of_step;
  }
  PendingReply& front = replies_.pending().front();
  auto pop = [this] { replies_.pending().pop_front(); };
  switch (message.type) {
    case be::kParseComplete:
      if (front.kind == PendingKind::parse) {
        pop();
        return Match::forward;
      }
      if (front.kind == PendingKind::parse_hidden) {
        pop();
        return Match::swallow;
      }
      return Match::out_of_step;
    case be::kBindComplete:
      if (front.kind != PendingKind::bind) return Match::out_of_step;
      pop();
      return Match::forward;
    case be::kCloseComplete:
      if (front.kind == PendingKind::close) {
        pop();
        return Match::forward;
      }
      if (front.kind == PendingKind::close_hidden) {
        pop();
        return Match::swallow;
      }
      return Match::out_of_step;
    case be::kParameterDescription:
      return front.kind == PendingKind::describe ? Match::forward : Match::out_of_step;
    case be::kRowDescription:
      if (front.kind == PendingKind::describe) {
        pop();
        return Match::forward;
      }
      return front.kind == PendingKind::query ? Match::forward : Match::out_of_step;
    case be::kNoData:
      if (front.kind != PendingKind::describe) return Match::out_of_step;
      pop();
      return Match::forward;
    case be::kCommandComplete:
    case be::kEmptyQueryResponse:
    case be::kPortalSuspended:
      if (front.kind == PendingKind::execute) {
        pop();
        return Match::forward;
      }
      return front.kind == PendingKind::query ? Match::forward : Match::out_of_step;
    case be::kErrorResponse:
      if (front.kind != PendingKind::query) {
        if (front.kind == PendingKind::parse_duplicate) {
          std::string client_name = front.client_name;
          hold_duplicate_error(message, client_name);
        } else if (front.kind == PendingKind::bind_refused) {
          held_error_ = std::move(front.answer);
          // Only now (not when an earlier error made the server skip it) the client has it.
          if (client_ != nullptr) client_->note_stale_plan_seen(*front.statement);
        } else if (front.statement != nullptr && hold_for_retry(message)) {
          return Match::swallow;
        }
        // Until the Sync, the server ignores what the client sends (and sends nothing back).
        skip_pending_to_sync();
        replies_.skip_to_sync();
        if (!held_error_.empty()) return Match::held_error_instead;
      }
      batch_reached_client_ = true;
      return Match::forward;
    case be::kReadyForQuery:
      if (replies_.skipping_to_sync()) {
        // Requests that arrived after the error were skipped by the server too.
        skip_pending_to_sync();
        replies_.stop_skipping();
        if (replies_.pending().empty()) return Match::out_of_step;
      }
      if (replies_.pending().front().kind != PendingKind::sync &&
          replies_.pending().front().kind != PendingKind::query) {
        return Match::out_of_step;
      }
      pop();
      batch_reached_client_ = false;
      if (replies_.pending().empty()) keep_wire_ = false;
      return Match::forward;
    default:
      // DataRow, COPY messages, FunctionCallResponse: inside the current request.
      return Match::forward;
  }
}

void Server::release_if_nothing_owed() {
  if (state_ != State::active || pool_.mode() != PoolMode::transaction || pinned_) return;
  if (!at_transaction_boundary()) return;
  release_to_pool();
}

void Server::detach_client() {
  client_ = nullptr;
  if (state_ != State::active) return;
  if (passthrough_remaining_ > 0 || replies_.request_open()) {
    // Replies are still on their way, and a COPY or a half-sent batch cannot be finished for
    // a client that is gone: closing is the only safe way.
    close("client left in the middle of a request");
    return;
  }
  clean_and_release(/*session_ended=*/true);
}

void Server::clean_and_release(bool session_ended) {
  if (dirty_.needs_close()) {
    close("LOAD cannot be undone on a pooled server");
    return;
  }
  // Each query is its own Query message: DISCARD ALL refuses to run inside the implicit
  // transaction of a multi-statement query.
  if (session_ended && pool_.mode() == PoolMode::transaction && !verifier_.awaiting() &&
      verify_turn(worker_.settings().session_state_verify,
                  worker_.settings().session_state_verify_sample)) {
    verifier_.expect();
  }
  std::vector<std::string> queries;
  if (replies_.transaction_status() != TransactionStatus::idle) queries.emplace_back("ROLLBACK");
  const std::string& reset_query = worker_.settings().server_reset_query;
  // server_reset_query_always: after every transaction in transaction mode too (PgBouncer's).
  if (!reset_query.empty() && ((session_ended && pool_.mode() == PoolMode::session) ||
                               worker_.settings().server_reset_query_always)) {
    queries.push_back(reset_query);
    extras_.clear();  // DISCARD ALL (the usual reset) resets what the pooler applied
  }
  for (std::string& q : dirty_.cleanup_queries()) queries.push_back(std::move(q));
  if (dirty_.resets_all_settings()) {
    extras_.clear();
  } else {
    for (const std::string& name : dirty_.reset_names()) extras_.erase(name);
  }
  dirty_.clear();
  pinned_ = false;
  for (const std::string& q : queries) {
    // These end every prepared statement on the server, the pooler's included.
    if (q.find("DISCARD ALL") != std::string::npos ||
        q.find("DEALLOCATE ALL") != std::string::npos) {
      forget_statements();
    }
    if (q.find("DISCARD ALL") != std::string::npos) verifier_.track().clear();
  }
  // Last, after the cleaning: it sees what the cleaning left.
  if (verifier_.awaiting()) queries.push_back(verify_query(pool_.credentials().user));
  replies_.forget_client_requests();
  reset_retry_state();
  if (queries.empty()) {
    set_state(State::idle);
    pool_.on_server_idle(*this);
    return;
  }
  internal_failed_ = false;
  set_state(State::resetting);
  for (const std::string& q : queries) send_internal_query(q);
}

bool Server::finish_verify() {
  std::vector<VerifyDifference> differences = verifier_.finish(tracked_, extras_);
  if (differences.empty()) return false;
  record_hidden_findings(worker_, *this, differences);
  // DISCARD ALL ends all of it; the next link applies its client's parameters again (the
  // ParameterStatus messages it brings keep tracked_ true, and no startup extra is left).
  extras_.clear();
  forget_statements();
  verifier_.track().clear();
  send_internal_query("DISCARD ALL");
  return true;
}

void Server::mark_dirty(const pp::SessionStateFinding& finding) {
  dirty_.add(finding);
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
                     .database = pool_.database().name,
                     .user = pool_.credentials().user,
                     .application_name = "",
                     .client_addr = "",
                     .source = "server",
                     .statement = ""};
  int64_t now = std::chrono::duration_cast<std::chrono::seconds>(
                    std::chrono::system_clock::now().time_since_epoch())
                    .count();
  if (worker_.findings().record(event, now)) {
    spdlog::warn(
        "{} session state: a notification on channel \"{}\" reached an idle pooled "
        "server: a client LISTENed and left",
        log_id(), channel);
  }
}

void Server::mark_dirty_unknown() {
  dirty_.add_unknown();
}

void Server::cancel_running_query() {
  if (state_ != State::active || backend_key_.empty()) return;
  worker_.send_cancel(pool_.address(), backend_pid_, backend_key_);
}

// --- closing ---

void Server::close(std::string_view reason) {
  if (state_ == State::closing) return;
  if (worker_.settings().log_disconnections) spdlog::info("{} closing: {}", log_id(), reason);
  Client* client = client_;
  client_ = nullptr;
  set_state(State::closing);
  if (client != nullptr) client->on_server_lost(reason);
  abandon_query(reason);
  pool_.on_server_closing();
  if (resolving_) uv_cancel(reinterpret_cast<uv_req_t*>(&resolve_req_));
  // A logged-in server's slot is given back when its backend has gone (it closes the socket
  // after Terminate), so that pg_stat_activity never shows more than the pool size; bounded by
  // kLingerMs. Not while pgsluice stops: nobody needs the slot then.
  const bool linger =
      channel_open_ && !connecting_ && !awaiting_ssl_answer_ && !worker_.stopping() && timer_open_;
  if (timer_open_ && !uv_is_closing(reinterpret_cast<uv_handle_t*>(&connect_timer_))) {
    uv_timer_stop(&connect_timer_);
    if (linger) {
      uv_timer_start(&connect_timer_, on_linger_timeout, kLingerMs, 0);
    } else {
      uv_close(reinterpret_cast<uv_handle_t*>(&connect_timer_), on_timer_closed);
    }
  }
  if (channel_open_) {
    // Terminate tells PostgreSQL this is a clean goodbye, not a lost connection (but not in
    // answer to a refused SSLRequest: nothing goes to that server in plaintext).
    if (!connecting_ && !awaiting_ssl_answer_) {
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
  self->timer_open_ = false;
  self->maybe_destroy();
}

void Server::on_linger_timeout(uv_timer_t* timer) {
  auto* self = static_cast<Server*>(timer->data);
  spdlog::warn("{} the server did not close its connection after Terminate", self->log_id());
  self->channel_.close();
}

void Server::on_channel_closed(Channel&) {
  channel_open_ = false;
  if (state_ == State::closing && timer_open_ &&
      !uv_is_closing(reinterpret_cast<uv_handle_t*>(&connect_timer_))) {
    uv_timer_stop(&connect_timer_);
    uv_close(reinterpret_cast<uv_handle_t*>(&connect_timer_), on_timer_closed);
  }
  maybe_destroy();
}

void Server::maybe_destroy() {
  // Every handle and request of libuv that points here must have called back first.
  if (state_ == State::closing && !timer_open_ && !channel_open_ && !resolving_) {
    pool_.on_server_destroyed();  // its backend is gone: max_db_connections room
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
  close(status == UV_EOF ? "server closed the connection"
                         : fmt::format("server connection failed: {}", uv_strerror(status)));
}

void Server::on_channel_drained(Channel&) {
  // The server took what the client sent: the client may read again.
  if (client_ != nullptr) client_->on_server_drained();
}

}  // namespace pgsluice
