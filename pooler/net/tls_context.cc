// Building the SSL_CTX of each side from its settings; see tls_context.h.
#include "pooler/net/tls_context.h"

#include <openssl/err.h>
#include <openssl/x509v3.h>
#include <uv.h>

#include <algorithm>
#include <climits>
#include <vector>

#include "pooler/net/tls_session.h"

namespace pgsluice {

namespace {

std::string openssl_reason() {
  std::string out;
  while (unsigned long code = ERR_get_error()) {
    char buf[256];
    ERR_error_string_n(code, buf, sizeof(buf));
    std::string_view text(buf);
    size_t colon = text.rfind(':');
    if (!out.empty()) out += "; ";
    out += colon == std::string_view::npos ? text : text.substr(colon + 1);
  }
  return out.empty() ? "unknown OpenSSL error" : out;
}

// PostgreSQL 17's ALPN protocol name, in the wire form (length-prefixed).
constexpr unsigned char kAlpnPostgresql[] = {10, 'p', 'o', 's', 't', 'g', 'r', 'e', 's', 'q', 'l'};

// As PostgreSQL 17+: a client that offers ALPN must offer "postgresql" (a TLS connection meant
// for another protocol, e.g. HTTPS sent to the wrong port, fails the handshake with
// no_application_protocol); one that offers none is let through here, and the direct-TLS path
// refuses it afterwards (Client::on_channel_tls_ready).
int select_alpn(SSL* /*ssl*/, const unsigned char** out, unsigned char* outlen,
                const unsigned char* in, unsigned int inlen, void* /*arg*/) {
  unsigned char* selected = nullptr;
  if (SSL_select_next_proto(&selected, outlen, kAlpnPostgresql, sizeof(kAlpnPostgresql), in,
                            inlen) != OPENSSL_NPN_NEGOTIATED) {
    return SSL_TLSEXT_ERR_ALERT_FATAL;
  }
  *out = selected;
  return SSL_TLSEXT_ERR_OK;
}

std::string lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

// PgBouncer's *_tls_protocols: names or a list of tlsv1.0 … tlsv1.3. OpenSSL takes a range, so a
// list with a hole (tlsv1.0,tlsv1.2) enables everything between its ends.
bool parse_protocols(std::string_view text, int& min_version, int& max_version,
                     std::string& error) {
  std::string v = lower(text);
  if (v.empty() || v == "secure" || v == "default") {
    min_version = TLS1_2_VERSION;
    max_version = 0;  // the newest the library has
    return true;
  }
  if (v == "all" || v == "legacy") {
    min_version = TLS1_VERSION;
    max_version = 0;
    return true;
  }
  min_version = INT_MAX;
  max_version = 0;
  size_t pos = 0;
  while (pos <= v.size()) {
    size_t end = v.find_first_of(",: ", pos);
    if (end == std::string::npos) end = v.size();
    std::string item = v.substr(pos, end - pos);
    pos = end + 1;
    if (item.empty()) continue;
    int version = 0;
    if (item == "tlsv1" || item == "tlsv1.0") {
      version = TLS1_VERSION;
    } else if (item == "tlsv1.1") {
      version = TLS1_1_VERSION;
    } else if (item == "tlsv1.2") {
      version = TLS1_2_VERSION;
    } else if (item == "tlsv1.3") {
      version = TLS1_3_VERSION;
    } else {
      error = "unknown TLS protocol \"" + item +
              "\": expected secure, all, legacy or a list of tlsv1.0, tlsv1.1, tlsv1.2, tlsv1.3";
      return false;
    }
    min_version = std::min(min_version, version);
    max_version = std::max(max_version, version);
  }
  if (max_version == 0) {
    error = "no TLS protocol given";
    return false;
  }
  return true;
}

// PgBouncer's cipher names (for TLS 1.2 and older; TLS 1.3 suites are *_tls13_ciphers), or an
// OpenSSL cipher list as is.
std::string cipher_list(std::string_view text) {
  std::string v = lower(text);
  if (v.empty() || v == "fast" || v == "normal" || v == "default") return "HIGH:!aNULL:!MD5:!3DES";
  if (v == "secure") return "ECDHE+AESGCM:ECDHE+CHACHA20:DHE+AESGCM:!aNULL";
  if (v == "compat" || v == "legacy" || v == "insecure" || v == "all") return "HIGH:MEDIUM:!aNULL";
  return std::string(text);
}

bool is_ip_literal(const std::string& host) {
  sockaddr_in in4{};
  sockaddr_in6 in6{};
  return uv_ip4_addr(host.c_str(), 0, &in4) == 0 || uv_ip6_addr(host.c_str(), 0, &in6) == 0;
}

// client_tls_ecdhcurve: a curve or a list of them restricts the key exchange's groups; auto and
// none keep OpenSSL's (PgBouncer's none sets nothing, and its auto is a no-op in OpenSSL 3).
std::string set_ecdh_groups(SSL_CTX* ctx, const TlsSettings& settings) {
  const std::string curve = lower(settings.ecdhcurve);
  if (curve == "auto" || curve == "none" ||
      SSL_CTX_set1_groups_list(ctx, settings.ecdhcurve.c_str()) == 1) {
    return {};
  }
  return "client_tls_ecdhcurve: unknown curve \"" + settings.ecdhcurve + "\"";
}

SSL_CTX* build_ssl_ctx(TlsContext::Role role, const TlsSettings& settings, std::string& error) {
  using Role = TlsContext::Role;
  const std::string prefix = role == Role::accept ? "client_tls_" : "server_tls_";
  ERR_clear_error();
  std::unique_ptr<SSL_CTX, decltype(&SSL_CTX_free)> owned(
      SSL_CTX_new(role == Role::accept ? TLS_server_method() : TLS_client_method()), SSL_CTX_free);
  SSL_CTX* ctx = owned.get();
  if (ctx == nullptr) {
    error = "cannot create a TLS context: " + openssl_reason();
    return nullptr;
  }
  auto fail = [&](const std::string& what) -> SSL_CTX* {
    error = what;
    return nullptr;
  };

  int min_version = 0;
  int max_version = 0;
  std::string perror;
  if (!parse_protocols(settings.protocols, min_version, max_version, perror)) {
    return fail(prefix + "protocols: " + perror);
  }
  SSL_CTX_set_min_proto_version(ctx, min_version);
  SSL_CTX_set_max_proto_version(ctx, max_version);
  if (SSL_CTX_set_cipher_list(ctx, cipher_list(settings.ciphers).c_str()) != 1) {
    return fail(prefix + "ciphers: invalid cipher list \"" + settings.ciphers + "\"");
  }
  if (!settings.tls13_ciphers.empty() &&
      SSL_CTX_set_ciphersuites(ctx, settings.tls13_ciphers.c_str()) != 1) {
    return fail((role == Role::accept ? "client" : "server") +
                std::string("_tls13_ciphers: failed to set the TLSv1.3 cipher suites \"") +
                settings.tls13_ciphers + "\"");
  }
  // No compression (CRIME), no renegotiation (a memory-BIO write must never wait for a read).
  SSL_CTX_set_options(ctx, SSL_OP_NO_COMPRESSION | SSL_OP_NO_RENEGOTIATION);

  if (!settings.cert_file.empty() || !settings.key_file.empty()) {
    if (settings.cert_file.empty() || settings.key_file.empty()) {
      return fail(prefix + "cert_file and " + prefix + "key_file must be given together");
    }
    if (SSL_CTX_use_certificate_chain_file(ctx, settings.cert_file.c_str()) != 1) {
      return fail(prefix + "cert_file: cannot load \"" + settings.cert_file +
                  "\": " + openssl_reason());
    }
    if (SSL_CTX_use_PrivateKey_file(ctx, settings.key_file.c_str(), SSL_FILETYPE_PEM) != 1) {
      return fail(prefix + "key_file: cannot load \"" + settings.key_file +
                  "\": " + openssl_reason());
    }
    if (SSL_CTX_check_private_key(ctx) != 1) {
      return fail(prefix + "key_file does not match " + prefix + "cert_file");
    }
  } else if (role == Role::accept) {
    return fail(prefix + "sslmode = " + std::string(to_string(settings.sslmode)) + " needs " +
                prefix + "key_file and " + prefix + "cert_file");
  }

  const bool verify = settings.sslmode >= SslMode::verify_ca;
  if (!settings.ca_file.empty()) {
    if (SSL_CTX_load_verify_locations(ctx, settings.ca_file.c_str(), nullptr) != 1) {
      return fail(prefix + "ca_file: cannot load \"" + settings.ca_file +
                  "\": " + openssl_reason());
    }
  } else if (verify && role == Role::accept) {
    return fail(prefix + "sslmode = " + std::string(to_string(settings.sslmode)) + " needs " +
                prefix + "ca_file");
  } else if (verify) {
    // As PgBouncer: without a CA file, the system's trust store.
    SSL_CTX_set_default_verify_paths(ctx);
  }

  if (role == Role::accept) {
    // PostgreSQL's choices for its server side: our cipher order, no session tickets or cache
    // (each connection is one handshake; a ticket costs CPU per connection and nothing reuses it).
    SSL_CTX_set_options(ctx, SSL_OP_CIPHER_SERVER_PREFERENCE | SSL_OP_NO_TICKET);
    SSL_CTX_set_num_tickets(ctx, 0);
    SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_OFF);
    // client_tls_dheparams: OpenSSL's DH parameters for TLS 1.2's DHE suites, sized to the
    // certificate's key (2048 bits and up); none leaves DHE out.
    if (settings.dheparams != "none") SSL_CTX_set_dh_auto(ctx, 1);
    if (std::string err = set_ecdh_groups(ctx, settings); !err.empty()) return fail(err);
    SSL_CTX_set_alpn_select_cb(ctx, select_alpn, nullptr);
    if (!settings.ca_file.empty()) {
      // With a CA file, a client certificate is asked for: required under verify-*, optional
      // otherwise (auth_type = cert under require); a certificate that is sent must verify.
      STACK_OF(X509_NAME)* names = SSL_load_client_CA_file(settings.ca_file.c_str());
      if (names != nullptr) SSL_CTX_set_client_CA_list(ctx, names);
      SSL_CTX_set_verify(
          ctx, verify ? SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT : SSL_VERIFY_PEER,
          nullptr);
    } else {
      SSL_CTX_set_verify(ctx, SSL_VERIFY_NONE, nullptr);
    }
  } else {
    // As libpq: require (and prefer, allow) encrypt without checking who answers; verify-ca
    // checks the chain, verify-full the name too (new_session).
    SSL_CTX_set_verify(ctx, verify ? SSL_VERIFY_PEER : SSL_VERIFY_NONE, nullptr);
  }
  ERR_clear_error();
  return owned.release();
}

// Towards servers with nothing but an sslmode (the default `prefer`): nothing in the settings can
// be wrong, so the context waits for the first server that accepts TLS. Building one fetches
// OpenSSL's algorithms, which maps about 2 MB of libcrypto into the process (measured with
// smaps: 7.7 MB Pss at startup with it, 5.2 MB without), and a PostgreSQL without TLS never
// needs it. Files, or cipher lists of the user's own, are checked at startup and reload.
bool can_wait(TlsContext::Role role, const TlsSettings& settings) {
  return role == TlsContext::Role::connect && settings.cert_file.empty() &&
         settings.key_file.empty() && settings.ca_file.empty() &&
         settings.ciphers == TlsSettings{}.ciphers && settings.tls13_ciphers.empty();
}

}  // namespace

std::shared_ptr<const TlsContext> TlsContext::create(Role role, const TlsSettings& settings,
                                                     std::string& error) {
  error.clear();
  if (settings.sslmode == SslMode::disable) return nullptr;
  int min_version = 0;
  int max_version = 0;
  if (!parse_protocols(settings.protocols, min_version, max_version, error)) {
    error = (role == Role::accept ? "client_tls_protocols: " : "server_tls_protocols: ") + error;
    return nullptr;
  }
  std::shared_ptr<TlsContext> result(new TlsContext(role, settings));
  if (can_wait(role, settings)) return result;
  std::call_once(result->built_, [&] { result->ctx_ = build_ssl_ctx(role, settings, error); });
  if (result->ctx_ == nullptr) return nullptr;
  return result;
}

SSL_CTX* TlsContext::ssl_ctx() const {
  std::call_once(built_, [this] {
    std::string error;
    ctx_ = build_ssl_ctx(role_, settings_, error);
    if (ctx_ == nullptr) build_error_ = error;
  });
  return ctx_;
}

TlsContext::~TlsContext() {
  SSL_CTX_free(ctx_);  // null when it was never needed
}

std::unique_ptr<TlsSession> TlsContext::new_session(std::string_view host) const {
  SSL_CTX* ctx = ssl_ctx();
  if (ctx == nullptr) return nullptr;
  SSL* ssl = SSL_new(ctx);
  if (ssl == nullptr) return nullptr;
  if (role_ == Role::accept) {
    SSL_set_accept_state(ssl);
    return std::make_unique<TlsSession>(ssl);
  }
  SSL_set_connect_state(ssl);
  // As libpq 17+: always offer ALPN "postgresql"; PostgreSQL 17+ needs it for direct TLS and
  // older servers ignore it. (SSL_set_alpn_protos returns 0 on success.)
  if (SSL_set_alpn_protos(ssl, kAlpnPostgresql, sizeof(kAlpnPostgresql)) != 0) {
    SSL_free(ssl);
    return nullptr;
  }
  std::string name(host);
  if (!name.empty() && !is_ip_literal(name)) SSL_set_tlsext_host_name(ssl, name.c_str());
  if (mode_ == SslMode::verify_full && !name.empty()) {
    // An IP literal is matched against the certificate's IP SANs, a name against its DNS SANs
    // (or CN when it has none), as libpq does.
    if (is_ip_literal(name)) {
      X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), name.c_str());
    } else {
      SSL_set_hostflags(ssl, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
      SSL_set1_host(ssl, name.c_str());
    }
  }
  return std::make_unique<TlsSession>(ssl);
}

bool TlsContexts::build(const Settings& settings, TlsContexts& out, std::string& error) {
  out.client = TlsContext::create(TlsContext::Role::accept, settings.client_tls, error);
  if (!error.empty()) return false;
  out.server = TlsContext::create(TlsContext::Role::connect, settings.server_tls, error);
  return error.empty();
}

}  // namespace pgsluice
