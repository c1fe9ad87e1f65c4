// login_notify_message (PgBouncer 1.26): the NOTICE every client's greeting carries, the admin
// console's too, between BackendKeyData and the first ReadyForQuery, as PgBouncer's
// welcome_client writes it (severity NOTICE, SQLSTATE 00000). Empty: no NOTICE at all.
#pragma once

#include <string>
#include <string_view>

#include "pgsluice/protocol/writer.h"
#include "pooler/base/sqlstate.h"

namespace pgsluice {

inline void write_login_notice(std::string& out, std::string_view message) {
  if (message.empty()) return;
  protocol::write_notice_response(
      out, {.severity = "NOTICE", .code = sqlstate::kSuccessfulCompletion, .message = message});
}

}  // namespace pgsluice
