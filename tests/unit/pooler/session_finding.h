// A session-state finding as the classifier would report it, for the policy and verify tests.
#pragma once

#include <string>
#include <utility>

#include "pgsluice/protocol/session_state.h"

namespace pgsluice {

inline protocol::SessionStateFinding finding(
    protocol::SessionStateKind kind, std::string detail,
    protocol::SessionStateEffect effect = protocol::SessionStateEffect::acquire) {
  protocol::SessionStateFinding f;
  f.kind = kind;
  f.detail = std::move(detail);
  f.effect = effect;
  return f;
}

}  // namespace pgsluice
