// What a server carries after a client left session state on it under the `reset` or `pin`
// action, and the queries that clean exactly that before the server serves anyone else. A clean
// server pays nothing: no query is sent when nothing was marked.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "pgsluice/protocol/session_state.h"

namespace pgsluice {

class DirtyState {
 public:
  void add(const protocol::SessionStateFinding& finding);
  // Something the pooler cannot name (an opaque call under `reset`): DISCARD ALL.
  void add_unknown() { discard_all_ = true; }
  // LOAD and setseed cannot be undone: the server must be closed instead of cleaned, for this
  // reason (empty when it can be cleaned).
  [[nodiscard]] bool needs_close() const { return !close_reason_.empty(); }
  [[nodiscard]] std::string_view close_reason() const { return close_reason_; }
  // Inline: asked at every release of a server, where it is almost always false.
  [[nodiscard]] bool any() const {
    return !reset_names_.empty() || reset_all_ || reset_role_ || reset_session_authorization_ ||
           advisory_locks_ || listen_ || prepared_ || cursors_ || temp_ || discard_all_ ||
           needs_close();
  }
  void clear() { *this = DirtyState(); }

  // The cleaning queries, each to be sent as its own Query message (DISCARD ALL refuses to run
  // inside the implicit transaction of a multi-statement query).
  [[nodiscard]] std::vector<std::string> cleanup_queries() const;
  // Setting names the cleanup resets (all of them when `resets_all_settings()`), so that
  // settings the pooler applied itself are applied again on the next link.
  [[nodiscard]] const std::vector<std::string>& reset_names() const { return reset_names_; }
  [[nodiscard]] bool resets_all_settings() const { return reset_all_ || discard_all_; }
  // The role and session authorization too (RESET ALL leaves them, DISCARD ALL does not).
  [[nodiscard]] bool resets_role() const {
    return reset_role_ || reset_session_authorization_ || discard_all_;
  }

 private:
  std::vector<std::string> reset_names_;
  bool reset_all_ = false;
  bool reset_role_ = false;
  bool reset_session_authorization_ = false;
  bool advisory_locks_ = false;
  bool listen_ = false;
  bool prepared_ = false;
  bool cursors_ = false;
  bool temp_ = false;
  bool discard_all_ = false;
  std::string_view close_reason_;
};

}  // namespace pgsluice
