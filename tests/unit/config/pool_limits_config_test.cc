// The pool-limit and server-lifecycle keys (docs/operations.md): main-section values and their
// defaults, per-database and per-user overrides, and bad values rejected with their line.
#include <gtest/gtest.h>

#include "pooler/config/config.h"
#include "tests/unit/config/load_ok.h"

namespace pgsluice {
namespace {

using std::chrono::milliseconds;

TEST(PoolLimitsConfig, DefaultsArePgBouncers) {
  auto c = load_ok("[pgsluice]\n");
  ASSERT_NE(c, nullptr);
  const Settings& s = c->settings;
  EXPECT_EQ(s.min_pool_size, 0);
  EXPECT_EQ(s.reserve_pool_size, 0);
  EXPECT_EQ(s.reserve_pool_timeout, milliseconds(5000));
  EXPECT_EQ(s.max_db_connections, 0);
  EXPECT_EQ(s.max_user_connections, 0);
  EXPECT_EQ(s.server_lifetime, milliseconds(3'600'000));
  EXPECT_EQ(s.server_idle_timeout, milliseconds(600'000));
  EXPECT_EQ(s.server_check_query, "<empty>");
  EXPECT_EQ(s.server_check_delay, milliseconds(30'000));
  EXPECT_FALSE(s.server_reset_query_always);
  EXPECT_FALSE(s.server_fast_close);
  EXPECT_TRUE(c->warnings.empty());
}

TEST(PoolLimitsConfig, MainSectionValues) {
  auto c = load_ok(
      "[pgbouncer]\nmin_pool_size = 2\nreserve_pool_size = 3\nreserve_pool_timeout = 0.5\n"
      "max_db_connections = 7\nmax_user_connections = 9\nserver_lifetime = 1\n"
      "server_idle_timeout = 2min\nserver_check_query =\nserver_check_delay = 0\n"
      "server_reset_query_always = 1\nserver_fast_close = yes\n");
  ASSERT_NE(c, nullptr);
  const Settings& s = c->settings;
  EXPECT_EQ(s.min_pool_size, 2);
  EXPECT_EQ(s.reserve_pool_size, 3);
  EXPECT_EQ(s.reserve_pool_timeout, milliseconds(500));
  EXPECT_EQ(s.max_db_connections, 7);
  EXPECT_EQ(s.max_user_connections, 9);
  EXPECT_EQ(s.server_lifetime, milliseconds(1000));
  EXPECT_EQ(s.server_idle_timeout, milliseconds(120'000));
  EXPECT_EQ(s.server_check_query, "");
  EXPECT_EQ(s.server_check_delay, milliseconds(0));
  EXPECT_TRUE(s.server_reset_query_always);
  EXPECT_TRUE(s.server_fast_close);
  EXPECT_TRUE(c->warnings.empty()) << c->warnings.front();
}

TEST(PoolLimitsConfig, PerDatabaseAndPerUserOverrides) {
  auto c = load_ok(
      "[pgsluice]\nmin_pool_size = 1\nreserve_pool_size = 2\nmax_db_connections = 30\n"
      "max_user_connections = 40\nserver_lifetime = 100\n"
      "[databases]\n"
      "a = host=h min_pool_size=3 reserve_pool=4 max_db_connections=5 server_lifetime=6\n"
      "b = host=h reserve_pool_size=8\n"
      "c = host=h\n"
      "[users]\n"
      "bob = max_user_connections=11\n");
  ASSERT_NE(c, nullptr);
  const DatabaseEntry a = *c->find_database("a");
  const DatabaseEntry b = *c->find_database("b");
  const DatabaseEntry plain = *c->find_database("c");
  EXPECT_EQ(c->min_pool_size_for(a), 3);
  EXPECT_EQ(c->reserve_pool_for(a), 4);
  EXPECT_EQ(c->max_db_connections_for(a), 5);
  EXPECT_EQ(c->server_lifetime_for(a), milliseconds(6000));
  EXPECT_EQ(c->reserve_pool_for(b), 8);  // PgBouncer 1.24's spelling
  EXPECT_EQ(c->min_pool_size_for(plain), 1);
  EXPECT_EQ(c->reserve_pool_for(plain), 2);
  EXPECT_EQ(c->max_db_connections_for(plain), 30);
  EXPECT_EQ(c->server_lifetime_for(plain), milliseconds(100'000));
  EXPECT_EQ(c->max_user_connections_for("bob"), 11);
  EXPECT_EQ(c->max_user_connections_for("alice"), 40);
  EXPECT_TRUE(c->warnings.empty());
}

TEST(PoolLimitsConfig, ClientConnectionLimitsInheritBelowOne) {
  // PgBouncer's database_max_client_connections / user_client_max_connections: a value of 0 in
  // a [databases] or [users] line means the main section's.
  auto c = load_ok(
      "[pgsluice]\nmax_db_client_connections = 50\nmax_user_client_connections = 60\n"
      "[databases]\n"
      "a = host=h max_db_client_connections=3\n"
      "b = host=h max_db_client_connections=0\n"
      "c = host=h\n"
      "[users]\n"
      "bob = max_user_client_connections=7\n"
      "eve = max_user_client_connections=0\n");
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->max_db_client_connections_for("a"), 3);
  EXPECT_EQ(c->max_db_client_connections_for("b"), 50);
  EXPECT_EQ(c->max_db_client_connections_for("c"), 50);
  EXPECT_EQ(c->max_db_client_connections_for("not-configured"), 50);
  EXPECT_EQ(c->max_user_client_connections_for("bob"), 7);
  EXPECT_EQ(c->max_user_client_connections_for("eve"), 60);
  EXPECT_EQ(c->max_user_client_connections_for("alice"), 60);
}

TEST(PoolLimitsConfig, AUsersPoolSizeWinsOverTheDatabases) {
  // PgBouncer 1.25's pool_pool_size / pool_res_pool_size: the [users] value first.
  auto c = load_ok(
      "[pgsluice]\ndefault_pool_size = 20\nreserve_pool_size = 1\n"
      "[databases]\n"
      "a = host=h pool_size=5 reserve_pool=2\n"
      "b = host=h\n"
      "[users]\n"
      "bob = pool_size=2 reserve_pool_size=0\n"
      "carol = pool_size=7\n");
  ASSERT_NE(c, nullptr);
  const DatabaseEntry a = *c->find_database("a");
  const DatabaseEntry b = *c->find_database("b");
  EXPECT_EQ(c->pool_size_for(a, "bob"), 2);
  EXPECT_EQ(c->pool_size_for(b, "bob"), 2);
  EXPECT_EQ(c->reserve_pool_for(a, "bob"), 0);
  EXPECT_EQ(c->pool_size_for(a, "carol"), 7);
  EXPECT_EQ(c->reserve_pool_for(a, "carol"), 2);  // not set for carol: the database's
  EXPECT_EQ(c->pool_size_for(a, "alice"), 5);
  EXPECT_EQ(c->pool_size_for(b, "alice"), 20);
  EXPECT_EQ(c->reserve_pool_for(b, "alice"), 1);
  EXPECT_TRUE(c->warnings.empty()) << c->warnings.front();
  // Out of range is an error with its line, as on a [databases] line.
  EXPECT_FALSE(
      load_config_string("[users]\nbob = pool_size=0\n[pgsluice]\n", "t.ini").errors.empty());
}

TEST(PoolLimitsConfig, BadValuesAreErrorsWithTheirLine) {
  struct Case {
    const char* text;
    int line;
    const char* needle;
  };
  const Case cases[] = {
      {"[pgsluice]\n\nmin_pool_size = -1\n", 3, "min_pool_size"},
      {"[pgsluice]\nreserve_pool_timeout = soon\n", 2, "reserve_pool_timeout"},
      {"[pgsluice]\nserver_fast_close = maybe\n", 2, "server_fast_close"},
      {"[databases]\nx = host=h max_db_connections=lots\n", 2, "max_db_connections"},
      {"[databases]\nx = host=h server_lifetime=forever\n", 2, "server_lifetime"},
      {"[users]\n\nbob = max_user_connections=-3\n", 3, "max_user_connections"},
  };
  for (const Case& k : cases) {
    ConfigLoadResult r = load_config_string(k.text, "t.ini");
    ASSERT_EQ(r.errors.size(), 1u) << k.text;
    EXPECT_EQ(r.errors[0].line, k.line) << k.text;
    EXPECT_NE(r.errors[0].to_string().find(k.needle), std::string::npos) << r.errors[0].to_string();
  }
}

}  // namespace
}  // namespace pgsluice
