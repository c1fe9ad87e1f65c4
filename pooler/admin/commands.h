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

// SQLSTATEs of console errors. PgBouncer sends 08P01 for all of them; pgsluice names the cause:
// an invalid command, no privilege, no such database / client, already paused / not paused…,
// a bad setting in RELOAD/SET.
inline constexpr const char* kAdminSyntaxError = sqlstate::kSyntaxError;
inline constexpr const char* kAdminInsufficientPrivilege = sqlstate::kInsufficientPrivilege;
inline constexpr const char* kAdminUnknownObject = sqlstate::kUndefinedObject;
inline constexpr const char* kAdminInvalidState = sqlstate::kObjectNotInPrerequisiteState;
inline constexpr const char* kAdminConfigError = sqlstate::kConfigFileError;

// `sql` is the command text, for error messages.
AdminResult execute_admin_command(Worker& worker, AdminSession& session,
                                  const AdminCommand& command, const std::string& sql);

}  // namespace pgsluice
