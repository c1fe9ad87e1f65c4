// /metrics under pgbouncer_exporter's names (prometheus-community/pgbouncer_exporter), beside
// pgsluice's own: a dashboard or alert built on the exporter in front of PgBouncer reads pgsluice
// without the exporter. The series come from the console's own SHOW results, the ones the
// exporter would scrape, mapped column by column as it maps them: SHOW DATABASES
// (pgbouncer_databases_*, labels name, host, port, database, force_user, pool_mode), SHOW
// STATS_TOTALS (pgbouncer_stats_totals_*, exporter 0.11 and later) and SHOW STATS
// (pgbouncer_stats_*, the names of exporter 0.10 and earlier, which its README and most
// published dashboards still use), SHOW POOLS (pgbouncer_pools_*, labels database, user), SHOW
// LISTS, SHOW CONFIG, SHOW VERSION, SHOW CLIENTS counted by database, user, application_name and
// state, and pgbouncer_up. Times in microseconds become seconds, as the exporter's factors do.
#pragma once

#include <string>

#include "pooler/admin/result.h"

namespace pgsluice {

struct ExporterSources {
  AdminResult databases;
  AdminResult stats;         // SHOW STATS: total_* columns
  AdminResult stats_totals;  // SHOW STATS_TOTALS
  AdminResult pools;
  AdminResult lists;
  AdminResult config;
  AdminResult version;
  AdminResult clients;
};

void write_exporter_metrics(std::string& out, const ExporterSources& sources);

}  // namespace pgsluice
