// See exporter_metrics.h.
#include "pooler/admin/exporter_metrics.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <limits>
#include <map>
#include <optional>
#include <string_view>
#include <tuple>
#include <vector>

#include "pooler/admin/metrics_format.h"
#include "pooler/core/pool_counters.h"

namespace pgsluice {

namespace {

// One column of a SHOW result as one metric family.
struct ColumnMetric {
  std::vector<std::string_view> columns;  // the first one the result has (renamed columns)
  std::string_view suffix;                // after "pgbouncer_<group>_"
  std::string_view type;                  // gauge or counter
  double factor;                          // microseconds to seconds: 1e-6
  std::string_view help;
};

struct Group {
  std::string_view prefix;               // "pgbouncer_pools_"
  std::vector<std::string_view> labels;  // label names, also their columns
  std::vector<ColumnMetric> metrics;
};

constexpr double kUs = 1e-6;

const Group& databases_group() {
  static const Group group = {
      "pgbouncer_databases_",
      {"name", "host", "port", "database", "force_user", "pool_mode"},
      {{{"pool_size"}, "pool_size", "gauge", 1, "The database's pool size."},
       {{"reserve_pool_size", "reserve_pool"},
        "reserve_pool",
        "gauge",
        1,
        "The database's reserve pool size."},
       {{"max_connections"}, "max_connections", "gauge", 1, "max_db_connections in force."},
       {{"current_connections"}, "current_connections", "gauge", 1, "Server connections open."},
       {{"paused"}, "paused", "gauge", 1, "1 while the database is paused."},
       {{"disabled"}, "disabled", "gauge", 1, "1 while the database is disabled."}}};
  return group;
}

// The stats families from kPoolCounters' exporter names: from SHOW STATS_TOTALS (totals) every
// counter with one, from SHOW STATS (its total_* columns) those exporter 0.10 had.
std::vector<ColumnMetric> stats_metrics(bool totals) {
  std::vector<const PoolCounterInfo*> counters;
  for (const PoolCounterInfo& c : kPoolCounters) {
    if (!c.exporter.suffix.empty() && (totals || c.exporter.in_exporter_0_10)) {
      counters.push_back(&c);
    }
  }
  std::ranges::stable_sort(counters, {},
                           [](const PoolCounterInfo* c) { return c->exporter.order; });
  std::vector<ColumnMetric> m;
  for (const PoolCounterInfo* c : counters) {
    m.push_back({{totals ? c->stats_totals : c->stats_total},
                 c->exporter.suffix,
                 "counter",
                 c->microseconds ? kUs : 1,
                 c->exporter.help});
  }
  return m;
}

const Group& pools_group() {
  static const Group group = {
      "pgbouncer_pools_",
      {"database", "user"},
      {{{"cl_active"}, "client_active_connections", "gauge", 1, "Clients logged in (cl_active)."},
       {{"cl_active_cancel_req"},
        "client_active_cancel_connections",
        "gauge",
        1,
        "Clients whose cancel request was forwarded."},
       {{"cl_waiting"}, "client_waiting_connections", "gauge", 1, "Clients waiting for a server."},
       {{"cl_waiting_cancel_req"},
        "client_waiting_cancel_connections",
        "gauge",
        1,
        "Clients whose cancel request waits to be forwarded."},
       {{"sv_active"}, "server_active_connections", "gauge", 1, "Servers linked to a client."},
       {{"sv_active_cancel"},
        "server_active_cancel_connections",
        "gauge",
        1,
        "Servers forwarding a cancel request."},
       {{"sv_being_canceled"},
        "server_being_canceled_connections",
        "gauge",
        1,
        "Servers waiting for their cancel requests to complete."},
       {{"sv_idle"}, "server_idle_connections", "gauge", 1, "Servers idle and ready."},
       {{"sv_used"}, "server_used_connections", "gauge", 1, "Servers to be checked or cleaned."},
       {{"sv_tested"},
        "server_testing_connections",
        "gauge",
        1,
        "Servers running their reset or check query."},
       {{"sv_login"}, "server_login_connections", "gauge", 1, "Servers logging in."},
       {{"maxwait"},
        "client_maxwait_seconds",
        "gauge",
        1,
        "Seconds the oldest waiting client has waited."}}};
  return group;
}

std::optional<size_t> column_index(const AdminResult& r, std::string_view name) {
  for (size_t i = 0; i < r.columns().size(); ++i) {
    if (r.columns()[i].name == name) return i;
  }
  return std::nullopt;
}

// A cell as the exporter converts it: a number (NULL is NaN); text that is no number: none.
std::optional<double> number(const std::optional<std::string>& cell) {
  if (!cell) return std::numeric_limits<double>::quiet_NaN();
  double v = 0;
  const char* end = cell->data() + cell->size();
  auto [ptr, ec] = std::from_chars(cell->data(), end, v);
  if (cell->empty() || ec != std::errc() || ptr != end) return std::nullopt;
  return v;
}

std::string format_number(double v) {
  if (v != v) return "NaN";
  return fmt::format("{}", v);
}

std::string label_text(const std::vector<std::string>& row,
                       const std::vector<std::string_view>& labels) {
  std::string text;
  for (size_t i = 0; i < labels.size(); ++i) {
    if (i > 0) text += ',';
    fmt::format_to(std::back_inserter(text), "{}=\"{}\"", labels[i], escape_label_value(row[i]));
  }
  return text;
}

void write_group(std::string& out, const Group& g, const AdminResult& r) {
  // The label values of each row once (a missing column or NULL: empty, as the exporter).
  std::vector<std::string> label_values(r.rows().size());
  std::vector<std::vector<std::string>> labels_of_row(r.rows().size());
  for (size_t row = 0; row < r.rows().size(); ++row) {
    for (std::string_view label : g.labels) {
      std::optional<size_t> i = column_index(r, label);
      const auto& cell = i ? r.rows()[row][*i] : std::optional<std::string>();
      labels_of_row[row].push_back(cell.value_or(""));
    }
    label_values[row] = label_text(labels_of_row[row], g.labels);
  }
  for (const ColumnMetric& m : g.metrics) {
    std::optional<size_t> col;
    for (std::string_view name : m.columns) {
      if (!col) col = column_index(r, name);
    }
    if (!col) continue;  // a column this result does not have: no family
    const std::string name = std::string(g.prefix) + std::string(m.suffix);
    write_metric_header(out, name, m.type, m.help);
    for (size_t row = 0; row < r.rows().size(); ++row) {
      std::optional<double> v = number(r.rows()[row][*col]);
      if (!v) continue;
      fmt::format_to(std::back_inserter(out), "{}{{{}}} {}\n", name, label_values[row],
                     format_number(*v * m.factor));
    }
  }
}

// SHOW LISTS and SHOW CONFIG are rows of (name, value): one gauge per known name.
void write_named_rows(
    std::string& out, const AdminResult& r,
    const std::vector<std::tuple<std::string_view, std::string_view, std::string_view>>& names) {
  for (const auto& [row_name, metric, help] : names) {
    for (const auto& row : r.rows()) {
      if (row.size() < 2 || row[0] != std::string(row_name)) continue;
      std::optional<double> v = number(row[1]);
      if (!v) continue;
      write_metric_header(out, metric, "gauge", help);
      fmt::format_to(std::back_inserter(out), "{} {}\n", metric, format_number(*v));
    }
  }
}

void write_clients(std::string& out, const AdminResult& r) {
  std::map<std::tuple<std::string, std::string, std::string, std::string>, uint64_t> counts;
  auto at = [&](const std::vector<std::optional<std::string>>& row, std::string_view column) {
    std::optional<size_t> i = column_index(r, column);
    return i && row[*i] ? *row[*i] : std::string();
  };
  for (const auto& row : r.rows()) {
    ++counts[{at(row, "database"), at(row, "user"), at(row, "application_name"), at(row, "state")}];
  }
  write_metric_header(
      out, "pgbouncer_client_connections", "gauge",
      "Client connections by database, user, application_name and state (SHOW CLIENTS).");
  for (const auto& [key, n] : counts) {
    const auto& [database, user, app, state] = key;
    fmt::format_to(std::back_inserter(out),
                   "pgbouncer_client_connections{{database=\"{}\",user=\"{}\","
                   "application_name=\"{}\",state=\"{}\"}} {}\n",
                   escape_label_value(database), escape_label_value(user), escape_label_value(app),
                   escape_label_value(state), n);
  }
}

}  // namespace

void write_exporter_metrics(std::string& out, const ExporterSources& in) {
  write_metric_header(out, "pgbouncer_up", "gauge",
                      "1: the pooler answered (pgbouncer_exporter's name).");
  out += "pgbouncer_up 1\n";
  if (!in.version.rows().empty() && !in.version.rows()[0].empty()) {
    write_metric_header(out, "pgbouncer_version_info", "gauge", "The pooler's SHOW VERSION.");
    fmt::format_to(std::back_inserter(out), "pgbouncer_version_info{{version=\"{}\"}} 1\n",
                   escape_label_value(in.version.rows()[0][0].value_or("")));
  }
  write_named_rows(out, in.lists,
                   {{"databases", "pgbouncer_databases", "Databases (SHOW LISTS)."},
                    {"users", "pgbouncer_users", "Users (SHOW LISTS)."},
                    {"pools", "pgbouncer_pools", "Pools (SHOW LISTS)."},
                    {"free_clients", "pgbouncer_free_clients", "SHOW LISTS free_clients."},
                    {"used_clients", "pgbouncer_used_clients", "SHOW LISTS used_clients."},
                    {"login_clients", "pgbouncer_login_clients", "Clients logging in."},
                    {"free_servers", "pgbouncer_free_servers", "SHOW LISTS free_servers."},
                    {"used_servers", "pgbouncer_used_servers", "SHOW LISTS used_servers."},
                    {"dns_names", "pgbouncer_cached_dns_names", "SHOW LISTS dns_names."},
                    {"dns_zones", "pgbouncer_cached_dns_zones", "SHOW LISTS dns_zones."},
                    {"dns_queries", "pgbouncer_in_flight_dns_queries", "SHOW LISTS dns_queries."}});
  write_named_rows(
      out, in.config,
      {{"max_client_conn", "pgbouncer_config_max_client_connections", "max_client_conn."},
       {"max_user_connections", "pgbouncer_config_max_user_connections", "max_user_connections."}});
  write_group(out, databases_group(), in.databases);
  write_group(out, {"pgbouncer_stats_totals_", {"database"}, stats_metrics(true)}, in.stats_totals);
  write_group(out, {"pgbouncer_stats_", {"database"}, stats_metrics(false)}, in.stats);
  write_group(out, pools_group(), in.pools);
  write_clients(out, in.clients);
}

}  // namespace pgsluice
