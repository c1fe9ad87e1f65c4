// Prometheus exposition; see metrics_format.h.
#include "pooler/admin/metrics_format.h"

#include <fmt/format.h>

#include <functional>

#include "pooler/core/pool_counters.h"

namespace pgsluice {

namespace {

std::string labels(const PoolMetrics& p) {
  return fmt::format("database=\"{}\",user=\"{}\"", escape_label_value(p.gauges.database),
                     escape_label_value(p.gauges.user));
}

// Microseconds as seconds, exactly (six decimals), so a scrape can be compared with SHOW STATS.
std::string seconds(uint64_t us) {
  return fmt::format("{}.{:06}", us / 1'000'000, us % 1'000'000);
}

using PoolValue = std::function<std::string(const PoolMetrics&)>;

void per_pool(std::string& out, const std::vector<PoolMetrics>& pools, std::string_view name,
              std::string_view type, std::string_view help, const PoolValue& value) {
  write_metric_header(out, name, type, help);
  for (const PoolMetrics& p : pools) {
    fmt::format_to(std::back_inserter(out), "{}{{{}}} {}\n", name, labels(p), value(p));
  }
}

void histogram(std::string& out, const std::vector<PoolMetrics>& pools, std::string_view name,
               std::string_view help, Histogram PoolMetrics::*field) {
  write_metric_header(out, name, "histogram", help);
  for (const PoolMetrics& p : pools) {
    const Histogram& h = p.*field;
    const std::string l = labels(p);
    for (size_t i = 0; i < Histogram::kBoundsUs.size(); ++i) {
      // Bounds in seconds without trailing zeros: 0.0001, 0.25, 1, 10.
      fmt::format_to(std::back_inserter(out), "{}_bucket{{{},le=\"{}\"}} {}\n", name, l,
                     static_cast<double>(Histogram::kBoundsUs[i]) / 1e6, h.cumulative(i));
    }
    fmt::format_to(std::back_inserter(out), "{}_bucket{{{},le=\"+Inf\"}} {}\n", name, l, h.count());
    fmt::format_to(std::back_inserter(out), "{}_sum{{{}}} {}\n", name, l, seconds(h.sum_us()));
    fmt::format_to(std::back_inserter(out), "{}_count{{{}}} {}\n", name, l, h.count());
  }
}

std::string n(uint64_t v) {
  return std::to_string(v);
}

// Memory and what hostile or broken peers were refused (issue 23's numbers for an operator).
void write_buffers_and_refusals(std::string& out, const ProcessMetrics& process) {
  write_metric_header(
      out, "pgsluice_buffer_bytes", "gauge",
      "Memory held by connection buffers, clients' and servers' (it shrinks back after a "
      "large message).");
  fmt::format_to(std::back_inserter(out), "pgsluice_buffer_bytes{{side=\"client\"}} {}\n",
                 process.client_buffer_bytes);
  fmt::format_to(std::back_inserter(out), "pgsluice_buffer_bytes{{side=\"server\"}} {}\n",
                 process.server_buffer_bytes);
  write_metric_header(out, "pgsluice_refused_total", "counter",
                      "Messages and logins refused from hostile or broken peers, by reason.");
  for (const auto& [reason, count] : process.refusals) {
    fmt::format_to(std::back_inserter(out), "pgsluice_refused_total{{reason=\"{}\"}} {}\n",
                   escape_label_value(reason), count);
  }
}

// Where a multi-host entry's servers are: a failover shows as servers moving between hosts.
void write_servers_by_host(std::string& out, const std::vector<PoolMetrics>& pools) {
  write_metric_header(
      out, "pgsluice_pool_host_servers", "gauge",
      "Server connections by the [databases] host they logged in to and the role they told "
      "(primary, standby, unknown).");
  for (const PoolMetrics& p : pools) {
    for (const auto& [key, count] : p.gauges.servers_by_host) {
      fmt::format_to(std::back_inserter(out),
                     "pgsluice_pool_host_servers{{{},host=\"{}\",role=\"{}\"}} {}\n", labels(p),
                     escape_label_value(key.first), key.second, count);
    }
  }
}

}  // namespace

std::string escape_label_value(std::string_view value) {
  std::string out;
  out.reserve(value.size());
  for (char c : value) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '"') {
      out += "\\\"";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

void write_prometheus(std::string& out, const std::vector<PoolMetrics>& pools,
                      const ProcessMetrics& process) {
  write_metric_header(out, "pgsluice_up", "gauge", "1 while pgsluice answers.");
  out += "pgsluice_up 1\n";
  write_metric_header(out, "pgsluice_uptime_seconds", "gauge", "Seconds since pgsluice started.");
  fmt::format_to(std::back_inserter(out), "pgsluice_uptime_seconds {}\n", process.uptime_seconds);
  write_metric_header(out, "pgsluice_paused", "gauge",
                      "1 while PAUSE or SUSPEND holds every database.");
  fmt::format_to(std::back_inserter(out), "pgsluice_paused {}\n", process.paused ? 1 : 0);
  write_metric_header(out, "pgsluice_client_connections", "gauge",
                      "Client connections, by phase (login: startup and authentication).");
  fmt::format_to(std::back_inserter(out), "pgsluice_client_connections{{state=\"login\"}} {}\n",
                 process.login_clients);
  fmt::format_to(std::back_inserter(out), "pgsluice_client_connections{{state=\"all\"}} {}\n",
                 process.clients);

  // SHOW POOLS.
  const std::pair<const char*, uint64_t PoolRow::*> gauges[] = {
      {"cl_active", &PoolRow::cl_active},       {"cl_waiting", &PoolRow::cl_waiting},
      {"sv_active", &PoolRow::sv_active},       {"sv_idle", &PoolRow::sv_idle},
      {"sv_used", &PoolRow::sv_used},           {"sv_login", &PoolRow::sv_login},
      {"sv_pinned", &PoolRow::sv_pinned},       {"sv_dirty", &PoolRow::sv_dirty},
      {"sv_primary", &PoolRow::sv_primary},     {"sv_standby", &PoolRow::sv_standby},
      {"usable_hosts", &PoolRow::usable_hosts},
  };
  for (const auto& [name, field] : gauges) {
    per_pool(out, pools, fmt::format("pgsluice_pool_{}", name), "gauge",
             fmt::format("SHOW POOLS {}.", name),
             [field = field](const PoolMetrics& p) { return n(p.gauges.*field); });
  }
  per_pool(out, pools, "pgsluice_pool_maxwait_seconds", "gauge",
           "How long the oldest waiting client has waited (SHOW POOLS maxwait).",
           [](const PoolMetrics& p) { return seconds(p.gauges.maxwait_us); });
  per_pool(out, pools, "pgsluice_pool_size", "gauge", "The pool's size (server connections).",
           [](const PoolMetrics& p) { return std::to_string(p.gauges.pool_size); });
  per_pool(out, pools, "pgsluice_pool_paused", "gauge", "1 while the pool is paused.",
           [](const PoolMetrics& p) { return n(p.gauges.paused ? 1 : 0); });
  write_servers_by_host(out, pools);

  // SHOW STATS totals, under their kPoolCounters /metrics names: the counts, then the times (in
  // seconds, exactly).
  for_each_pool_counter_named(&PoolCounterInfo::metric, [&](const PoolCounterInfo& c) {
    if (c.microseconds) return;
    per_pool(out, pools, c.metric, "counter", c.metric_help,
             [field = c.field](const PoolMetrics& p) { return n(p.totals.*field); });
  });
  for_each_pool_counter_named(&PoolCounterInfo::metric, [&](const PoolCounterInfo& c) {
    if (!c.microseconds) return;
    per_pool(out, pools, c.metric, "counter", c.metric_help,
             [field = c.field](const PoolMetrics& p) { return seconds(p.totals.*field); });
  });

  write_metric_header(
      out, "pgsluice_session_state_findings_total", "counter",
      "Statements that changed session state (SHOW LEAKS), by kind and action taken.");
  for (const FindingCount& f : process.findings) {
    fmt::format_to(std::back_inserter(out),
                   "pgsluice_session_state_findings_total{{kind=\"{}\",action=\"{}\","
                   "database=\"{}\",user=\"{}\"}} {}\n",
                   escape_label_value(f.kind), escape_label_value(f.action),
                   escape_label_value(f.database), escape_label_value(f.user), f.count);
  }
  write_metric_header(out, "pgsluice_session_state_findings_dropped_total", "counter",
                      "Findings not recorded because the findings table was full.");
  fmt::format_to(std::back_inserter(out), "pgsluice_session_state_findings_dropped_total {}\n",
                 process.findings_dropped);

  write_buffers_and_refusals(out, process);

  histogram(out, pools, "pgsluice_transaction_duration_seconds",
            "Transaction durations, first query to ReadyForQuery 'I'.", &PoolMetrics::xact_time);
  histogram(out, pools, "pgsluice_query_duration_seconds",
            "Query durations, request to ReadyForQuery.", &PoolMetrics::query_time);
  histogram(out, pools, "pgsluice_client_wait_seconds", "Time queued clients waited for a server.",
            &PoolMetrics::wait_time);
}

void write_metric_header(std::string& out, std::string_view name, std::string_view type,
                         std::string_view help) {
  fmt::format_to(std::back_inserter(out), "# HELP {} {}\n# TYPE {} {}\n", name, help, name, type);
}

}  // namespace pgsluice
