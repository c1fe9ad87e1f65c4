// The Prometheus exposition: every line is a comment (HELP/TYPE) or a valid sample, labels are
// escaped, histograms are cumulative with +Inf equal to _count, and times are exact seconds.
#include "pooler/admin/metrics_format.h"

#include <gtest/gtest.h>

#include <map>
#include <regex>
#include <sstream>

namespace pgsluice {
namespace {

std::vector<PoolMetrics> sample_pools() {
  PoolMetrics p;
  p.gauges.database = "app";
  p.gauges.user = "we\"ird\\user\n";
  p.gauges.cl_active = 200;
  p.gauges.cl_waiting = 195;
  p.gauges.sv_active = 5;
  p.gauges.maxwait_us = 1'500'000;
  p.gauges.pool_size = 5;
  p.totals.transactions = 1234;
  p.totals.xact_time_us = 1'234'567;
  p.xact_time.observe(150);
  p.xact_time.observe(3000);
  p.xact_time.observe(99'000'000);
  PoolMetrics q;
  q.gauges.database = "other";
  q.gauges.user = "u";
  return {p, q};
}

TEST(MetricsFormat, EveryLineIsValidExposition) {
  std::string out;
  ProcessMetrics process{.clients = 3,
                         .login_clients = 1,
                         .uptime_seconds = 9,
                         .paused = false,
                         .findings = {{"set", "warn", "app", "a\"b", 7}},
                         .findings_dropped = 0,
                         .client_buffer_bytes = 4096,
                         .server_buffer_bytes = 8192,
                         .refusals = {{"oversized_login_message", 2}}};
  write_prometheus(out, sample_pools(), process);
  const std::regex comment(R"(^# (HELP|TYPE) [a-zA-Z_:][a-zA-Z0-9_:]* .+$)");
  const std::regex sample(
      R"(^[a-zA-Z_:][a-zA-Z0-9_:]*(\{([a-zA-Z_][a-zA-Z0-9_]*="([^"\\\n]|\\\\|\\"|\\n)*",?)*\})? -?[0-9]+(\.[0-9]+)?([eE][-+]?[0-9]+)?$)");
  std::istringstream in(out);
  std::string line;
  int samples = 0;
  std::map<std::string, std::string> types;
  while (std::getline(in, line)) {
    if (line.starts_with("#")) {
      EXPECT_TRUE(std::regex_match(line, comment)) << line;
      if (line.starts_with("# TYPE ")) {
        std::string rest = line.substr(7);
        std::string name = rest.substr(0, rest.find(' '));
        EXPECT_FALSE(types.contains(name)) << "TYPE twice: " << name;
        types[name] = rest.substr(rest.find(' ') + 1);
      }
      continue;
    }
    EXPECT_TRUE(std::regex_match(line, sample)) << line;
    ++samples;
  }
  EXPECT_GT(samples, 50);
  EXPECT_EQ(types["pgsluice_pool_cl_waiting"], "gauge");
  EXPECT_EQ(types["pgsluice_transactions_total"], "counter");
  EXPECT_EQ(types["pgsluice_transaction_duration_seconds"], "histogram");
  EXPECT_NE(out.find("pgsluice_session_state_findings_total{kind=\"set\",action=\"warn\","
                     "database=\"app\",user=\"a\\\"b\"} 7\n"),
            std::string::npos)
      << out;
  EXPECT_EQ(types["pgsluice_refused_total"], "counter");
  EXPECT_EQ(types["pgsluice_buffer_bytes"], "gauge");
  EXPECT_NE(out.find("pgsluice_refused_total{reason=\"oversized_login_message\"} 2\n"),
            std::string::npos);
  EXPECT_NE(out.find("pgsluice_buffer_bytes{side=\"server\"} 8192\n"), std::string::npos);
}

TEST(MetricsFormat, ValuesAndLabels) {
  std::string out;
  write_prometheus(out, sample_pools(), ProcessMetrics{});
  const std::string labels = R"(database="app",user="we\"ird\\user\n")";
  EXPECT_NE(out.find("pgsluice_pool_cl_waiting{" + labels + "} 195\n"), std::string::npos);
  EXPECT_NE(out.find("pgsluice_pool_maxwait_seconds{" + labels + "} 1.500000\n"),
            std::string::npos);
  EXPECT_NE(out.find("pgsluice_transactions_total{" + labels + "} 1234\n"), std::string::npos);
  EXPECT_NE(out.find("pgsluice_xact_time_seconds_total{" + labels + "} 1.234567\n"),
            std::string::npos);
  // Histogram: cumulative buckets, +Inf == count, exact sum.
  EXPECT_NE(
      out.find("pgsluice_transaction_duration_seconds_bucket{" + labels + ",le=\"0.00025\"} 1\n"),
      std::string::npos)
      << out;
  EXPECT_NE(
      out.find("pgsluice_transaction_duration_seconds_bucket{" + labels + ",le=\"0.005\"} 2\n"),
      std::string::npos);
  EXPECT_NE(
      out.find("pgsluice_transaction_duration_seconds_bucket{" + labels + ",le=\"+Inf\"} 3\n"),
      std::string::npos);
  EXPECT_NE(out.find("pgsluice_transaction_duration_seconds_count{" + labels + "} 3\n"),
            std::string::npos);
  EXPECT_NE(out.find("pgsluice_transaction_duration_seconds_sum{" + labels + "} 99.003150\n"),
            std::string::npos);
}

TEST(MetricsFormat, ServersByHostAndRole) {
  std::vector<PoolMetrics> pools = sample_pools();
  pools[1].gauges.servers_by_host[{"10.0.0.1:5432", "primary"}] = 3;
  pools[1].gauges.servers_by_host[{"/run/\"pg\"/.s.PGSQL.5432", "standby"}] = 1;
  pools[1].gauges.sv_primary = 3;
  std::string out;
  write_prometheus(out, pools, ProcessMetrics{});
  EXPECT_NE(out.find("pgsluice_pool_host_servers{database=\"other\",user=\"u\","
                     "host=\"10.0.0.1:5432\",role=\"primary\"} 3\n"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("host=\"/run/\\\"pg\\\"/.s.PGSQL.5432\",role=\"standby\"} 1\n"),
            std::string::npos);
  EXPECT_NE(out.find("pgsluice_pool_sv_primary{database=\"other\",user=\"u\"} 3\n"),
            std::string::npos);
}

TEST(MetricsFormat, EscapeLabelValue) {
  EXPECT_EQ(escape_label_value("plain"), "plain");
  EXPECT_EQ(escape_label_value("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
}

}  // namespace
}  // namespace pgsluice
