// The session-state prefilter's answer (protocol::may_change_session_state) for the one client
// message being handled. A Query or Parse is looked at twice on its way: by the session-state
// check (pooler/core/session_checks.cc) and, under statement rewriting, by the SQL PREPARE routing
// (client_sql_prepare.cc, client_statements.cc); the second asks here instead of passing over the
// bytes again, which was a third of the pooler's own instructions per `pgbench -S` transaction
// under the defaults (docs/profile.md).
#pragma once

#include <string_view>

#include "pgsluice/protocol/sql_lexer.h"

namespace pgsluice {

class PrefilterMemo {
 public:
  // The prefilter's answer for `sql`: remembered when `sql` is the very text (same bytes in the
  // same place) asked about since the last forget().
  [[nodiscard]] bool may_change_session_state(std::string_view sql) {
    if (!known_ || sql.data() != sql_.data() || sql.size() != sql_.size()) {
      sql_ = sql;
      flagged_ = protocol::may_change_session_state(sql);
      known_ = true;
    }
    return flagged_;
  }
  // At every new message: the next message's text may be read into the same buffer place with
  // the same length, and must not get this answer.
  void forget() { known_ = false; }

 private:
  std::string_view sql_;
  bool flagged_ = false;
  bool known_ = false;
};

}  // namespace pgsluice
