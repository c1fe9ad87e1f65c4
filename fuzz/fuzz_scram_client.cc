// Fuzz target: the pooler as SCRAM-SHA-256 client of a server (ScramClient), with a password and
// with pass-through keys. Input: byte 0 picks the mode, then server-first-message, a NUL byte,
// server-final-message. A server-final is only accepted after an accepted server-first.
#include <cstdint>
#include <string>
#include <string_view>

#include "fuzz_check.h"
#include "pgsluice/protocol/scram.h"

using namespace pgsluice::protocol;

namespace {

// Must match gen_corpus.py.
constexpr std::string_view kPassword = "pencil";
constexpr std::string_view kClientNonce = "CLIENTNONCE";

// Iteration counts above this make one input take seconds (PBKDF2): a timeout, not a bug (the
// parser caps them at 10,000,000, as a server-sent count is trusted as far as libpq trusts it).
constexpr long kMaxFuzzIterations = 4096;

bool too_many_iterations(std::string_view server_first) {
  const size_t i = server_first.find(",i=");
  if (i == std::string_view::npos) return false;
  long n = 0;
  for (size_t p = i + 3;
       p < server_first.size() && server_first[p] >= '0' && server_first[p] <= '9'; ++p) {
    n = n * 10 + (server_first[p] - '0');
    if (n > kMaxFuzzIterations) return true;
  }
  return false;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const bool with_keys = data[0] & 1;
  const std::string_view input(reinterpret_cast<const char*>(data) + 1, size - 1);
  const size_t nul = input.find('\0');
  const std::string_view server_first = input.substr(0, nul);
  const std::string_view server_final =
      nul == std::string_view::npos ? std::string_view() : input.substr(nul + 1);
  if (!with_keys && too_many_iterations(server_first)) return 0;

  ScramKey client_key{};
  ScramKey server_key{};
  for (size_t i = 0; i < client_key.size(); ++i) {
    client_key[i] = static_cast<uint8_t>(i * 7 + 1);
    server_key[i] = static_cast<uint8_t>(i * 13 + 5);
  }
  ScramClient client =
      with_keys ? ScramClient::with_keys(client_key, server_key, std::string(kClientNonce))
                : ScramClient::with_password(kPassword, std::string(kClientNonce));
  // Before a client-first, a server-first is refused.
  if (data[0] & 2) {
    std::string ignored;
    FUZZ_CHECK(client.handle_server_first(server_first, ignored) != ScramStatus::ok);
  }
  const std::string first =
      (data[0] & 4) ? client.client_first("user,=name") : client.client_first();
  FUZZ_CHECK(first.starts_with("n,,n="));
  // A server-final before the server-first is never accepted.
  if (data[0] & 8) FUZZ_CHECK(client.handle_server_final(server_final) != ScramStatus::ok);

  std::string client_final;
  const ScramStatus s1 = client.handle_server_first(server_first, client_final);
  if (s1 != ScramStatus::ok) {
    FUZZ_CHECK(client_final.empty());
    FUZZ_CHECK(client.handle_server_final(server_final) != ScramStatus::ok);
    return 0;
  }
  FUZZ_CHECK(client_final.starts_with("c=biws,r="));
  FUZZ_CHECK(client_final.find(",p=") != std::string::npos);
  (void)client.handle_server_final(server_final);
  return 0;
}
