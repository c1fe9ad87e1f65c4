// The Prometheus text exposition format (version 0.0.4) of pgsluice's numbers: per pool
// (labels database, user) the SHOW POOLS gauges, the SHOW STATS counters and three latency
// histograms (transaction, query, client wait); and a few process-wide gauges. Pure formatting:
// the caller gathers the numbers (metrics_server.cc), the tests feed made-up ones.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "pooler/admin/views.h"
#include "pooler/core/stats.h"

namespace pgsluice {

struct PoolMetrics {
  PoolRow gauges;  // database, user and the SHOW POOLS counts
  PoolCounters totals;
  Histogram xact_time;
  Histogram query_time;
  Histogram wait_time;
};

// Session-state findings (SHOW LEAKS rows) summed by kind, action, database and user.
struct FindingCount {
  std::string kind;
  std::string action;
  std::string database;
  std::string user;
  uint64_t count = 0;
};

struct ProcessMetrics {
  uint64_t clients = 0;        // every client connection, the console's included
  uint64_t login_clients = 0;  // still in startup or authentication
  uint64_t uptime_seconds = 0;
  bool paused = false;  // PAUSE or SUSPEND of everything
  std::vector<FindingCount> findings;
  uint64_t findings_dropped = 0;  // events not recorded because the table was full
  // Memory held by connection buffers (capacities), clients' and servers'.
  uint64_t client_buffer_bytes = 0;
  uint64_t server_buffer_bytes = 0;
  // What was refused from peers (refusals.h), by reason.
  std::vector<std::pair<std::string, uint64_t>> refusals;
};

void write_prometheus(std::string& out, const std::vector<PoolMetrics>& pools,
                      const ProcessMetrics& process);

// A label value with \, " and newline escaped, as the format requires.
std::string escape_label_value(std::string_view value);

// A metric family's "# HELP" and "# TYPE" lines.
void write_metric_header(std::string& out, std::string_view name, std::string_view type,
                         std::string_view help);

}  // namespace pgsluice
