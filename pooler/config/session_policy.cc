// Parsing and printing session_state_action values.
#include "pooler/config/session_policy.h"

#include "pooler/base/text.h"

namespace pgsluice {

namespace pp = pgsluice::protocol;

namespace {
constexpr pp::SessionStateKind kAllKinds[kSessionStateKindCount] = {
    pp::SessionStateKind::set,         pp::SessionStateKind::set_config,
    pp::SessionStateKind::role,        pp::SessionStateKind::advisory_lock,
    pp::SessionStateKind::listen,      pp::SessionStateKind::prepare,
    pp::SessionStateKind::hold_cursor, pp::SessionStateKind::temp_object,
    pp::SessionStateKind::load,        pp::SessionStateKind::seed,
    pp::SessionStateKind::currval};
}  // namespace

bool keepable(pp::SessionStateKind kind) {
  return kind == pp::SessionStateKind::set || kind == pp::SessionStateKind::set_config ||
         kind == pp::SessionStateKind::role || kind == pp::SessionStateKind::prepare;
}

bool relayable(pp::SessionStateKind kind) {
  return kind == pp::SessionStateKind::listen;
}

SessionPolicy SessionPolicy::transaction_default() {
  SessionPolicy policy;
  // What cannot move to another server keeps its server, within session_state_pin_reserve.
  policy.default_action = SessionAction::pin;
  for (pp::SessionStateKind kind : kAllKinds) {
    if (keepable(kind)) policy.overrides[static_cast<size_t>(kind)] = SessionAction::keep;
    if (relayable(kind)) policy.overrides[static_cast<size_t>(kind)] = SessionAction::relay;
  }
  return policy;
}

bool SessionPolicy::all_off() const {
  for (pp::SessionStateKind kind : kAllKinds) {
    if (action_for(kind) != SessionAction::off) return false;
  }
  return opaque_action() == SessionAction::off;
}

std::string_view to_string(SessionAction action) {
  switch (action) {
    case SessionAction::off:
      return "off";
    case SessionAction::warn:
      return "warn";
    case SessionAction::reject:
      return "reject";
    case SessionAction::reset:
      return "reset";
    case SessionAction::pin:
      return "pin";
    case SessionAction::keep:
      return "keep";
    case SessionAction::relay:
      return "relay";
  }
  return "?";
}

std::string_view to_string(SessionVerifyMode mode) {
  switch (mode) {
    case SessionVerifyMode::off:
      return "off";
    case SessionVerifyMode::sample:
      return "sample";
    case SessionVerifyMode::always:
      return "always";
  }
  return "?";
}

std::optional<SessionVerifyMode> parse_session_verify_mode(std::string_view text) {
  for (SessionVerifyMode m :
       {SessionVerifyMode::off, SessionVerifyMode::sample, SessionVerifyMode::always}) {
    if (text == to_string(m)) return m;
  }
  return std::nullopt;
}

std::optional<SessionAction> parse_session_action(std::string_view text) {
  for (SessionAction a :
       {SessionAction::off, SessionAction::warn, SessionAction::reject, SessionAction::reset,
        SessionAction::pin, SessionAction::keep, SessionAction::relay}) {
    if (text == to_string(a)) return a;
  }
  return std::nullopt;
}

std::optional<pp::SessionStateKind> parse_session_state_kind(std::string_view text) {
  for (pp::SessionStateKind kind : kAllKinds) {
    if (text == pp::to_string(kind)) return kind;
  }
  return std::nullopt;
}

std::string parse_session_policy(std::string_view text, SessionPolicy& out) {
  SessionPolicy policy;
  bool first = true;
  size_t pos = 0;
  while (pos <= text.size()) {
    size_t comma = text.find(',', pos);
    std::string_view item = trim(
        text.substr(pos, comma == std::string_view::npos ? std::string_view::npos : comma - pos));
    pos = comma == std::string_view::npos ? text.size() + 1 : comma + 1;
    if (item.empty()) return "empty item in '" + std::string(text) + "'";
    size_t colon = item.find(':');
    if (colon == std::string_view::npos) {
      if (!first) {
        return "the default action comes first; '" + std::string(item) +
               "' needs the form kind:action";
      }
      auto action = parse_session_action(item);
      if (!action) {
        return "unknown action '" + std::string(item) +
               "' (off, warn, reject, reset, pin, keep, relay)";
      }
      policy.default_action = *action;
    } else {
      std::string_view kind_text = trim(item.substr(0, colon));
      std::string_view action_text = trim(item.substr(colon + 1));
      if (kind_text == "opaque_call") {
        auto action = parse_session_action(action_text);
        if (!action || (*action != SessionAction::off && *action != SessionAction::warn &&
                        *action != SessionAction::reset)) {
          return "opaque_call takes off, warn or reset, not '" + std::string(action_text) + "'";
        }
        policy.opaque_call = *action;
        first = false;
        continue;
      }
      auto kind = parse_session_state_kind(kind_text);
      if (!kind) {
        return "unknown kind '" + std::string(kind_text) +
               "' (set, set_config, role, advisory_lock, listen, prepare, hold_cursor, "
               "temp_object, load, seed, currval, opaque_call)";
      }
      auto action = parse_session_action(action_text);
      if (!action) {
        return "unknown action '" + std::string(action_text) +
               "' (off, warn, reject, reset, pin, keep, relay)";
      }
      if (*action == SessionAction::keep && !keepable(*kind)) {
        return "keep applies to set, set_config, role and prepare, not to '" +
               std::string(kind_text) + "'";
      }
      if (*action == SessionAction::relay && !relayable(*kind)) {
        return "relay applies to listen, not to '" + std::string(kind_text) + "'";
      }
      policy.overrides[static_cast<size_t>(*kind)] = *action;
    }
    first = false;
  }
  out = policy;
  return {};
}

std::string format_session_policy(const SessionPolicy& policy) {
  std::string out(to_string(policy.default_action));
  for (pp::SessionStateKind kind : kAllKinds) {
    const auto& o = policy.overrides[static_cast<size_t>(kind)];
    if (!o) continue;
    out += ',';
    out += pp::to_string(kind);
    out += ':';
    out += to_string(*o);
  }
  if (policy.opaque_call) {
    out += ",opaque_call:";
    out += to_string(*policy.opaque_call);
  }
  return out;
}

}  // namespace pgsluice
