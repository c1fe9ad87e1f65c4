// The counters of a pool (PgBouncer's SHOW STATS numbers and pgsluice's own) and the one table,
// kPoolCounters, that says how each is shown: its columns in SHOW STATS, STATS_TOTALS,
// STATS_AVERAGES and TOTALS, how its average is taken, its /metrics family and its
// pgbouncer_exporter name. A new counter is a field in PoolCounters and a row in the table; the
// console, /metrics and the averages follow from the row. The hot path (ServerTiming::on_ready,
// Pool) increments the fields by name: only the console and a metrics scrape walk the table.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <string_view>

namespace pgsluice {

// The totals of one pool since it was created. Times are microseconds.
struct PoolCounters {
  uint64_t server_assignments = 0;  // a client got a server
  uint64_t transactions = 0;        // first requests after none was open (ServerTiming)
  uint64_t queries = 0;             // requests to ReadyForQuery (ServerTiming::on_request)
  uint64_t bytes_received = 0;      // from clients, forwarded to servers
  uint64_t bytes_sent = 0;          // from servers, forwarded to clients
  uint64_t xact_time_us = 0;
  uint64_t query_time_us = 0;
  uint64_t wait_time_us = 0;        // clients queued for a server
  uint64_t client_parse_count = 0;  // prepared statements (filled in by the registry)
  uint64_t server_parse_count = 0;
  uint64_t bind_count = 0;
  uint64_t client_logins = 0;       // successful client logins (PgBouncer 1.26's login count)
  uint64_t prepared_evictions = 0;  // statements closed on a server to stay under the limit
  uint64_t prepared_retries = 0;    // batches sent again after a stale plan (0A000)

  PoolCounters& operator+=(const PoolCounters& o);
};

// PgBouncer's averages over the time since the snapshot before the last stats_period tick: each
// field holds the average of its counter, taken as its row's `average` says; a counter without
// an average stays 0. A type of its own so that a total is never passed where an average is meant.
struct PoolAverages : PoolCounters {};

PoolAverages compute_averages(const PoolCounters& current, const PoolCounters& old,
                              uint64_t duration_us);

// How PgBouncer averages a counter over a stats_period.
enum class Average : uint8_t {
  none,                   // no average (and no average column)
  per_second,             // counts and bytes
  per_query,              // query time
  per_transaction,        // transaction time
  per_server_assignment,  // wait time, as PgBouncer 1.2x: per server assignment, not per client
};

// A counter's series in /metrics under pgbouncer_exporter's names (exporter_metrics.h).
struct ExporterName {
  std::string_view suffix{};  // pgbouncer_stats_totals_<suffix>, from SHOW STATS_TOTALS
  std::string_view help{};
  // Exporter 0.10 had it too, as pgbouncer_stats_<suffix> from SHOW STATS' total_ column (the
  // names most published dashboards still use).
  bool in_exporter_0_10 = false;
  // The family's place among the stats families: exporter 0.10's seven in the alphabetical order
  // of their SHOW STATS columns, then those 0.11 added.
  int order = 0;
};

// One PoolCounters field and every name it is shown under; an empty name: not shown there.
// PgBouncer names a counter differently in each SHOW command (total_received, avg_recv,
// bytes_received, total_client_bytes), so each name is spelled out, as its command spells it.
struct PoolCounterInfo {
  uint64_t PoolCounters::*field = nullptr;
  bool microseconds = false;  // a time: /metrics and the exporter show it in seconds
  Average average = Average::none;
  std::string_view stats_total{};     // SHOW STATS, the total
  std::string_view stats_average{};   // SHOW STATS, the average
  std::string_view stats_totals{};    // SHOW STATS_TOTALS
  std::string_view stats_averages{};  // SHOW STATS_AVERAGES
  std::string_view totals_total{};    // SHOW TOTALS, the total's row
  std::string_view totals_average{};  // SHOW TOTALS, the average's row
  std::string_view metric{};          // pgsluice's own /metrics family (a counter)
  std::string_view metric_help{};
  ExporterName exporter{};
};

// In the order of SHOW STATS' columns: every command lists its columns in table order.
inline constexpr std::array kPoolCounters = {
    PoolCounterInfo{.field = &PoolCounters::server_assignments,
                    .average = Average::per_second,
                    .stats_total = "total_server_assignment_count",
                    .stats_average = "avg_server_assignment_count",
                    .stats_totals = "server_assignment_count",
                    .stats_averages = "server_assignment_count",
                    .totals_total = "total_server_assignment_count",
                    .totals_average = "avg_server_assignment_count",
                    .metric = "pgsluice_server_assignments_total",
                    .metric_help = "Times a client was given a server.",
                    .exporter = {.suffix = "server_assignments_total",
                                 .help = "Times a client was given a server.",
                                 .order = 10}},
    PoolCounterInfo{.field = &PoolCounters::transactions,
                    .average = Average::per_second,
                    .stats_total = "total_xact_count",
                    .stats_average = "avg_xact_count",
                    .stats_totals = "xact_count",
                    .stats_averages = "xact_count",
                    .totals_total = "total_xact_count",
                    .totals_average = "avg_xact_count",
                    .metric = "pgsluice_transactions_total",
                    .metric_help = "Transactions pooled.",
                    .exporter = {.suffix = "sql_transactions_pooled_total",
                                 .help = "Transactions pooled.",
                                 .in_exporter_0_10 = true,
                                 .order = 5}},
    PoolCounterInfo{.field = &PoolCounters::queries,
                    .average = Average::per_second,
                    .stats_total = "total_query_count",
                    .stats_average = "avg_query_count",
                    .stats_totals = "query_count",
                    .stats_averages = "query_count",
                    .totals_total = "total_query_count",
                    .totals_average = "avg_query_count",
                    .metric = "pgsluice_queries_total",
                    .metric_help = "Queries pooled.",
                    .exporter = {.suffix = "queries_pooled_total",
                                 .help = "Queries pooled.",
                                 .in_exporter_0_10 = true,
                                 .order = 0}},
    PoolCounterInfo{.field = &PoolCounters::bytes_received,
                    .average = Average::per_second,
                    .stats_total = "total_received",
                    .stats_average = "avg_recv",
                    .stats_totals = "bytes_received",
                    .stats_averages = "bytes_received",
                    .totals_total = "total_client_bytes",
                    .totals_average = "avg_client_bytes",
                    .metric = "pgsluice_received_bytes_total",
                    .metric_help = "Bytes from clients to servers.",
                    .exporter = {.suffix = "received_bytes_total",
                                 .help = "Bytes received from clients.",
                                 .in_exporter_0_10 = true,
                                 .order = 2}},
    PoolCounterInfo{.field = &PoolCounters::bytes_sent,
                    .average = Average::per_second,
                    .stats_total = "total_sent",
                    .stats_average = "avg_sent",
                    .stats_totals = "bytes_sent",
                    .stats_averages = "bytes_sent",
                    .totals_total = "total_server_bytes",
                    .totals_average = "avg_server_bytes",
                    .metric = "pgsluice_sent_bytes_total",
                    .metric_help = "Bytes from servers to clients.",
                    .exporter = {.suffix = "sent_bytes_total",
                                 .help = "Bytes sent to clients.",
                                 .in_exporter_0_10 = true,
                                 .order = 3}},
    PoolCounterInfo{.field = &PoolCounters::xact_time_us,
                    .microseconds = true,
                    .average = Average::per_transaction,
                    .stats_total = "total_xact_time",
                    .stats_average = "avg_xact_time",
                    .stats_totals = "xact_time",
                    .stats_averages = "xact_time",
                    .totals_total = "total_xact_time",
                    .totals_average = "avg_xact_time",
                    .metric = "pgsluice_xact_time_seconds_total",
                    .metric_help = "Time spent in transactions (SHOW STATS total_xact_time).",
                    .exporter = {.suffix = "server_in_transaction_seconds_total",
                                 .help = "Seconds servers spent in transactions.",
                                 .in_exporter_0_10 = true,
                                 .order = 6}},
    PoolCounterInfo{.field = &PoolCounters::query_time_us,
                    .microseconds = true,
                    .average = Average::per_query,
                    .stats_total = "total_query_time",
                    .stats_average = "avg_query_time",
                    .stats_totals = "query_time",
                    .stats_averages = "query_time",
                    .totals_total = "total_query_time",
                    .totals_average = "avg_query_time",
                    .metric = "pgsluice_query_time_seconds_total",
                    .metric_help = "Time spent in queries (SHOW STATS total_query_time).",
                    .exporter = {.suffix = "queries_duration_seconds_total",
                                 .help = "Seconds servers spent running queries.",
                                 .in_exporter_0_10 = true,
                                 .order = 1}},
    PoolCounterInfo{.field = &PoolCounters::wait_time_us,
                    .microseconds = true,
                    .average = Average::per_server_assignment,
                    .stats_total = "total_wait_time",
                    .stats_average = "avg_wait_time",
                    .stats_totals = "wait_time",
                    .stats_averages = "wait_time",
                    .totals_total = "total_wait_time",
                    .totals_average = "avg_wait_time",
                    .metric = "pgsluice_wait_time_seconds_total",
                    .metric_help = "Time clients waited for a server (SHOW STATS total_wait_time).",
                    .exporter = {.suffix = "client_wait_seconds_total",
                                 .help = "Seconds clients waited for a server.",
                                 .in_exporter_0_10 = true,
                                 .order = 4}},
    // The prepared statements' counters: STATS_AVERAGES names their averages avg_*, unlike the
    // others', and SHOW TOTALS gives them a ps_ prefix (PgBouncer's names, odd as they are).
    PoolCounterInfo{.field = &PoolCounters::client_parse_count,
                    .average = Average::per_second,
                    .stats_total = "total_client_parse_count",
                    .stats_average = "avg_client_parse_count",
                    .stats_totals = "client_parse_count",
                    .stats_averages = "avg_client_parse_count",
                    .totals_total = "total_ps_client_parse_count",
                    .totals_average = "avg_ps_client_parse_count",
                    .metric = "pgsluice_client_parses_total",
                    .metric_help = "Parse messages from clients (prepared statements).",
                    .exporter = {.suffix = "client_parses_total",
                                 .help = "Parse messages from clients.",
                                 .order = 7}},
    PoolCounterInfo{.field = &PoolCounters::server_parse_count,
                    .average = Average::per_second,
                    .stats_total = "total_server_parse_count",
                    .stats_average = "avg_server_parse_count",
                    .stats_totals = "server_parse_count",
                    .stats_averages = "avg_server_parse_count",
                    .totals_total = "total_ps_server_parse_count",
                    .totals_average = "avg_ps_server_parse_count",
                    .metric = "pgsluice_server_parses_total",
                    .metric_help = "Parse messages sent to servers (prepared statements).",
                    .exporter = {.suffix = "server_parses_total",
                                 .help = "Parse messages sent to servers.",
                                 .order = 8}},
    PoolCounterInfo{.field = &PoolCounters::bind_count,
                    .average = Average::per_second,
                    .stats_total = "total_bind_count",
                    .stats_average = "avg_bind_count",
                    .stats_totals = "bind_count",
                    .stats_averages = "avg_bind_count",
                    .totals_total = "total_ps_bind_count",
                    .totals_average = "avg_ps_bind_count",
                    .metric = "pgsluice_binds_total",
                    .metric_help = "Bind messages (prepared statements).",
                    .exporter = {.suffix = "binds_total", .help = "Bind messages.", .order = 9}},
    // PgBouncer 1.26: a login that reached the greeting (the console's too, in its own row).
    // pgbouncer_exporter has no series for it yet, so it has no exporter name.
    PoolCounterInfo{.field = &PoolCounters::client_logins,
                    .average = Average::per_second,
                    .stats_total = "total_client_login_count",
                    .stats_average = "avg_client_login_count",
                    .stats_totals = "client_login_count",
                    .stats_averages = "avg_client_login_count",
                    .totals_total = "total_client_login_count",
                    .totals_average = "avg_client_login_count",
                    .metric = "pgsluice_client_logins_total",
                    .metric_help = "Successful client logins."},
    // pgsluice's own, shown by SHOW PREPARED only (show_own.cc).
    PoolCounterInfo{.field = &PoolCounters::prepared_evictions},
    PoolCounterInfo{.field = &PoolCounters::prepared_retries},
};

// A column of kPoolCounters' names: &PoolCounterInfo::stats_total, …
using PoolCounterName = std::string_view PoolCounterInfo::*;

// The counters `name` shows, in table order (so in the order of its command's columns).
template <typename Fn>
void for_each_pool_counter_named(PoolCounterName name, Fn&& fn) {
  for (const PoolCounterInfo& counter : kPoolCounters) {
    if (!(counter.*name).empty()) fn(counter);
  }
}

namespace pool_counters_detail {

// Every field in one row only, and the average columns exactly where there is an average (so
// that a SHOW command's values line up with its columns).
constexpr bool table_is_consistent() {
  for (size_t i = 0; i < kPoolCounters.size(); ++i) {
    const PoolCounterInfo& c = kPoolCounters[i];
    for (size_t j = i + 1; j < kPoolCounters.size(); ++j) {
      if (kPoolCounters[j].field == c.field) return false;
    }
    const bool averaged = c.average != Average::none;
    for (PoolCounterName name : {&PoolCounterInfo::stats_average, &PoolCounterInfo::stats_averages,
                                 &PoolCounterInfo::totals_average}) {
      if ((c.*name).empty() == averaged) return false;
    }
  }
  return true;
}

}  // namespace pool_counters_detail

// With the check above: a field added to PoolCounters without its row does not compile.
static_assert(sizeof(PoolCounters) == kPoolCounters.size() * sizeof(uint64_t),
              "every PoolCounters field needs its row in kPoolCounters");
static_assert(pool_counters_detail::table_is_consistent(),
              "kPoolCounters: a field twice, or average columns that do not match `average`");

}  // namespace pgsluice
