// What the session-state guard knows of one server connection's session: what its linked
// client left there (dirty), the settings and LISTEN channels to read back at the transaction's
// end, the verifier's and the function lookups' state, whose sequence values it holds, and its
// pin. Plain data, owned by the Server and worked by the guard's code in core
// (server_session_state.cc, server_release.cc, session_checks.cc).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "pooler/session_state/dirty_state.h"
#include "pooler/session_state/findings.h"
#include "pooler/session_state/function_verdicts.h"
#include "pooler/session_state/kept_settings.h"
#include "pooler/session_state/listen_channels.h"
#include "pooler/session_state/verify.h"

namespace pgsluice {

// A server pinned to its client (session_state = pin, or what cannot move): why, and the check
// at transaction boundaries whether the session still holds anything (server_session_state.cc).
struct PinState {
  bool pinned = false;
  // The client ran what may end its pin (an unlock, UNLISTEN, CLOSE, DEALLOCATE, DISCARD).
  bool may_end = false;
  bool check_awaiting = false;  // the check was sent, its answer is to come
  std::string why;              // the finding's kind and detail ("advisory_lock"); empty: none
  int64_t check_held = -1;      // the check's answer: what is still held (-1: none came)
  uint64_t checked_ms = 0;
};

struct ServerSessionState {
  // One client's id, none (0: since login or the last DISCARD SEQUENCES) or several's.
  static constexpr uint64_t kSeveralClients = ~uint64_t{0};

  DirtyState dirty;
  SettingsCapture kept;
  ListenCapture listen;
  std::string held_ready;                 // the client's ReadyForQuery during the LISTEN read-back
  SessionVerifier verifier;               // session_state_verify and long_hold (verify.h)
  std::vector<std::string> lookup_names;  // Server::look_up_function()
  FunctionLookup lookup;                  // the lookup sent at the release, until its answer
  std::vector<OwnedFindingEvent> deferred_calls;  // Server::defer_call()
  // Whose sequence values (currval, lastval) the server holds (see kSeveralClients), and
  // whether the linked client has sent nothing yet (the link's first request discards them).
  uint64_t sequences_of = 0;
  bool link_untouched = false;
  PinState pin;

  // A client is linked: its sequence values join whatever the server holds.
  void on_link(uint64_t client_id) {
    if (sequences_of != client_id) sequences_of = sequences_of == 0 ? client_id : kSeveralClients;
    link_untouched = true;
  }
};

}  // namespace pgsluice
