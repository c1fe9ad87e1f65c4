// Fuzz target: the auth_file parser (userlist.txt: `"user" "secret"` lines, doubled quotes,
// comments), and the SCRAM verifier parser on every secret that announces one.
#include <cstdint>
#include <string>

#include "fuzz_check.h"
#include "pgsluice/protocol/scram.h"
#include "pooler/auth/auth_file.h"

using namespace pgsluice;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  const AuthFileResult r = parse_auth_file_text(text, "userlist.txt");
  for (const auto& [user, secret] : r.secrets) {
    if (protocol::is_scram_verifier(secret)) {
      const auto v = protocol::parse_scram_verifier(secret);
      if (v) {
        // A verifier that parses formats back to something that parses to the same keys.
        const auto again = protocol::parse_scram_verifier(protocol::format_scram_verifier(*v));
        FUZZ_CHECK(again && again->iterations == v->iterations && again->salt == v->salt &&
                   again->stored_key == v->stored_key && again->server_key == v->server_key);
      }
    }
  }
  // The verifier parser on the raw text too.
  (void)protocol::parse_scram_verifier(text);
  return 0;
}
