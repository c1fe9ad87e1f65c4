// A server connection's start (members of Server, kept apart from server.cc): connecting (Unix
// socket, address or host name), TLS (the SSLRequest or direct TLS, server_tls_sslmode's answer,
// SCRAM channel binding), the StartupMessage and the login up to the first ReadyForQuery and the
// database's connect_query; and a replication client's walsender, which logs in for one client.
#include <spdlog/spdlog.h>

#include "pgsluice/protocol/backend.h"
#include "pgsluice/protocol/md5.h"
#include "pgsluice/protocol/message_types.h"
#include "pgsluice/protocol/startup.h"
#include "pgsluice/protocol/writer.h"
#include "pooler/base/log_level.h"
#include "pooler/base/sqlstate.h"
#include "pooler/core/client.h"
#include "pooler/core/pool.h"
#include "pooler/core/server.h"
#include "pooler/core/worker.h"
#include "pooler/net/socket_names.h"
#include "pooler/net/socket_options.h"
#include "pooler/net/tls_session.h"

namespace pgsluice {

// ------------------------------------------------------------------------------------------------
// A server connection's start (members of Server, kept apart from server.cc): connecting
// (Unix socket, address or host name), the StartupMessage, and the login (cleartext, MD5 or
// SCRAM, with a password or with SCRAM keys passed through from a client) up to the first
// ReadyForQuery and the database's connect_query.

namespace {
// What a server may send before its login's ReadyForQuery (process_login_input).
constexpr size_t kMaxLoginBytes = 1024 * 1024;
// PgBouncer's close reasons for a connection that could not be made (login_close_reason).
constexpr const char* kDnsFailed = "server DNS lookup failed";
constexpr const char* kConnectFailed = "connect failed";
}  // namespace

namespace pp = pgsluice::protocol;
namespace be = pgsluice::protocol::backend;
// --- connecting ---

void Server::connect() {
  uv_timer_init(worker_->loop(), &handles_.timer);
  handles_.timer.data = this;
  handles_.timer_open = true;
  auto timeout = static_cast<uint64_t>(worker_->settings().server_connect_timeout.count());
  if (timeout > 0) uv_timer_start(&handles_.timer, on_connect_timeout, timeout, 0);

  const ServerAddress& address = address_;
  handles_.connect_req.data = this;
  if (!address.unix_path.empty()) {
    if (channel_.init_pipe() != 0) {
      login_failed(sqlstate::kConnectionFailure, "could not create a socket");
      return;
    }
    handles_.channel_open = true;
    handles_.connecting = true;
    uv_pipe_connect(&handles_.connect_req, channel_.pipe(), address.unix_path.c_str(),
                    on_connected);
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
  handles_.resolve_req.data = this;
  std::string port = std::to_string(address.port);
  if (uv_getaddrinfo(worker_->loop(), &handles_.resolve_req, on_resolved, address.host.c_str(),
                     port.c_str(), &hints) == 0) {
    handles_.resolving = true;
  } else {
    connect_failed(kDnsFailed, fmt::format("could not resolve host \"{}\"", address.host));
  }
}

void Server::on_resolved(uv_getaddrinfo_t* req, int status, addrinfo* res) {
  auto* self = static_cast<Server*>(req->data);
  self->handles_.resolving = false;
  if (self->state_ == State::closing) {
    uv_freeaddrinfo(res);
    self->maybe_destroy();
    return;
  }
  if (status < 0 || res == nullptr) {
    self->connect_failed(kDnsFailed, fmt::format("could not resolve host \"{}\": {}",
                                                 self->address_.host, uv_strerror(status)));
  } else {
    self->start_connect(res->ai_addr);
  }
  uv_freeaddrinfo(res);
}

void Server::start_connect(const sockaddr* addr) {
  // Cancels go to the address this connection reached, not to the name again: CancelSender
  // takes IP literals only (no lookup per cancel), and a name that resolves to several
  // addresses must be cancelled on the one that runs the query.
  char ip[INET6_ADDRSTRLEN] = {};
  if (uv_ip_name(addr, ip, sizeof(ip)) == 0) {
    cancel_address_ = address_;
    cancel_address_.host = ip;
  }
  if (channel_.init_tcp(addr->sa_family) != 0) {
    login_failed(sqlstate::kConnectionFailure, "could not create a socket");
    return;
  }
  handles_.channel_open = true;
  uv_tcp_nodelay(channel_.tcp(), 1);
  channel_.set_send_chunk(static_cast<size_t>(worker_->settings().tcp_socket_buffer));
  // tcp_keepalive and the other TCP options, before the connect as PgBouncer sets them.
  uv_os_fd_t fd = -1;
  if (uv_fileno(reinterpret_cast<uv_handle_t*>(channel_.tcp()), &fd) == 0) {
    if (std::string err = apply_tcp_options(fd, worker_->settings()); !err.empty()) {
      login_failed(sqlstate::kConnectionFailure, "could not set socket options: " + err);
      return;
    }
  }
  handles_.connecting = true;
  int rc = uv_tcp_connect(&handles_.connect_req, channel_.tcp(), addr, on_connected);
  if (rc != 0) {
    handles_.connecting = false;
    connect_failed(kConnectFailed, fmt::format("could not connect to server: {}", uv_strerror(rc)));
  }
}

void Server::on_connected(uv_connect_t* req, int status) {
  auto* self = static_cast<Server*>(req->data);
  self->handles_.connecting = false;
  if (self->state_ == State::closing) return;
  if (status < 0) {
    self->connect_failed(kConnectFailed,
                         fmt::format("could not connect to server {}: {}",
                                     self->address_.to_string(), uv_strerror(status)));
    return;
  }
  if (self->worker_->settings().log_connections) {
    // PgBouncer's line at the same moment (connected, not yet logged in), which its log
    // readers count; the login's end is "login ok".
    if (self->channel_.is_tcp()) {
      spdlog::info("{} new connection to server (from {})", self->log_id(),
                   tcp_local_name(self->channel_.tcp()));
    } else {
      spdlog::info("{} new connection to server", self->log_id());
    }
  }
  self->set_state(State::login);
  if (self->request_tls()) return;  // the StartupMessage follows the handshake
  self->send_startup_message();
}

void Server::send_startup_message() {
  const DatabaseEntry& db = pool_->database();
  std::vector<std::pair<std::string_view, std::string_view>> params;
  params.emplace_back("user", pool_->credentials().user);
  params.emplace_back("database", db.dbname.empty() ? db.name : db.dbname);
  if (!db.client_encoding.empty()) params.emplace_back("client_encoding", db.client_encoding);
  if (!db.datestyle.empty()) params.emplace_back("DateStyle", db.datestyle);
  if (!db.timezone.empty()) params.emplace_back("TimeZone", db.timezone);
  if (!db.application_name.empty()) params.emplace_back("application_name", db.application_name);
  // After the entry's settings, so that the client's own win (PostgreSQL applies the last).
  if (replication_ != pp::ReplicationMode::none) add_replication_parameters(params);
  login_.protocol_version = (3 << 16) | worker_->settings().server_max_protocol_minor;
  login_.answered = false;
  pp::write_startup_message(channel_.output(), login_.protocol_version, params);
  channel_.flush();
  channel_.start_reading();
}

void Server::on_connect_timeout(uv_timer_t* timer) {
  auto* self = static_cast<Server*>(timer->data);
  if (self->state_ == State::connecting || self->state_ == State::login) {
    self->connect_failed("connect timeout",
                         "server_connect_timeout: the server did not complete the login in time");
  }
}

// --- login ---

// The SQLSTATE each caller names goes to a replication client (its own login failed) and decides
// whether the pool's waiting clients hear the failure (08006, a connection that could not be
// made, and 57P03 leave them waiting: Pool::refuses_waiters); they get 08006 with the message
// (as PgBouncer's "server login failed"), and the log line has the message.
void Server::login_failed(std::string_view code, std::string_view message,
                          std::string_view severity) {
  if (state_ == State::closing) return;
  // PgBouncer's words, with PostgreSQL's severity when it refused the login.
  spdlog::warn("{} server login failed: {}{}{}", log_id(), severity, severity.empty() ? "" : " ",
               message);
  if (replication_ != pp::ReplicationMode::none) {
    replication_login_failed(code, message);
    return;
  }
  if (relay_ != nullptr) {
    close(login_close_reason(message));  // the relay tries again, later
    return;
  }
  pool_->on_server_login_failed(*this, code, message);
}

void Server::connect_failed(const char* words, std::string_view message) {
  handles_.connect_failure = words;
  login_failed(sqlstate::kConnectionFailure, message);
}

void Server::refuse_server_login(std::string_view code, std::string_view message) {
  worker_->refusals().server_logins.fetch_add(1, std::memory_order_relaxed);
  login_failed(code, message);
}

void Server::process_login_input() {
  // Until its login's ReadyForQuery a server sends a few hundred bytes (PostgreSQL 18: 17
  // ParameterStatus, BackendKeyData, perhaps a NOTICE). More than kMaxLoginBytes, or one message
  // announcing more, is no PostgreSQL: the login fails (and the host is backed off as for any
  // failed login) before the pooler buffers it.
  channel_.input().set_max_length(kMaxLoginBytes);
  while (state_ == State::login) {
    pp::FrameResult frame = channel_.input().next();
    if (frame.status == pp::FrameStatus::need_more) return;
    if (frame.status == pp::FrameStatus::error) {
      if (frame.error == pp::ParseError::too_long) {
        refuse_server_login(sqlstate::kProtocolViolation,
                            fmt::format("the server sent a message of more than {} bytes during "
                                        "login",
                                        kMaxLoginBytes));
        return;
      }
      login_failed(sqlstate::kProtocolViolation,
                   fmt::format("invalid message from server: {}", pp::to_string(frame.error)));
      return;
    }
    // The connect_query's rows are the operator's own query: not capped.
    if (!login_.connect_query_sent) {
      login_.bytes += frame.message.wire.size();
      if (login_.bytes > kMaxLoginBytes) {
        refuse_server_login(
            sqlstate::kProtocolViolation,
            fmt::format("the server sent more than {} bytes before ReadyForQuery", kMaxLoginBytes));
        return;
      }
    }
    if (!handle_login_message(frame.message)) return;
  }
}

bool Server::handle_login_message(const pp::Message& message) {
  if (message.type == be::kNegotiateProtocolVersion) return handle_negotiation(message);
  login_.answered = true;
  switch (message.type) {
    case be::kAuthentication:
      return handle_authentication(message);
    case be::kParameterStatus: {
      if (++login_.parameter_reports > kMaxServerParameters) {
        refuse_server_login(sqlstate::kProtocolViolation,
                            fmt::format("the server reported more than {} parameters at login",
                                        kMaxServerParameters));
        return false;
      }
      auto ps = pp::parse_parameter_status(message.body);
      if (ps) tracked_.set(ps.value.name, ps.value.value);
      return true;
    }
    case be::kBackendKeyData: {
      auto key = pp::parse_backend_key_data(message.body);
      if (key) {
        login_.backend_pid = key.value.process_id;
        login_.backend_key = std::string(key.value.secret_key);
      }
      return true;
    }
    case be::kNoticeResponse:
      return true;
    case be::kErrorResponse: {
      auto error = pp::parse_error_fields(message.body);
      if (error) {
        login_failed(error.value.code,
                     login_.connect_query_sent
                         ? fmt::format("connect_query failed: {}", error.value.message)
                         : std::string(error.value.message),
                     error.value.severity);
      } else {
        login_failed(sqlstate::kProtocolViolation, "malformed ErrorResponse from server");
      }
      return false;
    }
    case be::kRowDescription:
    case be::kDataRow:
    case be::kCommandComplete:
    case be::kEmptyQueryResponse:
      if (login_.connect_query_sent) return true;  // the connect_query's result, not for anyone
      login_failed(sqlstate::kProtocolViolation,
                   fmt::format("unexpected message '{}' from server during login", message.type));
      return false;
    case be::kReadyForQuery:
      if (replication_ != pp::ReplicationMode::none) {
        // No connect_query (a physical walsender runs no SQL) and no role check: the client
        // asked for this server and decides what it does with it.
        finish_replication_login();
        return false;
      }
      if (!login_.connect_query_sent && !pool_->database().connect_query.empty()) {
        // The server is logged in; it is ready for others once its connect_query has run.
        login_.connect_query_sent = true;
        pp::write_query(channel_.output(), pool_->database().connect_query);
        channel_.flush();
        return true;
      }
      // target_session_attrs: the role the server reported (in_hot_standby,
      // default_transaction_read_only) must fit, or the pool tries another host.
      if (!pool_->accept_role(*this)) return false;
      uv_timer_stop(&handles_.timer);
      channel_.input().set_max_length(pp::kDefaultMaxMessageLength);
      replies_.on_login_ready();
      if (worker_->settings().log_connections) {
        spdlog::info("{} login ok, protocol 3.{}", log_id(), login_.protocol_version & 0xffff);
      }
      if (relay_ != nullptr) {
        // The pool's LISTEN relay connection serves no client: it goes to its relay.
        set_state(State::listening);
        relay_->on_listener_ready(*this);
        return false;
      }
      set_state(State::idle);
      pool_->on_server_login_ok(*this);
      return false;
    default:
      login_failed(sqlstate::kProtocolViolation,
                   fmt::format("unexpected message '{}' from server during login", message.type));
      return false;
  }
}

bool Server::handle_negotiation(const pp::Message& message) {
  // A PostgreSQL older than 18 answers a 3.2 StartupMessage with this, before authentication;
  // the connection then speaks the version it names. Later, or twice, it is no PostgreSQL.
  if (login_.answered) {
    refuse_server_login(sqlstate::kProtocolViolation,
                        "the server sent NegotiateProtocolVersion after its login had begun");
    return false;
  }
  login_.answered = true;
  auto answer = pp::parse_negotiate_protocol_version(message.body);
  if (!answer) {
    refuse_server_login(sqlstate::kProtocolViolation,
                        fmt::format("malformed NegotiateProtocolVersion from server: {}",
                                    pp::to_string(answer.error)));
    return false;
  }
  pp::ServerVersionAnswer accepted =
      pp::accept_server_negotiation(login_.protocol_version, answer.value);
  if (!accepted.error.empty()) {
    refuse_server_login(sqlstate::kProtocolViolation, accepted.error);
    return false;
  }
  login_.protocol_version = accepted.version;
  return true;
}

namespace {
// The secret pgsluice holds cannot answer what the server asks: PgBouncer's "wrong password
// type" first (its users and tools match it), then which secret was missing.
std::string wrong_password_type(std::string_view asks, std::string_view has,
                                const std::string& user) {
  return fmt::format(
      "wrong password type: the server asks for {} and pgsluice has {} for user "
      "\"{}\"",
      asks, has, user);
}
}  // namespace

bool Server::handle_authentication(const pp::Message& message) {
  auto auth = pp::parse_authentication(message.body);
  if (!auth) {
    login_failed(sqlstate::kProtocolViolation, "malformed authentication request from server");
    return false;
  }
  const ServerCredentials& cred = pool_->credentials();
  const std::string& secret = cred.password;
  bool secret_is_plain =
      !secret.empty() && !pp::is_md5_password_hash(secret) && !pp::is_scram_verifier(secret);
  std::string& out = channel_.output();
  switch (auth.value.code) {
    case pp::AuthCode::ok:
      if (login_.scram && !login_.scram->completed()) {
        // PostgreSQL always sends SASLFinal: its signature is what proves the server knows the
        // password (or verifier). Without it anyone could have answered.
        refuse_server_login(sqlstate::kProtocolViolation,
                            "the server ended SCRAM authentication without its signature "
                            "(AuthenticationOk before SASLFinal)");
        return false;
      }
      return true;
    case pp::AuthCode::cleartext_password:
      if (!secret_is_plain) {
        login_failed(sqlstate::kInvalidPassword,
                     wrong_password_type("a cleartext password", "none", cred.user));
        return false;
      }
      pp::write_password_message(out, secret);
      break;
    case pp::AuthCode::md5_password:
      if (secret.empty() || pp::is_scram_verifier(secret)) {
        login_failed(sqlstate::kInvalidPassword,
                     wrong_password_type("an MD5 password", "no password or MD5 hash", cred.user));
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
        login_.scram = pp::ScramClient::with_password(secret);
        login_.scram->set_max_iterations(worker_->settings().scram_max_iterations);
      } else if (cred.scram_client_key && cred.scram_server_key) {
        login_.scram = pp::ScramClient::with_keys(*cred.scram_client_key, *cred.scram_server_key);
        login_.scram->set_max_iterations(worker_->settings().scram_max_iterations);
      } else {
        login_failed(
            sqlstate::kInvalidPassword,
            wrong_password_type("SCRAM", "neither a password nor SCRAM keys proven by a client",
                                cred.user));
        return false;
      }
      std::string_view mechanism = choose_scram_mechanism(offers_plus);
      pp::write_sasl_initial_response(out, mechanism, login_.scram->client_first());
      break;
    }
    case pp::AuthCode::sasl_continue: {
      std::string client_final;
      if (!login_.scram ||
          login_.scram->handle_server_first(auth.value.data, client_final) != pp::ScramStatus::ok) {
        refuse_server_login(sqlstate::kProtocolViolation,
                            "invalid SCRAM server-first-message (or a second one)");
        return false;
      }
      pp::write_sasl_response(out, client_final);
      break;
    }
    case pp::AuthCode::sasl_final:
      if (!login_.scram ||
          login_.scram->handle_server_final(auth.value.data) != pp::ScramStatus::ok) {
        refuse_server_login(sqlstate::kInvalidAuthorizationSpecification,
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

// ------------------------------------------------------------------------------------------------
// The TLS parts of a server connection's login (members of Server, kept apart from server.cc):
// the SSLRequest (or direct TLS), its one-byte answer under server_tls_sslmode, and SCRAM channel
// binding.

namespace pp = pgsluice::protocol;

namespace {

// A context built at its first session (tls_context.h) can fail only then: say why.
std::string tls_session_failure(const TlsContext& ctx) {
  return ctx.build_error().empty() ? "cannot create a TLS session"
                                   : "cannot create a TLS session: " + ctx.build_error();
}

}  // namespace

bool Server::request_tls() {
  const TlsContext* ctx = worker_->tls().server.get();
  // PostgreSQL does not speak TLS over its Unix socket.
  if (ctx == nullptr || !channel_.is_tcp()) return false;
  if (worker_->settings().server_tls_direct) {
    // sslnegotiation=direct: the ClientHello (with ALPN "postgresql") is the first thing sent.
    // Config loading made sure the sslmode requires TLS, so a server that cannot take it fails
    // the login; there is no plaintext to fall back to.
    std::unique_ptr<TlsSession> session = ctx->new_session(address_.host);
    if (session == nullptr) {
      login_failed(sqlstate::kConnectionFailure, tls_session_failure(*ctx));
      return true;
    }
    channel_.start_tls(std::move(session));
    if (!channel_.closing()) channel_.start_reading();
    return true;
  }
  pp::write_ssl_request(channel_.output());
  login_.awaiting_ssl_answer = true;
  channel_.flush();
  channel_.start_reading();
  return true;
}

void Server::handle_ssl_answer() {
  std::string_view in = channel_.input().unread();
  if (in.empty()) return;
  const TlsContext* ctx = worker_->tls().server.get();
  const char answer = in[0];
  if (answer == 'E') {
    // A server that cannot take the connection at all (too many clients, shutting down) answers
    // with an ErrorResponse: the login path reports it.
    login_.awaiting_ssl_answer = false;
    process_login_input();
    return;
  }
  if (answer != 'S' && answer != 'N') {
    login_failed(sqlstate::kProtocolViolation,
                 fmt::format("invalid answer to SSLRequest from server: byte {}",
                             static_cast<int>(static_cast<unsigned char>(answer))));
    return;
  }
  // The server says nothing more before our next message: bytes behind the answer were not
  // encrypted and may come from someone in the middle (CVE-2021-23222). Refuse them.
  if (in.size() > 1) {
    login_failed(sqlstate::kProtocolViolation,
                 "server sent unencrypted data after its answer to SSLRequest");
    return;
  }
  channel_.input().skip(1);
  if (answer == 'N') {
    if (ctx != nullptr && ctx->required()) {
      // Never a silent downgrade: the pool's clients get this as their login error (and the
      // server gets nothing more, not even a Terminate: login_.awaiting_ssl_answer stays set).
      login_failed(sqlstate::kConnectionFailure,
                   fmt::format("server does not support SSL, but server_tls_sslmode = {}",
                               to_string(ctx->mode())));
      return;
    }
    login_.awaiting_ssl_answer = false;
    send_startup_message();
    return;
  }
  login_.awaiting_ssl_answer = false;
  std::unique_ptr<TlsSession> session = ctx != nullptr ? ctx->new_session(address_.host) : nullptr;
  if (session == nullptr) {
    login_failed(sqlstate::kConnectionFailure,
                 ctx != nullptr ? tls_session_failure(*ctx) : "cannot create a TLS session");
    return;
  }
  channel_.start_tls(std::move(session));
}

void Server::on_channel_tls_ready(Channel&) {
  if (state_ != State::login) return;
  if (log_enabled(spdlog::level::debug)) {
    spdlog::debug("{} TLS: {}", log_id(), channel_.tls()->describe());
  }
  send_startup_message();
}

std::string_view Server::choose_scram_mechanism(bool offers_plus) {
  TlsSession* tls = channel_.tls();
  if (tls == nullptr) return "SCRAM-SHA-256";
  std::string binding = offers_plus ? tls->server_end_point() : std::string();
  if (binding.empty()) {
    // "y": we could bind, the server did not offer it (a server that did would see a downgrade).
    login_.scram->set_channel_binding_unused();
    return "SCRAM-SHA-256";
  }
  login_.scram->set_channel_binding(std::move(binding));
  spdlog::debug("{} SCRAM-SHA-256-PLUS with channel binding tls-server-end-point", log_id());
  return "SCRAM-SHA-256-PLUS";
}

// ------------------------------------------------------------------------------------------------
// A replication client's walsender connection (members of Server, kept apart from server.cc;
// the client side is client_replication.cc). PgBouncer 1.23+'s rules: the server is opened for
// one client, with `replication` and the client's startup parameters in its StartupMessage
// (a physical walsender refuses SET, so nothing can be applied after the login), linked to that
// client from the start, never put on the idle list, never given to another client, and closed
// when the client leaves. Its slot counts against pool_size, max_db_connections and
// max_user_connections as any server's does (pool_replication.cc).

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
