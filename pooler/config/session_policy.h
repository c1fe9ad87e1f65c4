// What pgsluice does when a client leaves session state behind in transaction mode: the
// `session_state_action` setting. Its value is a default action, optionally followed by
// per-kind overrides: `reset,listen:pin,advisory_lock:reject`. It can be set in the main section,
// in a [databases] entry and in a [users] entry; the most specific wins (user, then database,
// then the main section).
#pragma once

#include <array>
#include <optional>
#include <string>
#include <string_view>

#include "pgsluice/protocol/session_state.h"

namespace pgsluice {

enum class SessionAction {
  off,     // do not look
  warn,    // forward, record, log the first occurrence
  reject,  // refuse definite findings with 0A000 and a hint; warn on possible ones
  reset,   // forward, then clean exactly that before the server serves another client
  pin,     // keep the client on its server until it disconnects
  // settings (set, set_config, role): the client's values follow it from server to server
  // (kept_settings.h); prepare: its SQL prepared statements do, renamed per client
  // (sql_prepared.h); on any other kind it acts as warn
  keep,
  // listen only: one listener connection per pool runs every client's LISTEN and relays the
  // notifications to the clients (pooler/core/listen_relay.h); on any other kind it acts as warn
  relay,
};

// Kinds whose state `keep` can carry to another server.
bool keepable(protocol::SessionStateKind kind);
// Kinds the `relay` action applies to (listen).
bool relayable(protocol::SessionStateKind kind);

inline constexpr size_t kSessionStateKindCount = 11;

// session_state_verify: after a release in transaction mode, one query compares what the SQL
// checks tracked on the server with what is really there (session_verify.h).
enum class SessionVerifyMode {
  off,     // never: a clean server pays nothing
  sample,  // one release in session_state_verify_sample
  always,  // every release (staging)
};
std::string_view to_string(SessionVerifyMode mode);
std::optional<SessionVerifyMode> parse_session_verify_mode(std::string_view text);

struct SessionPolicy {
  SessionAction default_action = SessionAction::warn;
  std::array<std::optional<SessionAction>, kSessionStateKindCount> overrides{};
  // `opaque_call:action`: a call of a function the checks cannot see into. Not a kind of the
  // classifier (nothing says which state it would leave), so it has its own slot.
  std::optional<SessionAction> opaque_call;

  [[nodiscard]] SessionAction action_for(protocol::SessionStateKind kind) const {
    const auto& o = overrides[static_cast<size_t>(kind)];
    const SessionAction a = o ? *o : default_action;
    if (a == SessionAction::keep && !keepable(kind)) return SessionAction::warn;
    if (a == SessionAction::relay && !relayable(kind)) return SessionAction::warn;
    // currval/lastval leave nothing to clean or hold: the value read is already another's.
    if (kind == protocol::SessionStateKind::currval &&
        (a == SessionAction::pin || a == SessionAction::reset)) {
      return SessionAction::warn;
    }
    return a;
  }
  // What a call of a function the checks cannot see into gets: off, warn, or reset (the server
  // is verified at its release, and cleaned with DISCARD ALL when it holds state nobody
  // tracked). Unless set with opaque_call:…, it follows the default action: off stays off, warn
  // and reject (which refuses only what is certain) warn, reset, pin, keep and relay reset
  // (pin, the transaction-mode default, would hold a server for every such call).
  [[nodiscard]] SessionAction opaque_action() const {
    if (opaque_call) return *opaque_call;
    switch (default_action) {
      case SessionAction::off:
        return SessionAction::off;
      case SessionAction::warn:
      case SessionAction::reject:
        return SessionAction::warn;
      case SessionAction::reset:
      case SessionAction::pin:
      case SessionAction::keep:
      case SessionAction::relay:
        return SessionAction::reset;
    }
    return SessionAction::warn;
  }
  // What transaction mode does when session_state_action is not set: settings and SQL PREPARE
  // are kept, LISTEN is relayed, what cannot move (advisory locks, WITH HOLD cursors, temp
  // tables, LOAD) pins its server (never the pool's last ones: session_state_pin_reserve).
  static SessionPolicy transaction_default();
  // Nothing to look for: the classifier is skipped altogether.
  [[nodiscard]] bool all_off() const;
  bool operator==(const SessionPolicy&) const = default;
};

std::string_view to_string(SessionAction action);
std::optional<SessionAction> parse_session_action(std::string_view text);
std::optional<protocol::SessionStateKind> parse_session_state_kind(std::string_view text);
// Parses "action[,kind:action…]"; returns an error text, empty on success.
std::string parse_session_policy(std::string_view text, SessionPolicy& out);
std::string format_session_policy(const SessionPolicy& policy);

}  // namespace pgsluice
