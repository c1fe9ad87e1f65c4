// The TLS parts of a client connection's startup (members of Client, kept apart from client.cc):
// the SSLRequest answer, client_tls_sslmode's refusal of plaintext, and auth_type = cert.
#include <spdlog/spdlog.h>

#include "pooler/base/sqlstate.h"
#include "pooler/core/client.h"
#include "pooler/core/worker.h"
#include "pooler/net/tls_session.h"

namespace pgsluice {

bool Client::accept_tls() {
  const TlsContext* ctx = worker_.tls().client.get();
  // As PostgreSQL and PgBouncer: no TLS over a Unix socket (the kernel already is the channel).
  if (ctx == nullptr || !channel_.is_tcp()) return false;
  std::unique_ptr<TlsSession> session = ctx->new_session();
  if (session == nullptr) return false;  // out of memory: the client may go on in plaintext
  // The 'S' goes out unencrypted, then the client starts the handshake; the StartupMessage
  // arrives encrypted, through the same startup state.
  channel_.output().push_back('S');
  channel_.start_tls(std::move(session));
  return true;
}

// A StartupMessage or SSLRequest starts with its length, whose first byte is 0 for any packet a
// client may send; a TLS handshake record starts with 0x16. PostgreSQL 17 tells them apart the
// same way.
constexpr char kTlsHandshakeRecord = 0x16;

bool Client::opens_with_tls_record() {
  if (channel_.tls() != nullptr) return false;
  std::string_view in = channel_.input().unread();
  return !in.empty() && in[0] == kTlsHandshakeRecord;
}

void Client::accept_direct_tls() {
  const TlsContext* ctx = worker_.tls().client.get();
  if (ctx == nullptr || !channel_.is_tcp()) {
    // A plaintext error would be garbage to a TLS client; PostgreSQL logs and closes too.
    spdlog::warn("{} closing: a direct TLS handshake, but {}", who_.log_id,
                 ctx == nullptr ? "TLS is not enabled for clients (client_tls_sslmode = disable)"
                                : "on a Unix socket, which takes no TLS");
    close("direct TLS without client TLS");
    return;
  }
  std::unique_ptr<TlsSession> session = ctx->new_session();
  if (session == nullptr) {
    close("cannot create a TLS session");
    return;
  }
  login_.direct_tls = true;
  channel_.start_tls_on_input(std::move(session));
}

void Client::on_channel_tls_ready(Channel&) {
  // As PostgreSQL 17: direct TLS needs ALPN, so that a TLS client of another protocol, pointed
  // at this port, is not taken for a PostgreSQL client (the SSLRequest path has its own proof).
  if (login_.direct_tls && !channel_.tls()->alpn_is_postgresql()) {
    protocol_violation(
        "received direct SSL connection request without ALPN protocol negotiation extension");
  }
}

bool Client::tls_requirement_met() {
  const TlsContext* ctx = worker_.tls().client.get();
  if (ctx == nullptr || !ctx->required() || channel_.tls() != nullptr || !channel_.is_tcp()) {
    return true;
  }
  // PgBouncer's wording; PostgreSQL's SQLSTATE for a connection its hba rules do not admit.
  fail(sqlstate::kInvalidAuthorizationSpecification, "SSL required");
  return false;
}

void Client::login_by_certificate() {
  TlsSession* tls = channel_.tls();
  // peer_common_name() is empty unless a certificate was sent and verified against
  // client_tls_ca_file.
  std::string name = tls != nullptr ? tls->peer_common_name() : std::string();
  if (!name.empty() && !login_.ident_map.empty() && !ident_permits(name)) {
    // map=: the auth_ident_file says which users this CN may be (PgBouncer's log line).
    spdlog::error("{} ident map: {} does not have a match", who_.log_id, login_.ident_map);
    fail(sqlstate::kInvalidAuthorizationSpecification,
         fmt::format("certificate authentication failed for user \"{}\"", who_.user));
    return;
  }
  if (name.empty() || (login_.ident_map.empty() && name != who_.user)) {
    spdlog::warn("{} login failed: {}", who_.log_id,
                 tls == nullptr ? "auth_type = cert needs a TLS connection"
                 : name.empty() ? "no verified client certificate"
                                : fmt::format("certificate CN \"{}\" is not the user", name));
    fail(sqlstate::kInvalidAuthorizationSpecification,
         fmt::format("certificate authentication failed for user \"{}\"", who_.user));
    return;
  }
  // auth_succeeded() reads the exchange's outcome (SCRAM keys for pass-through): the
  // certificate's is that of trust, no keys.
  login_.auth = std::make_unique<ClientAuth>(AuthType::trust, who_.user, std::nullopt);
  auth_succeeded();
}

}  // namespace pgsluice
