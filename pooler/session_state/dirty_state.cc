// Targeted cleanup of the session state a server carries.
#include "pooler/session_state/dirty_state.h"

#include <algorithm>

#include "pooler/session_state/params.h"

namespace pgsluice {

namespace pp = pgsluice::protocol;

void DirtyState::add(const pp::SessionStateFinding& finding) {
  if (finding.effect == pp::SessionStateEffect::release) return;
  switch (finding.kind) {
    case pp::SessionStateKind::set:
    case pp::SessionStateKind::set_config:
      if (finding.detail.empty() || iequals(finding.detail, "all") || finding.lexer_only) {
        reset_all_ = true;
      } else if (std::none_of(reset_names_.begin(), reset_names_.end(),
                              [&](const std::string& n) { return iequals(n, finding.detail); })) {
        reset_names_.push_back(finding.detail);
      }
      return;
    case pp::SessionStateKind::role:
      if (finding.detail == "session_authorization") {
        reset_session_authorization_ = true;
      }
      reset_role_ = true;
      return;
    case pp::SessionStateKind::advisory_lock:
      advisory_locks_ = true;
      return;
    case pp::SessionStateKind::listen:
      listen_ = true;
      return;
    case pp::SessionStateKind::prepare:
      prepared_ = true;
      return;
    case pp::SessionStateKind::hold_cursor:
      cursors_ = true;
      return;
    case pp::SessionStateKind::temp_object:
      temp_ = true;
      return;
    case pp::SessionStateKind::load:
      close_reason_ = "LOAD cannot be undone on a pooled server";
      return;
    case pp::SessionStateKind::seed:  // nothing un-seeds the session: a new backend does
      close_reason_ = "setseed cannot be undone on a pooled server";
      return;
    case pp::SessionStateKind::currval:
      return;  // nothing is left on the server
  }
}

std::vector<std::string> DirtyState::cleanup_queries() const {
  if (discard_all_) return {"DISCARD ALL"};
  std::string q;
  auto add = [&q](std::string_view statement) {
    if (!q.empty()) q += ";";
    q += statement;
  };
  // SESSION AUTHORIZATION first: resetting it also resets the role.
  if (reset_session_authorization_) add("SET SESSION AUTHORIZATION DEFAULT");
  if (reset_role_) add("RESET ROLE");
  if (reset_all_) {
    add("RESET ALL");
  } else {
    for (const std::string& name : reset_names_) add("RESET " + quote_identifier(name));
  }
  if (advisory_locks_) add("SELECT pg_catalog.pg_advisory_unlock_all()");
  if (listen_) add("UNLISTEN *");
  if (cursors_) add("CLOSE ALL");
  if (prepared_) add("DEALLOCATE ALL");
  if (temp_) add("DISCARD TEMP");
  if (q.empty()) return {};
  return {q};
}

}  // namespace pgsluice
