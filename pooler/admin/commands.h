// The admin console's command table: SHOW (admin_show.h), PAUSE, RESUME, SUSPEND, DISABLE,
// ENABLE, RECONNECT, KILL, KILL_CLIENT, RELOAD, WAIT_CLOSE, SHUTDOWN [WAIT_FOR_CLIENTS] and SET.
// stats_users may run SHOW (and SET of the settings drivers send, which are ignored).
#pragma once

#include <string>

#include "pooler/admin/parser.h"
#include "pooler/admin/result.h"
#include "pooler/base/sqlstate.h"

namespace pgsluice {

class AdminSession;
class Worker;

// SQLSTATEs of console errors as PgBouncer sends them, so that scripts and tools written against
// its console (and its own test suite) see the same errors: 08P01 for all but a failed RELOAD,
// which is F0000 (config file error). The names say what kind of error each call site reports;
// the message text tells the cause.
inline constexpr const char* kAdminSyntaxError = sqlstate::kProtocolViolation;
inline constexpr const char* kAdminInsufficientPrivilege = sqlstate::kProtocolViolation;
inline constexpr const char* kAdminUnknownObject = sqlstate::kProtocolViolation;
inline constexpr const char* kAdminInvalidState = sqlstate::kProtocolViolation;
inline constexpr const char* kAdminConfigError = sqlstate::kConfigFileError;  // RELOAD

// `sql` is the command text, for error messages.
AdminResult execute_admin_command(Worker& worker, AdminSession& session,
                                  const AdminCommand& command, const std::string& sql);

}  // namespace pgsluice
