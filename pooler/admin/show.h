// The admin console's SHOW commands: PgBouncer 1.25's result sets with its column names, order
// and types (pgsluice's own columns only after them), and pgsluice's SHOW WORKERS.
#pragma once

#include <optional>
#include <string>

#include "pooler/admin/result.h"

namespace pgsluice {

class AdminControl;
class Worker;

// `subject` upper case (POOLS, STATS, …); nullopt when it names no SHOW command.
std::optional<AdminResult> admin_show(Worker& worker, const AdminControl& control,
                                      const std::string& subject);

}  // namespace pgsluice
