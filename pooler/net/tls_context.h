// The TLS configuration of each side, built from client_tls_* and server_tls_*: an OpenSSL
// SSL_CTX (certificate, key, CA, protocol range, ciphers, verification) and the sslmode. Files are
// read here, at startup, so that a missing key is an error before the first client arrives, and
// again at every RELOAD/SIGHUP (Worker::reload): new connections take the new contexts, and the
// sessions of open connections keep the one they started with (SSL_new holds a reference on its
// SSL_CTX); a context that cannot be built leaves the one in use in place. Towards servers, a side
// with nothing to check (no files, the default ciphers) builds its SSL_CTX at its first session
// instead (can_wait in tls_context.cc): most PostgreSQL servers a pooler meets on a host or in a
// cluster network have no TLS, and the context costs 2 MB of memory.
#pragma once

#include <openssl/ssl.h>

#include <memory>
#include <mutex>
#include <string>
#include <string_view>

#include "pooler/config/config.h"

namespace pgsluice {

class TlsSession;

class TlsContext {
 public:
  // accept: pgsluice is the TLS server (towards clients); connect: the TLS client (towards
  // PostgreSQL).
  enum class Role { accept, connect };

  // The context for one side; nullptr when its sslmode is disable (then `error` stays empty) or
  // when a setting or file is wrong (`error` says which).
  static std::shared_ptr<const TlsContext> create(Role role, const TlsSettings& settings,
                                                  std::string& error);
  TlsContext(const TlsContext&) = delete;
  TlsContext& operator=(const TlsContext&) = delete;
  ~TlsContext();

  [[nodiscard]] Role role() const { return role_; }
  [[nodiscard]] SslMode mode() const { return mode_; }
  // require, verify-ca and verify-full: a connection without TLS is refused.
  [[nodiscard]] bool required() const { return mode_ >= SslMode::require; }

  // A session for one connection, or nullptr when OpenSSL cannot make one (then, for a context
  // built at its first use, build_error() says why). For the connect role, `host` is the
  // server's host: sent as SNI when it is a name, and checked against the certificate under
  // verify-full. Safe to call from every worker.
  [[nodiscard]] std::unique_ptr<TlsSession> new_session(std::string_view host = {}) const;
  // Whether the SSL_CTX exists yet (tests; see can_wait in tls_context.cc).
  [[nodiscard]] bool built() const { return ctx_ != nullptr; }
  [[nodiscard]] const std::string& build_error() const { return build_error_; }

 private:
  TlsContext(Role role, const TlsSettings& settings)
      : role_(role), mode_(settings.sslmode), settings_(settings) {}
  SSL_CTX* ssl_ctx() const;  // built on the first call when create() left it for later

  Role role_;
  SslMode mode_;
  TlsSettings settings_;
  mutable std::once_flag built_;
  mutable SSL_CTX* ctx_ = nullptr;
  mutable std::string build_error_;
};

// Both sides, as the worker holds them.
struct TlsContexts {
  std::shared_ptr<const TlsContext> client;  // towards clients; null when disabled
  std::shared_ptr<const TlsContext> server;  // towards PostgreSQL; null when disabled

  // False with `error` ("client_tls_key_file: …") when a side cannot be set up.
  static bool build(const Settings& settings, TlsContexts& out, std::string& error);
};

}  // namespace pgsluice
