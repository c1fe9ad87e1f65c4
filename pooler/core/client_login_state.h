// What a client's login goes through (its [databases] line, the authentication exchange, the
// hba rule's outcome) and what it leaves behind: how it authenticated and its cancel key.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "pooler/auth/client_auth.h"
#include "pooler/config/config.h"

namespace pgsluice {

struct ClientLoginState {
  // Only while logging in (its pool and session policy come from it): an idle client should not
  // carry a copy of its [databases] line.
  std::unique_ptr<DatabaseEntry> db_entry;
  // Only while logging in, as db_entry: on the heap, so that an idle client does not carry
  // the exchange's state (600 bytes of 2.5 kB) inline for the rest of its life (issue 17).
  std::unique_ptr<ClientAuth> auth;
  AuthType method = AuthType::md5;  // the method in use (auth_type, or the hba rule's)
  std::string ident_map;            // the hba rule's map= (peer, cert): who may be whom
  // A replication client's startup parameters, for its walsender's StartupMessage.
  std::vector<std::pair<std::string, std::string>> replication_parameters;
  // No [databases] entry and no "*": the client authenticates (against no secret if its user
  // is unknown too) and is then refused with "no such database".
  bool unknown_database = false;
  bool lookup_pending = false;      // waiting for AuthQuery
  bool secret_from_lookup = false;  // the secret came from auth_query
  bool peer_verified = false;       // hba peer: the kernel named the user, who may be unknown
  bool direct_tls = false;          // TLS began without an SSLRequest: ALPN must say "postgresql"
  bool own_user = false;            // see Client::is_own_user()
};

// The BackendKeyData the client was given, and whether the worker's cancel registry has it.
struct ClientCancelKey {
  int32_t pid = 0;
  std::string key;
  bool registered = false;
};

}  // namespace pgsluice
