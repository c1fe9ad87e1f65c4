// One connection's TLS state: an OpenSSL SSL object between two memory BIOs, so that it does no
// IO of its own. The channel (channel.h) feeds it the ciphertext it reads from the socket and
// sends the ciphertext it drains from it; plaintext goes in and out through read() and write().
// Keeping OpenSSL off the socket lets the libuv loop own every read and write, and lets the unit
// tests run two sessions against each other in memory.
#pragma once

#include <openssl/ssl.h>

#include <cstddef>
#include <string>
#include <string_view>

namespace pgsluice {

class TlsSession {
 public:
  enum class Status { ok, want_more, closed, error };

  // Takes ownership of `ssl`, already set up for its role (accept or connect) by TlsContext.
  explicit TlsSession(SSL* ssl);
  TlsSession(const TlsSession&) = delete;
  TlsSession& operator=(const TlsSession&) = delete;
  ~TlsSession();

  // Advances the handshake with what was fed so far: ok when it is complete, want_more when the
  // peer must answer first (drain() then holds what to send), error (see error()).
  Status handshake();
  [[nodiscard]] bool handshake_done() const { return handshake_done_; }

  // Ciphertext read from the socket.
  void feed(const char* data, size_t size);
  // Decrypted bytes into `buf`: ok with `got` > 0, want_more when no whole record is buffered,
  // closed on the peer's close_notify, error on a bad record.
  Status read(char* buf, size_t capacity, size_t& got);
  // Encrypts all of `plain` (a memory BIO never pushes back); error only on a broken session.
  Status write(std::string_view plain);
  // Queues a close_notify alert (drain() then holds it).
  void shutdown();
  // Appends the ciphertext waiting to be sent to `out`; returns how many bytes.
  size_t drain(std::string& out);
  [[nodiscard]] size_t pending_output() const;

  // Why the last call failed: OpenSSL's reason and, for a refused certificate, the verifier's.
  [[nodiscard]] const std::string& error() const { return error_; }
  // After the handshake: "TLSv1.3 TLS_AES_256_GCM_SHA384", for the log.
  [[nodiscard]] std::string describe() const;
  // For the tls column of SHOW CLIENTS/SERVERS, in PgBouncer's form:
  // "TLSv1.3/TLS_AES_256_GCM_SHA384/ECDH=X25519" (the key exchange group when one was used).
  [[nodiscard]] std::string connection_info() const;
  // The peer certificate's subject CN (auth_type = cert); empty without a verified certificate.
  [[nodiscard]] std::string peer_common_name() const;
  // After the handshake: whether ALPN agreed on "postgresql" (PostgreSQL 17's direct TLS needs
  // it; a peer that offered no ALPN agreed on nothing).
  [[nodiscard]] bool alpn_is_postgresql() const;
  // SCRAM channel binding data of type tls-server-end-point (RFC 5929): the hash of the TLS
  // server's certificate (ours when accepting, the peer's when connecting), with the hash of the
  // certificate's signature algorithm, SHA-256 instead of MD5 or SHA-1. Empty when unavailable.
  [[nodiscard]] std::string server_end_point() const;

  [[nodiscard]] SSL* native() const { return ssl_; }

 private:
  Status fail(int ret, std::string_view what);

  SSL* ssl_;
  BIO* rbio_;  // ciphertext in (owned by ssl_)
  BIO* wbio_;  // ciphertext out (owned by ssl_)
  bool handshake_done_ = false;
  std::string error_;
};

}  // namespace pgsluice
