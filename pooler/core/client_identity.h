// Who a client is, as its login and its socket say: the user and database it asked for, its
// application_name, its peer's address, when it connected and the protocol it speaks; and the
// parameters it has: what it was told, what it wants, what it sent at startup.
#pragma once

#include <cstdint>
#include <string>

#include "pooler/session_state/params.h"

namespace pgsluice {

struct ClientIdentity {
  std::string log_id;  // "C-<id> user@database address:port", the log lines' prefix
  std::string peer;
  std::string user;
  std::string database;
  std::string application_name;
  uint64_t connected_ms = 0;
  int32_t protocol_version = 0;
};

struct ClientParameters {
  ParameterSet reported;          // the client's view of every parameter the server reports
  ParameterSet settings;          // what the client wants now: extras, then what `keep` kept
  ParameterSet extras;            // startup settings the server does not report
  ParameterSet startup_reported;  // startup settings it reports (Client::startup_reported())
  // A server has been in these settings once (a link that needed no sync, or a sync that
  // worked): until then a sync that fails is the startup packet's fault (Client::settings_taken).
  bool taken_once = false;
};

}  // namespace pgsluice
