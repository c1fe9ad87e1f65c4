// The admin console's command table: SHOW (admin_show.h), PAUSE, RESUME, SUSPEND, DISABLE,
// ENABLE, RECONNECT, KILL, KILL_CLIENT, RELOAD, WAIT_CLOSE, SHUTDOWN [WAIT_FOR_CLIENTS] and SET.
// stats_users may run SHOW (and SET of the settings drivers send, which are ignored).
#pragma once

#include <string>

#include "pooler/admin/parser.h"
#include "pooler/admin/result.h"

namespace pgsluice {

class AdminSession;
class Worker;

// SQLSTATEs of console errors. PgBouncer sends 08P01 for all of them; pgsluice names the cause.
inline constexpr const char* kAdminSyntaxError = "42601";  // invalid command
inline constexpr const char* kAdminInsufficientPrivilege = "42501";
inline constexpr const char* kAdminUnknownObject = "42704";  // no such database / client
inline constexpr const char* kAdminInvalidState = "55000";   // already paused, not paused…
inline constexpr const char* kAdminConfigError = "F0000";    // RELOAD/SET: a bad setting

// `sql` is the command text, for error messages.
AdminResult execute_admin_command(Worker& worker, AdminSession& session,
                                  const AdminCommand& command, const std::string& sql);

}  // namespace pgsluice
