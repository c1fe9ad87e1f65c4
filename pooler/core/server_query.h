// The pooler's own query on a server no client is linked to (auth_query lookups, auth_query.h):
// one extended-protocol exchange whose replies go to a sink instead of a client. The server is
// `resetting` meanwhile (off the idle list), and idle again after the ReadyForQuery.
#pragma once

#include <cstdint>
#include <string_view>

#include "pgsluice/protocol/backend.h"

namespace pgsluice {

// Whose query of the pooler's own a server is answering (ReplyQueue's tag, internal_front): its
// rows and CommandComplete go to that one, in the order the queries were sent.
enum class InternalQuery : uint8_t {
  other,             // no rows to read: the parameter sync, a reset, a cleanup, LISTEN sync
  settings_only,     // the link's sync when it only sets values: nothing of another's to reset
  listen_read_back,  // the client's channels after its transaction (listen_channels.h)
  kept_read_back,    // the settings kept for the client (kept_settings.h)
  pin_check,         // whether a pinned session still holds anything (server_session_state.cc)
  function_lookup,   // the cleaning's lookup of called functions (function_verdicts.h)
  verify,            // the cleaning's last query: what the session looks like now (verify.h)
  run_query,         // run_query's, for its sink (below)
};

class ServerQuerySink {
 public:
  virtual void on_query_row(const protocol::DataRow& row) = 0;
  virtual void on_query_error(std::string_view sqlstate, std::string_view message) = 0;
  // The ReadyForQuery: every reply was delivered.
  virtual void on_query_done() = 0;
  // The server closed before the ReadyForQuery.
  virtual void on_query_lost(std::string_view reason) = 0;

 protected:
  ~ServerQuerySink() = default;
};

}  // namespace pgsluice
