// The TLS parts of a server connection's login (members of Server, kept apart from server.cc):
// the SSLRequest (or direct TLS), its one-byte answer under server_tls_sslmode, and SCRAM channel
// binding.
#include <spdlog/spdlog.h>

#include "pgsluice/protocol/writer.h"
#include "pooler/base/log_level.h"
#include "pooler/base/sqlstate.h"
#include "pooler/core/pool.h"
#include "pooler/core/server.h"
#include "pooler/core/worker.h"
#include "pooler/net/tls_session.h"

namespace pgsluice {

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

}  // namespace pgsluice
