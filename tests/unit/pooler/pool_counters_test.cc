// kPoolCounters, the one list SHOW STATS, STATS_TOTALS, STATS_AVERAGES, TOTALS, /metrics and the
// exporter names come from: the columns it gives are PgBouncer 1.26's, in PgBouncer's order
// (pinned here, so that a reordered or renamed row fails), and the sums and averages walk every
// row.
#include "pooler/core/pool_counters.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace pgsluice {
namespace {

std::vector<std::string> names(PoolCounterName name) {
  std::vector<std::string> out;
  for_each_pool_counter_named(name, [&](const PoolCounterInfo& c) { out.emplace_back(c.*name); });
  return out;
}

std::vector<std::string> joined(std::vector<std::string> a, const std::vector<std::string>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// integration/data/pgbouncer-1.25-show-columns.txt, without the "database" column, and
// PgBouncer 1.26's client_login_count after bind_count (its src/stats.c).
TEST(PoolCounters, ShowStatsColumnsArePgBouncers) {
  EXPECT_EQ(joined(names(&PoolCounterInfo::stats_total), names(&PoolCounterInfo::stats_average)),
            (std::vector<std::string>{"total_server_assignment_count",
                                      "total_xact_count",
                                      "total_query_count",
                                      "total_received",
                                      "total_sent",
                                      "total_xact_time",
                                      "total_query_time",
                                      "total_wait_time",
                                      "total_client_parse_count",
                                      "total_server_parse_count",
                                      "total_bind_count",
                                      "total_client_login_count",
                                      "avg_server_assignment_count",
                                      "avg_xact_count",
                                      "avg_query_count",
                                      "avg_recv",
                                      "avg_sent",
                                      "avg_xact_time",
                                      "avg_query_time",
                                      "avg_wait_time",
                                      "avg_client_parse_count",
                                      "avg_server_parse_count",
                                      "avg_bind_count",
                                      "avg_client_login_count"}));
  EXPECT_EQ(names(&PoolCounterInfo::stats_totals),
            (std::vector<std::string>{"server_assignment_count", "xact_count", "query_count",
                                      "bytes_received", "bytes_sent", "xact_time", "query_time",
                                      "wait_time", "client_parse_count", "server_parse_count",
                                      "bind_count", "client_login_count"}));
  EXPECT_EQ(names(&PoolCounterInfo::stats_averages),
            (std::vector<std::string>{
                "server_assignment_count", "xact_count", "query_count", "bytes_received",
                "bytes_sent", "xact_time", "query_time", "wait_time", "avg_client_parse_count",
                "avg_server_parse_count", "avg_bind_count", "avg_client_login_count"}));
}

TEST(PoolCounters, ShowTotalsRowsArePgBouncers) {
  EXPECT_EQ(joined(names(&PoolCounterInfo::totals_total), names(&PoolCounterInfo::totals_average)),
            (std::vector<std::string>{"total_server_assignment_count",
                                      "total_xact_count",
                                      "total_query_count",
                                      "total_client_bytes",
                                      "total_server_bytes",
                                      "total_xact_time",
                                      "total_query_time",
                                      "total_wait_time",
                                      "total_ps_client_parse_count",
                                      "total_ps_server_parse_count",
                                      "total_ps_bind_count",
                                      "total_client_login_count",
                                      "avg_server_assignment_count",
                                      "avg_xact_count",
                                      "avg_query_count",
                                      "avg_client_bytes",
                                      "avg_server_bytes",
                                      "avg_xact_time",
                                      "avg_query_time",
                                      "avg_wait_time",
                                      "avg_ps_client_parse_count",
                                      "avg_ps_server_parse_count",
                                      "avg_ps_bind_count",
                                      "avg_client_login_count"}));
}

TEST(PoolCounters, MetricsFamiliesAndTheirUnits) {
  std::vector<std::string> seconds;
  for_each_pool_counter_named(&PoolCounterInfo::metric, [&](const PoolCounterInfo& c) {
    if (c.microseconds) seconds.emplace_back(c.metric);
  });
  EXPECT_EQ(names(&PoolCounterInfo::metric).size(), 12u);
  EXPECT_EQ(seconds, (std::vector<std::string>{"pgsluice_xact_time_seconds_total",
                                               "pgsluice_query_time_seconds_total",
                                               "pgsluice_wait_time_seconds_total"}));
}

TEST(PoolCounters, SumAddsEveryField) {
  PoolCounters a, b;
  uint64_t v = 1;
  for (const PoolCounterInfo& c : kPoolCounters) {
    a.*c.field = v;
    b.*c.field = 100 * v++;
  }
  a += b;
  v = 1;
  for (const PoolCounterInfo& c : kPoolCounters) EXPECT_EQ(a.*c.field, 101 * v++);
}

TEST(PoolCounters, PreparedStatementCountsAveragePerSecondAndTheirOwnCountersNot) {
  PoolCounters old, cur;
  cur.client_parse_count = 20;
  cur.server_parse_count = 40;
  cur.bind_count = 60;
  cur.client_logins = 80;
  cur.prepared_evictions = 7;
  cur.prepared_retries = 9;
  const PoolAverages a = compute_averages(cur, old, 2'000'000);
  EXPECT_EQ(a.client_parse_count, 10u);
  EXPECT_EQ(a.server_parse_count, 20u);
  EXPECT_EQ(a.bind_count, 30u);
  EXPECT_EQ(a.client_logins, 40u);      // logins per second, as PgBouncer's avg_client_login_count
  EXPECT_EQ(a.prepared_evictions, 0u);  // no average: SHOW PREPARED shows the totals only
  EXPECT_EQ(a.prepared_retries, 0u);
}

}  // namespace
}  // namespace pgsluice
