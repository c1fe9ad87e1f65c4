// pgsluice's own SHOW commands (columns of their own; PgBouncer has no such commands).
#pragma once

#include "pooler/admin/result.h"

namespace pgsluice {

class Worker;

// SHOW LEAKS: one row per session-state finding (kind, database, user, application, statement).
AdminResult show_leaks(Worker& worker);
// SHOW LEAK_REPORT: the JSON leak report (leak_report.h) as one value; also written to
// leak_report_file when that is set.
AdminResult show_leak_report(Worker& worker);
// SHOW PREPARED: per pool, client Parses, server Parses and Binds; the registry's size.
AdminResult show_prepared(Worker& worker);
// SHOW PREPARED_STATEMENTS: one row per statement in the registry, with its use counts.
AdminResult show_prepared_statements(Worker& worker);

}  // namespace pgsluice
