// SET and SHOW CONFIG: settings parsed as in the file, printed as PgBouncer prints them, and
// only the online ones changeable; the new keys stats_period and metrics_*.
#include <gtest/gtest.h>

#include "pooler/config/config.h"
#include "pooler/config/settings_table.h"

namespace pgsluice {
namespace {

TEST(AdminSettings, ApplySettingParsesLikeTheFile) {
  Settings s;
  EXPECT_EQ(apply_setting(s, "default_pool_size", "7"), "");
  EXPECT_EQ(s.default_pool_size, 7);
  EXPECT_EQ(apply_setting(s, "Query_Wait_Timeout", "0.5"), "");
  EXPECT_EQ(s.query_wait_timeout.count(), 500);
  EXPECT_EQ(apply_setting(s, "stats_period", "15"), "");
  EXPECT_EQ(s.stats_period.count(), 15000);
  EXPECT_NE(apply_setting(s, "default_pool_size", "lots"), "");
  EXPECT_EQ(s.default_pool_size, 7);  // unchanged on error
  EXPECT_EQ(apply_setting(s, "no_such_key", "1"), "unknown setting");
}

TEST(AdminSettings, NewKeysLoadFromTheFile) {
  ConfigLoadResult r = load_config_string(
      "[pgsluice]\nstats_period = 30\nmetrics_addr = 0.0.0.0\nmetrics_port = 9127\n", "t.ini");
  for (const auto& e : r.errors) ADD_FAILURE() << e.to_string();
  ASSERT_NE(r.config, nullptr);
  EXPECT_TRUE(r.config->warnings.empty());
  EXPECT_EQ(r.config->settings.stats_period.count(), 30000);
  EXPECT_EQ(r.config->settings.metrics_addr, "0.0.0.0");
  EXPECT_EQ(r.config->settings.metrics_port, 9127);
  EXPECT_FALSE(load_config_string("[pgsluice]\nmetrics_port = 70000\n", "t.ini").errors.empty());
}

TEST(AdminSettings, ShowConfigRows) {
  Config c;
  c.settings.query_wait_timeout = std::chrono::milliseconds(1500);
  c.settings.admin_users = {"a", "b"};
  std::vector<SettingRow> rows = describe_settings(c);
  auto find = [&](std::string_view key) -> const SettingRow* {
    for (const auto& r : rows) {
      if (r.key == key) return &r;
    }
    return nullptr;
  };
  ASSERT_NE(find("query_wait_timeout"), nullptr);
  EXPECT_EQ(find("query_wait_timeout")->value, "1.5");
  EXPECT_EQ(find("query_wait_timeout")->default_value, "120");
  EXPECT_EQ(find("admin_users")->value, "a,b");
  EXPECT_EQ(find("log_connections")->value, "1");
  EXPECT_TRUE(find("default_pool_size")->changeable);
  EXPECT_FALSE(find("listen_port")->changeable);
  EXPECT_TRUE(is_changeable_setting("stats_period"));
  EXPECT_FALSE(is_changeable_setting("workers"));
  EXPECT_FALSE(is_changeable_setting("nonsense"));
  // Sorted by key, as PgBouncer lists them.
  for (size_t i = 1; i < rows.size(); ++i) EXPECT_LT(rows[i - 1].key, rows[i].key);
}

}  // namespace
}  // namespace pgsluice
