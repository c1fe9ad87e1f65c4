// Online restart (-R, --reboot), PgBouncer's protocol in pgsluice's terms: the new process logs
// in to the running one's admin console over its Unix socket as `pgbouncer` (the own-uid rule,
// client_login.cc) and sends SHOW FDS; the old process answers one row per socket it gives up,
// each DataRow sent with that socket's descriptor attached (SCM_RIGHTS): its listeners, then
// every client that can move (logged in, between transactions, no server linked, no TLS, no
// protocol-level or SQL prepared statement, no LISTEN), with what the new process needs to go
// on serving it (user, database, cancel key, the parameters it was told, its session
// settings, the pool's SCRAM pass-through keys). The old process then stops listening and
// exits once the clients it kept (those in a transaction, or holding a session server) have
// left, as SHUTDOWN WAIT_FOR_CLIENTS. Idle server connections are not passed: the new process
// opens its own (a server's session state is not worth the protocol it would take).
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "pgsluice/protocol/scram.h"
#include "pooler/session_state/params.h"

namespace pgsluice {

// The new process's application_name on the console: SHOW FDS answers no other session.
inline constexpr const char* kTakeoverApplicationName = "pgsluice -R";

// What a moving client carries (Client::export_state, Client::resume).
struct TakeoverClient {
  std::string user;
  std::string database;
  int32_t protocol_version = 0;
  int32_t cancel_pid = 0;
  std::string cancel_key;
  std::optional<protocol::ScramKey> scram_client_key;
  std::optional<protocol::ScramKey> scram_server_key;
  ParameterSet reported;
  ParameterSet extras;
  ParameterSet settings;
};

// The SHOW FDS row's `state` column: the fields above, length-prefixed, in hex (a console user
// who runs SHOW FDS sees text).
std::string encode_takeover_client(const TakeoverClient& client);
std::optional<TakeoverClient> decode_takeover_client(std::string_view hex);

// One socket of SHOW FDS.
struct TakeoverSocket {
  int fd = -1;
  std::string task;  // "pooler" (a listener) or "client"
  bool tcp = true;
  std::string state;  // a client's encoded TakeoverClient
};

// Old side: writes `bytes` (one DataRow) to the console socket with `fd` attached, waiting (up
// to a few seconds) while the socket is full. False when it could not.
bool send_with_descriptor(int socket, std::string_view bytes, int fd);
// Writes `bytes` whole (no descriptor), waiting likewise.
bool send_all(int socket, std::string_view bytes);

// New side, before any listener of its own: logs in to the console at `socket_path` and takes
// what SHOW FDS gives. Nothing running there: false with `error` empty (the process starts as
// without -R, as PgBouncer's does); a failure after the connect: false with the reason.
bool take_over(const std::string& socket_path, std::vector<TakeoverSocket>& sockets,
               std::string& error);

}  // namespace pgsluice
