// What a server connection's login goes through, from the SSLRequest to its first
// ReadyForQuery, and what it leaves for the rest of the connection's life: the backend's pid and
// key (cancel requests, SHOW SERVERS) and the protocol version the server accepted.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include "pgsluice/protocol/scram.h"

namespace pgsluice {

struct ServerLoginState {
  std::optional<protocol::ScramClient> scram;
  bool awaiting_ssl_answer = false;  // SSLRequest sent; the next byte is 'S' or 'N'
  bool answered = false;             // a message other than NegotiateProtocolVersion arrived
  bool connect_query_sent = false;
  // Asked for in the StartupMessage (server_max_protocol_version); lowered by the server's
  // NegotiateProtocolVersion, which may only come before anything else.
  int32_t protocol_version = 0;
  int32_t backend_pid = 0;
  std::string backend_key;
  // What the server sent before its login's ReadyForQuery (capped: server_login.cc), and the
  // ParameterStatus messages it reported (capped at kMaxServerParameters, logged once).
  size_t bytes = 0;
  size_t parameter_reports = 0;
  bool parameter_cap_logged = false;
};

}  // namespace pgsluice
