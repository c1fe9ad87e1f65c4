// SCRAM-SHA-256 (RFC 5802, RFC 7677) as PostgreSQL speaks it, over OpenSSL: the server side (the
// pooler authenticating a client against a stored verifier), the client side (the pooler logging
// in to a server with a password, or with the keys a client proved: SCRAM pass-through), and
// PostgreSQL's verifier format SCRAM-SHA-256$<iterations>:<salt>$<StoredKey>:<ServerKey>.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace pgsluice::protocol {

using ScramKey = std::array<uint8_t, 32>;

// The default of the largest iteration count pgsluice computes with or hands to clients
// (scram_max_iterations): PostgreSQL's default is 4096; a count from a hostile server or a
// crafted auth_query answer (up to 2^31 - 1) would keep the pooler, or every client, busy for
// minutes per login.
inline constexpr int kMaxScramIterations = 10'000'000;

struct ScramVerifier {
  int iterations = 0;
  std::string salt;  // raw bytes
  ScramKey stored_key{};
  ScramKey server_key{};
};

std::optional<ScramVerifier> parse_scram_verifier(std::string_view text);
bool is_scram_verifier(std::string_view text);
std::string format_scram_verifier(const ScramVerifier& verifier);
// Derives the verifier of a plain password (SASLprep is not applied: ASCII passwords are equal
// under it, which is what PostgreSQL also falls back to for invalid UTF-8).
ScramVerifier make_scram_verifier(std::string_view password, std::string_view salt, int iterations);

std::string base64_encode(std::string_view raw);
std::optional<std::string> base64_decode(std::string_view text);
// Random printable nonce (base64 of `raw_bytes` random bytes from OpenSSL).
std::string scram_random_nonce(size_t raw_bytes = 18);
// Compares in constant time for equal lengths.
bool constant_time_equal(std::string_view a, std::string_view b);

enum class ScramStatus { ok, malformed, wrong_proof, wrong_server_signature, unsupported };

// The only channel binding type PostgreSQL (and so pgsluice) supports: the hash of the TLS
// server's certificate (RFC 5929), which a man in the middle with another certificate cannot
// reproduce.
inline constexpr std::string_view kScramChannelBindingType = "tls-server-end-point";

// The pooler as the SCRAM server of a client.
class ScramServer {
 public:
  // `server_nonce` is appended to the client's nonce; empty means a random one.
  explicit ScramServer(ScramVerifier verifier, std::string server_nonce = {});

  // Channel binding, before handle_client_first. `offered`: SCRAM-SHA-256-PLUS was advertised,
  // so a client saying "y" (it could bind but believes the server cannot) reveals a downgrade and
  // is refused. `data`: the client chose -PLUS; its gs2 header must be "p=tls-server-end-point"
  // and its c= attribute must carry exactly this data. Without a call: no binding, as before.
  void set_channel_binding(bool offered, std::string data);

  // client-first-message → server-first-message.
  ScramStatus handle_client_first(std::string_view client_first, std::string& server_first);
  // client-final-message → server-final-message ("v=…"); checks the proof in constant time.
  ScramStatus handle_client_final(std::string_view client_final, std::string& server_final);

  // After a successful exchange: the ClientKey the client proved it holds (proof XOR signature);
  // with the verifier's ServerKey it logs in to a server that has the same verifier.
  [[nodiscard]] const ScramKey& client_key() const { return client_key_; }
  [[nodiscard]] const ScramVerifier& verifier() const { return verifier_; }

 private:
  ScramVerifier verifier_;
  std::string server_nonce_;
  std::string client_first_bare_;
  std::string server_first_;
  std::string combined_nonce_;
  std::string gs2_header_;  // "n,," "y,," or "p=tls-server-end-point,,"
  bool binding_offered_ = false;
  std::string binding_data_;  // non-empty: the client chose -PLUS; c= must be header + this
  ScramKey client_key_{};
};

// The pooler as the SCRAM client of a server.
class ScramClient {
 public:
  // With a plain password; `client_nonce` empty means a random one.
  static ScramClient with_password(std::string_view password, std::string client_nonce = {});
  // With keys proven by a client (pass-through): no plaintext password needed.
  static ScramClient with_keys(const ScramKey& client_key, const ScramKey& server_key,
                               std::string client_nonce = {});

  // Before client_first: bind to the TLS channel (SCRAM-SHA-256-PLUS) with the server's
  // tls-server-end-point `data`; or, with empty `data`, say "y": the client could bind but the
  // server did not offer -PLUS (which a server that did would take as a downgrade).
  void set_channel_binding(std::string data);
  void set_channel_binding_unused() { gs2_header_ = "y,,"; }
  // The largest iteration count a server-first may ask for (default kMaxScramIterations).
  void set_max_iterations(int max) { max_iterations_ = max; }

  // "n,,n=,r=<nonce>": PostgreSQL takes the user name from the startup packet.
  std::string client_first();
  // The same with n=<user_name> (escaped as RFC 5802 saslname): what generic SCRAM clients and the
  // RFC 7677 test vector send; PostgreSQL ignores it.
  std::string client_first(std::string_view user_name);
  ScramStatus handle_server_first(std::string_view server_first, std::string& client_final);
  ScramStatus handle_server_final(std::string_view server_final);
  // The server's signature was checked: the exchange is over and the server authenticated.
  [[nodiscard]] bool completed() const { return completed_; }

 private:
  ScramClient() = default;
  std::optional<std::string> password_;
  ScramKey client_key_{};
  ScramKey server_key_{};
  std::string client_nonce_;
  std::string client_first_bare_;
  std::string gs2_header_ = "n,,";
  std::string binding_data_;
  ScramKey expected_server_signature_{};
  // Set by a successful handle_server_first: a server-final before it must not be accepted (the
  // expected signature would still be all zeros).
  bool awaiting_server_final_ = false;
  bool server_first_seen_ = false;  // a second server-first-message is refused
  int max_iterations_ = kMaxScramIterations;
  bool completed_ = false;
};

}  // namespace pgsluice::protocol
