// Authenticating a client against its secret (from the auth_file or auth_query) by a method:
// trust, plain (cleartext), md5 and scram-sha-256 (auth_type, or the auth_hba_file rule's). A
// user without a secret goes through the same exchange as one with a wrong password (a made-up
// MD5 salt or SCRAM verifier), so that neither the answer nor its timing tells which user names
// exist.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "pgsluice/protocol/scram.h"
#include "pooler/config/config.h"

namespace pgsluice {

class ClientAuth {
 public:
  enum class Result { need_response, ok, failed, protocol_violation };

  // `secret` is the user's auth_file entry, or nullopt when the user has none. For a plain
  // secret under SCRAM, `plain_verifier` is its verifier, derived once per user by the caller
  // (PBKDF2 per login would double the CPU a login costs).
  ClientAuth(AuthType type, std::string user, std::optional<std::string> secret,
             const protocol::ScramVerifier* plain_verifier = nullptr);

  // On a TLS connection, before start(): the tls-server-end-point data of our certificate, so
  // that SCRAM-SHA-256-PLUS (channel binding) is offered next to SCRAM-SHA-256.
  void set_channel_binding(std::string data) { channel_binding_ = std::move(data); }
  // Before start(): a verifier with more iterations is not used (scram_max_iterations).
  void set_max_iterations(int max) { max_iterations_ = max; }
  // Before start(): the iteration count of the verifiers made here (scram_iterations).
  void set_iterations(int iterations) { iterations_ = iterations; }

  // Writes the first authentication request to `out` (nothing for trust).
  Result start(std::string& out);
  // Handles the body of the client's 'p' message; may write the next request to `out`.
  Result on_response(std::string_view body, std::string& out);

  // The secret the exchange checks against (auth_file or auth_query), nullopt for none.
  [[nodiscard]] const std::optional<std::string>& secret() const { return secret_; }
  // Why it failed, for the log only (the client gets PostgreSQL's generic message).
  [[nodiscard]] const std::string& failure_reason() const { return failure_reason_; }
  // After a SCRAM exchange against a stored verifier: the keys for SCRAM pass-through.
  [[nodiscard]] const std::optional<protocol::ScramKey>& proven_client_key() const {
    return proven_client_key_;
  }
  [[nodiscard]] const std::optional<protocol::ScramKey>& proven_server_key() const {
    return proven_server_key_;
  }

 private:
  enum class Method { trust, cleartext, md5, scram };
  enum class Step { initial, sent_request, sasl_continue, done };

  Result fail(std::string reason);
  // A message that breaks the protocol (08P01, as PostgreSQL answers it), not a wrong password.
  Result malformed(std::string reason);
  // Why a verifier (auth_file, auth_query) is refused: a count that costs minutes per login.
  std::string too_many_iterations(int iterations) const;
  Result check_cleartext(std::string_view password);

  Method method_ = Method::trust;
  Step step_ = Step::initial;
  std::string user_;
  std::optional<std::string> secret_;
  const protocol::ScramVerifier* plain_verifier_ = nullptr;
  int max_iterations_ = protocol::kMaxScramIterations;
  int iterations_ = 4096;  // PostgreSQL's and PgBouncer's default
  std::array<uint8_t, 4> md5_salt_{};
  std::optional<protocol::ScramServer> scram_;
  bool scram_from_verifier_ = false;
  std::string failure_reason_;
  std::string channel_binding_;
  std::optional<protocol::ScramKey> proven_client_key_;
  std::optional<protocol::ScramKey> proven_server_key_;
};

}  // namespace pgsluice
