// Fuzz target: the pooler as SCRAM-SHA-256 server of a client (ScramServer).
// Input: client-first-message, a NUL byte, client-final-message. The verifier is fixed (password
// "pencil", see gen_corpus.py) and so is the server nonce, so that seeds with a valid proof reach
// the success path. A success must prove the ClientKey (SHA-256 of it is the StoredKey), and a
// second client-final on the same exchange must never succeed (no replay).
#include <openssl/sha.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

#include "fuzz_check.h"
#include "pgsluice/protocol/scram.h"

using namespace pgsluice::protocol;

namespace {

// Must match gen_corpus.py.
constexpr std::string_view kPassword = "pencil";
constexpr std::string_view kSalt = "pgsluice-fuzz-salt";
constexpr int kIterations = 4096;
constexpr std::string_view kServerNonce = "SERVERNONCE";

const ScramVerifier& verifier() {
  static const ScramVerifier v = make_scram_verifier(kPassword, kSalt, kIterations);
  return v;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  const size_t nul = input.find('\0');
  const std::string_view client_first = input.substr(0, nul);
  const std::string_view client_final =
      nul == std::string_view::npos ? std::string_view() : input.substr(nul + 1);

  ScramServer server(verifier(), std::string(kServerNonce));
  std::string server_final;
  // A client-final before any client-first must fail.
  if (client_final.size() % 2 == 1) {
    FUZZ_CHECK(server.handle_client_final(client_final, server_final) != ScramStatus::ok);
  }
  std::string server_first;
  const ScramStatus first = server.handle_client_first(client_first, server_first);
  if (first != ScramStatus::ok) {
    FUZZ_CHECK(server_first.empty());
    return 0;
  }
  FUZZ_CHECK(server_first.starts_with("r="));
  FUZZ_CHECK(server_first.find(kServerNonce) != std::string::npos);
  if (nul == std::string_view::npos) return 0;

  const ScramStatus final_status = server.handle_client_final(client_final, server_final);
  if (final_status != ScramStatus::ok) {
    FUZZ_CHECK(server_final.empty());
    return 0;
  }
  FUZZ_CHECK(server_final.starts_with("v="));
  uint8_t digest[SHA256_DIGEST_LENGTH];
  SHA256(server.client_key().data(), server.client_key().size(), digest);
  FUZZ_CHECK(std::memcmp(digest, verifier().stored_key.data(), sizeof digest) == 0);
  std::string again;
  FUZZ_CHECK(server.handle_client_final(client_final, again) != ScramStatus::ok);
  return 0;
}
