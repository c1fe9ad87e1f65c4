// pgbouncer_exporter's names from made-up SHOW results: columns mapped by name (a renamed or
// missing column, NULL cells), microseconds as seconds, label values escaped, one family per
// metric, SHOW CLIENTS counted.
#include "pooler/admin/exporter_metrics.h"

#include <gtest/gtest.h>

#include <set>
#include <sstream>

namespace pgsluice {
namespace {

ExporterSources sample() {
  ExporterSources in;
  in.databases.text("name").text("host").int4("port").text("database").text("force_user");
  in.databases.int4("pool_size").int4("reserve_pool_size").text("pool_mode");
  in.databases.int4("current_connections").int4("paused").int4("disabled");
  in.databases.row().add("app").add("127.0.0.1").add(5432).add("appdb").add_null().add(20).add(3);
  in.databases.add("transaction").add(2).add(0).add(1);
  in.stats.text("database").numeric("total_query_count").numeric("total_query_time");
  in.stats.row().add("app").add(int64_t{42}).add(int64_t{1'500'000});
  in.stats_totals.text("database").numeric("query_count").numeric("bind_count");
  in.stats_totals.row().add("app").add(int64_t{42}).add(int64_t{7});
  in.pools.text("database").text("user").int4("cl_active").numeric("maxwait").int4("sv_tested");
  in.pools.row().add("app").add("we\"ird").add(4).add(int64_t{2}).add(0);
  in.lists.text("list").int4("items");
  in.lists.row().add("databases").add(2).row().add("used_clients").add(9);
  in.lists.row().add("peers").add(0);  // not one of the exporter's
  in.config.text("key").text("value").text("default").text("changeable");
  in.config.row().add("max_client_conn").add("100").add("100").add("yes");
  in.config.row().add("listen_addr").add("*").add("127.0.0.1").add("no");
  in.version.text("version");
  in.version.row().add("pgsluice 0.1.0");
  in.clients.text("user").text("database").text("state").text("application_name");
  in.clients.row().add("app").add("app").add("active").add("psql");
  in.clients.row().add("app").add("app").add("active").add("psql");
  in.clients.row().add("app").add("app").add("idle").add_null();
  return in;
}

std::string render() {
  std::string out;
  write_exporter_metrics(out, sample());
  return out;
}

bool has_line(const std::string& text, const std::string& line) {
  std::istringstream in(text);
  for (std::string l; std::getline(in, l);) {
    if (l == line) return true;
  }
  return false;
}

TEST(ExporterMetrics, ExporterNamesAndLabels) {
  const std::string out = render();
  EXPECT_TRUE(has_line(out, "pgbouncer_up 1")) << out;
  EXPECT_TRUE(has_line(out, "pgbouncer_version_info{version=\"pgsluice 0.1.0\"} 1")) << out;
  EXPECT_TRUE(has_line(out, "pgbouncer_databases 2")) << out;
  EXPECT_TRUE(has_line(out, "pgbouncer_used_clients 9")) << out;
  EXPECT_TRUE(has_line(out, "pgbouncer_config_max_client_connections 100")) << out;
  const std::string db_labels =
      "{name=\"app\",host=\"127.0.0.1\",port=\"5432\",database=\"appdb\",force_user=\"\","
      "pool_mode=\"transaction\"}";
  EXPECT_TRUE(has_line(out, "pgbouncer_databases_pool_size" + db_labels + " 20")) << out;
  // PgBouncer 1.24 renamed reserve_pool to reserve_pool_size; the exporter's name stayed.
  EXPECT_TRUE(has_line(out, "pgbouncer_databases_reserve_pool" + db_labels + " 3")) << out;
  EXPECT_TRUE(has_line(out, "pgbouncer_databases_disabled" + db_labels + " 1")) << out;
  EXPECT_TRUE(has_line(out, "pgbouncer_stats_queries_pooled_total{database=\"app\"} 42")) << out;
  EXPECT_TRUE(has_line(out, "pgbouncer_stats_queries_duration_seconds_total{database=\"app\"} 1.5"))
      << out;
  EXPECT_TRUE(has_line(out, "pgbouncer_stats_totals_queries_pooled_total{database=\"app\"} 42"))
      << out;
  EXPECT_TRUE(has_line(out, "pgbouncer_stats_totals_binds_total{database=\"app\"} 7")) << out;
  const std::string pool = "{database=\"app\",user=\"we\\\"ird\"}";
  EXPECT_TRUE(has_line(out, "pgbouncer_pools_client_active_connections" + pool + " 4")) << out;
  EXPECT_TRUE(has_line(out, "pgbouncer_pools_client_maxwait_seconds" + pool + " 2")) << out;
  EXPECT_TRUE(has_line(out, "pgbouncer_pools_server_testing_connections" + pool + " 0")) << out;
  EXPECT_TRUE(has_line(out,
                       "pgbouncer_client_connections{database=\"app\",user=\"app\","
                       "application_name=\"psql\",state=\"active\"} 2"))
      << out;
  EXPECT_TRUE(has_line(out,
                       "pgbouncer_client_connections{database=\"app\",user=\"app\","
                       "application_name=\"\",state=\"idle\"} 1"))
      << out;
}

TEST(ExporterMetrics, OnlyColumnsTheResultHasAndEachFamilyOnce) {
  const std::string out = render();
  // No sv_login column in the sample: no family; "peers" is not an exporter list.
  EXPECT_EQ(out.find("pgbouncer_pools_server_login_connections"), std::string::npos);
  EXPECT_EQ(out.find("pgbouncer_peers"), std::string::npos);
  std::istringstream in(out);
  std::set<std::string> declared;
  std::string family;
  for (std::string l; std::getline(in, l);) {
    if (l.rfind("# TYPE ", 0) == 0) {
      family = l.substr(7, l.find(' ', 7) - 7);
      EXPECT_TRUE(declared.insert(family).second) << family << " declared twice";
    } else if (l.rfind("#", 0) != 0) {
      EXPECT_EQ(l.rfind(family, 0), 0u) << l << " is outside its family " << family;
    }
  }
}

}  // namespace
}  // namespace pgsluice
