// Pool limits (pool_limits.h): PgBouncer's order of checks (pool size, reserve, database,
// user), min_pool_size's deficit, the staggered server_lifetime, idle timeout and check delay.
#include "pooler/core/pool_limits.h"

#include <gtest/gtest.h>

namespace pgsluice {
namespace {

LaunchInput base() {
  LaunchInput in;
  in.pool_size = 2;
  return in;
}

TEST(PoolLimits, BelowPoolSizeIsAllowed) {
  LaunchInput in = base();
  in.pool_servers = 1;
  EXPECT_EQ(launch_verdict(in), LaunchVerdict::allowed);
  in.pool_servers = 2;
  EXPECT_EQ(launch_verdict(in), LaunchVerdict::pool_full);
}

TEST(PoolLimits, ReserveOnlyWhenDueAndWithinIt) {
  LaunchInput in = base();
  in.pool_servers = 2;
  in.reserve_pool = 1;
  EXPECT_EQ(launch_verdict(in), LaunchVerdict::pool_full);  // nobody waited long enough
  in.reserve_due = true;
  EXPECT_EQ(launch_verdict(in), LaunchVerdict::allowed_reserve);
  in.pool_servers = 3;
  EXPECT_EQ(launch_verdict(in), LaunchVerdict::pool_full);  // the reserve is used up
  in.reserve_pool = 0;
  in.pool_servers = 2;
  EXPECT_EQ(launch_verdict(in), LaunchVerdict::pool_full);  // no reserve configured
}

TEST(PoolLimits, DatabaseLimitCountsEveryPoolOfTheDatabase) {
  LaunchInput in = base();
  in.pool_servers = 0;
  in.max_db_connections = 2;
  in.db_servers = 2;  // another user's pool holds both
  EXPECT_EQ(launch_verdict(in), LaunchVerdict::db_full);
  in.db_servers = 1;
  EXPECT_EQ(launch_verdict(in), LaunchVerdict::allowed);
  in.max_db_connections = 0;  // unlimited
  in.db_servers = 100;
  EXPECT_EQ(launch_verdict(in), LaunchVerdict::allowed);
}

TEST(PoolLimits, UserLimitAfterDatabaseLimit) {
  LaunchInput in = base();
  in.max_db_connections = 5;
  in.db_servers = 5;
  in.max_user_connections = 1;
  in.user_servers = 1;
  EXPECT_EQ(launch_verdict(in), LaunchVerdict::db_full);  // PgBouncer checks the database first
  in.db_servers = 4;
  EXPECT_EQ(launch_verdict(in), LaunchVerdict::user_full);
  in.user_servers = 0;
  EXPECT_EQ(launch_verdict(in), LaunchVerdict::allowed);
}

TEST(PoolLimits, ReserveDoesNotBypassDatabaseLimit) {
  LaunchInput in = base();
  in.pool_servers = 2;
  in.reserve_pool = 2;
  in.reserve_due = true;
  in.max_db_connections = 2;
  in.db_servers = 2;
  EXPECT_EQ(launch_verdict(in), LaunchVerdict::db_full);
  EXPECT_FALSE(launch_allowed(LaunchVerdict::db_full));
  EXPECT_TRUE(launch_allowed(LaunchVerdict::allowed_reserve));
  EXPECT_EQ(to_string(LaunchVerdict::user_full), "max_user_connections reached");
}

TEST(PoolLimits, MinPoolDeficitIsCappedAtPoolSize) {
  EXPECT_EQ(min_pool_deficit(3, 5, 0, true), 3);
  EXPECT_EQ(min_pool_deficit(3, 5, 2, true), 1);
  EXPECT_EQ(min_pool_deficit(3, 5, 4, true), 0);
  EXPECT_EQ(min_pool_deficit(10, 4, 1, true), 3);  // capped at pool_size
  EXPECT_EQ(min_pool_deficit(3, 5, 0, false), 0);  // no client and no forced user
  EXPECT_EQ(min_pool_deficit(0, 5, 0, true), 0);
}

TEST(PoolLimits, StaggeredLifetimeStaysWithinAQuarterAbove) {
  EXPECT_EQ(staggered_lifetime_ms(1000, 0), 1000u);
  EXPECT_EQ(staggered_lifetime_ms(1000, 0x80000000u), 1125u);  // half of the quarter
  EXPECT_EQ(staggered_lifetime_ms(1000, 0xffffffffu), 1249u);  // just under a quarter
  EXPECT_EQ(staggered_lifetime_ms(0, 0xffffffffu), 0u);        // 0: used once
  EXPECT_EQ(staggered_lifetime_ms(3'600'000, 0x40000000u), 3'825'000u);
  // No overflow for a lifetime of years.
  const uint64_t years = uint64_t{10} * 365 * 86'400'000;
  EXPECT_EQ(staggered_lifetime_ms(years, 0x80000000u), years + years / 8);
}

TEST(PoolLimits, LifetimeAndIdleTimeout) {
  EXPECT_FALSE(past_lifetime(1000, 500, 1500));  // exactly its lifetime: not past
  EXPECT_TRUE(past_lifetime(1000, 500, 1501));
  EXPECT_FALSE(past_lifetime(1000, 0, 1000));  // lifetime 0: past once time moves on
  EXPECT_TRUE(past_lifetime(1000, 0, 1001));
  EXPECT_FALSE(past_lifetime(2000, 0, 1000));           // clock before birth (never happens): keep
  EXPECT_FALSE(past_idle_timeout(1000, 0, 1'000'000));  // 0 disables
  EXPECT_FALSE(past_idle_timeout(1000, 600, 1600));
  EXPECT_TRUE(past_idle_timeout(1000, 600, 1601));
}

TEST(PoolLimits, CheckDue) {
  EXPECT_FALSE(check_due(false, false, 0, 0, 100'000));  // no query: no check
  EXPECT_FALSE(check_due(true, true, 0, 0, 100'000));    // fresh: logged in or just checked
  EXPECT_TRUE(check_due(true, false, 1000, 0, 1000));    // delay 0: always
  EXPECT_FALSE(check_due(true, false, 1000, 30'000, 31'000));
  EXPECT_TRUE(check_due(true, false, 1000, 30'000, 31'001));
}

}  // namespace
}  // namespace pgsluice
