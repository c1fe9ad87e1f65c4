// pgsluice's own SHOW commands (columns of their own; PgBouncer has no such commands).
#pragma once

#include "pooler/admin_result.h"

namespace pgsluice {

class Worker;

// SHOW LEAKS: one row per session-state finding (kind, database, user, application, statement).
AdminResult show_leaks(Worker& worker);
// SHOW PREPARED: per pool, client Parses, server Parses and Binds; the registry's size.
AdminResult show_prepared(Worker& worker);

}  // namespace pgsluice
