// PoolHosts (which host the next server logs in to, which to skip) and the target_session_attrs
// check against a server's reported role (host_roles.h).
#include "pooler/core/pool_hosts.h"

#include <gtest/gtest.h>

#include <atomic>

#include "pooler/core/host_role_board.h"
#include "pooler/core/host_roles.h"
#include "pooler/session_state/params.h"

namespace pgsluice {
namespace {

DatabaseEntry three_hosts(LoadBalanceHosts policy) {
  DatabaseEntry db;
  db.host = "h0,h1,h2";
  db.port = 5432;
  db.load_balance_hosts = policy;
  return db;
}

TEST(PoolHosts, RoundRobinSpreadsNewServers) {
  PoolHosts hosts(three_hosts(LoadBalanceHosts::round_robin));
  EXPECT_EQ(hosts.pick(0, 0), 0u);
  EXPECT_EQ(hosts.pick(0, 0), 1u);
  EXPECT_EQ(hosts.pick(0, 0), 2u);
  EXPECT_EQ(hosts.pick(0, 0), 0u);
  EXPECT_EQ(hosts.at(1).to_string(), "h1:5432");
}

TEST(PoolHosts, RoundRobinTurnsOverEveryWorkersShare) {
  // Two workers' shares of one pool: the turn is the pool's, so their servers spread as one
  // share's would (each share's own turn sent both first servers to h0).
  std::atomic<uint64_t> turn{0};
  PoolHosts first(three_hosts(LoadBalanceHosts::round_robin));
  PoolHosts second(three_hosts(LoadBalanceHosts::round_robin));
  EXPECT_EQ(first.pick(0, 0, turn), 0u);
  EXPECT_EQ(second.pick(0, 0, turn), 1u);
  EXPECT_EQ(second.pick(0, 0, turn), 2u);
  // A host one share found failing is skipped, and the turn goes on after the one taken.
  first.login_failed(0, 1000);
  EXPECT_EQ(first.pick(10, 0, turn), 1u);
  EXPECT_EQ(second.pick(10, 0, turn), 2u);
  EXPECT_EQ(turn.load(), 3u);
}

TEST(PoolHosts, DisableTakesTheFirstUsableInOrder) {
  PoolHosts hosts(three_hosts(LoadBalanceHosts::disable));
  EXPECT_EQ(hosts.pick(0, 7), 0u);
  EXPECT_EQ(hosts.pick(0, 7), 0u);
  hosts.login_failed(0, 1000);
  EXPECT_EQ(hosts.pick(10, 7), 1u);
  EXPECT_EQ(hosts.pick(1000, 7), 0u);  // its back-off is over: asked again
}

TEST(PoolHosts, RandomStartsWhereTheDrawSays) {
  PoolHosts hosts(three_hosts(LoadBalanceHosts::random));
  EXPECT_EQ(hosts.pick(0, 5), 2u);
  EXPECT_EQ(hosts.pick(0, 3), 0u);
}

TEST(PoolHosts, FailedAndMismatchedHostsAreSkipped) {
  PoolHosts hosts(three_hosts(LoadBalanceHosts::round_robin));
  hosts.login_failed(0, 15'000);
  hosts.role_mismatched(1, 100, /*primary=*/false);
  EXPECT_TRUE(hosts.any_usable(100));
  EXPECT_EQ(hosts.pick(100, 0), 2u);
  hosts.role_mismatched(2, 100, false);
  EXPECT_FALSE(hosts.any_usable(100));
  EXPECT_EQ(hosts.pick(100, 0), PoolHosts::kNone);
  // A failover in progress: hosts answered with the wrong role, clients should wait.
  EXPECT_TRUE(hosts.any_role_mismatch(100));
  // The recheck comes a second later; the failed host still waits for server_login_retry.
  EXPECT_EQ(hosts.pick(100 + PoolHosts::kRoleRecheckMs, 0), 1u);
  hosts.logged_in(1);
  EXPECT_FALSE(hosts.any_role_mismatch(100 + PoolHosts::kRoleRecheckMs));
}

TEST(PoolHosts, OnlyFailedHostsMeanNoFailoverToWaitFor) {
  PoolHosts hosts(three_hosts(LoadBalanceHosts::round_robin));
  for (size_t i = 0; i < 3; ++i) hosts.login_failed(i, 15'000);
  EXPECT_FALSE(hosts.any_usable(10));
  EXPECT_FALSE(hosts.any_role_mismatch(10));
}

TEST(PoolHosts, StandbyMayExistUntilEveryOtherHostIsPrimaryOrDown) {
  PoolHosts hosts(three_hosts(LoadBalanceHosts::round_robin));
  EXPECT_TRUE(hosts.standby_may_exist(0, 0));
  hosts.role_mismatched(1, 0, /*primary=*/true);
  EXPECT_TRUE(hosts.standby_may_exist(0, 0));  // h2 untried
  hosts.login_failed(2, 15'000);
  EXPECT_FALSE(hosts.standby_may_exist(0, 0));
}

ServerRole reported(const char* hot_standby, const char* read_only) {
  ParameterSet p;
  if (hot_standby != nullptr) p.set("in_hot_standby", hot_standby);
  if (read_only != nullptr) p.set("default_transaction_read_only", read_only);
  return role_of(p);
}

TEST(HostRoles, ReportedParametersMakeTheRole) {
  EXPECT_FALSE(reported("off", "off").hot_standby);
  EXPECT_FALSE(reported("off", "off").read_only);
  EXPECT_TRUE(reported("on", "off").hot_standby);
  EXPECT_TRUE(reported("on", "off").read_only);
  EXPECT_FALSE(reported("off", "on").hot_standby);
  EXPECT_TRUE(reported("off", "on").read_only);
  // A server older than 14 reports neither: taken for a read-write primary.
  EXPECT_FALSE(reported(nullptr, nullptr).read_only);
}

TEST(HostRoles, TargetSessionAttrsAsLibpq) {
  const ServerRole primary = reported("off", "off");
  const ServerRole read_only_primary = reported("off", "on");
  const ServerRole standby = reported("on", "off");
  using T = TargetSessionAttrs;
  EXPECT_EQ(role_mismatch(T::any, standby, true), "");
  EXPECT_EQ(role_mismatch(T::read_write, primary, true), "");
  EXPECT_EQ(role_mismatch(T::read_write, standby, true), "session is read-only");
  EXPECT_EQ(role_mismatch(T::read_write, read_only_primary, true), "session is read-only");
  EXPECT_EQ(role_mismatch(T::read_only, read_only_primary, true), "");
  EXPECT_EQ(role_mismatch(T::read_only, primary, true), "session is not read-only");
  EXPECT_EQ(role_mismatch(T::primary, read_only_primary, true), "");
  EXPECT_EQ(role_mismatch(T::primary, standby, true), "server is in hot standby mode");
  EXPECT_EQ(role_mismatch(T::standby, standby, true), "");
  EXPECT_EQ(role_mismatch(T::standby, primary, false), "server is not in hot standby mode");
  EXPECT_EQ(role_mismatch(T::prefer_standby, standby, true), "");
  EXPECT_EQ(role_mismatch(T::prefer_standby, primary, true), "server is not in hot standby mode");
  EXPECT_EQ(role_mismatch(T::prefer_standby, primary, false), "");  // libpq's second pass
}

TEST(PoolHosts, AHostFailsOnceUntilItLogsInAgain) {
  PoolHosts hosts(three_hosts(LoadBalanceHosts::round_robin));
  EXPECT_EQ(hosts.failing_since(1), 0u);
  EXPECT_TRUE(hosts.start_failing(1, 500));
  EXPECT_FALSE(hosts.start_failing(1, 1500));  // still the same failure: no second event
  EXPECT_EQ(hosts.failing_since(1), 500u);
  hosts.login_failed(1, 2500);
  EXPECT_EQ(hosts.usable_count(1000), 2u);
  hosts.logged_in(1);
  EXPECT_EQ(hosts.failing_since(1), 0u);
  EXPECT_EQ(hosts.usable_count(1000), 3u);
}

TEST(PoolHosts, ARoleChangeIsTheRoleItHadBefore) {
  PoolHosts hosts(three_hosts(LoadBalanceHosts::round_robin));
  EXPECT_FALSE(hosts.primary(0));
  EXPECT_FALSE(hosts.note_primary(0, /*primary=*/false));  // learned, not changed
  EXPECT_FALSE(hosts.note_primary(0, false));
  EXPECT_EQ(hosts.note_primary(0, true), std::optional<bool>(false));  // promoted
  EXPECT_EQ(hosts.primary(0), std::optional<bool>(true));
  hosts.reset(three_hosts(LoadBalanceHosts::round_robin));
  EXPECT_FALSE(hosts.primary(0));  // a reload forgets what was learned
}

TEST(PoolHosts, RoleRechecksHastenDuringAnOutage) {
  PoolHosts hosts(three_hosts(LoadBalanceHosts::disable));
  hosts.login_failed(0, 5000);  // the primary is gone, for server_login_retry
  hosts.role_mismatched(1, 100, /*primary=*/false);
  hosts.role_mismatched(2, 150, false);
  EXPECT_EQ(hosts.next_usable_ms(200), 100 + PoolHosts::kRoleRecheckMs);
  // No host left: each standby is asked again 100 ms after it answered, the failed host only
  // after its server_login_retry.
  hosts.hasten_role_rechecks(PoolHosts::kFastRoleRecheckMs);
  EXPECT_EQ(hosts.next_usable_ms(150), 100 + PoolHosts::kFastRoleRecheckMs);
  EXPECT_EQ(hosts.pick(199, 0), PoolHosts::kNone);
  EXPECT_TRUE(hosts.recheck_due(1, 200));
  EXPECT_FALSE(hosts.recheck_due(2, 200));
  EXPECT_EQ(hosts.pick(200, 0), 1u);
  EXPECT_FALSE(hosts.recheck_due(0, 6000));  // a failed host is no recheck
}

TEST(PoolHosts, AHostLearnedToFitIsUsableAtOnce) {
  PoolHosts hosts(three_hosts(LoadBalanceHosts::disable));
  hosts.login_failed(0, 5000);
  hosts.role_mismatched(1, 100, false);
  hosts.role_may_fit(1);  // another pool saw it promoted
  EXPECT_EQ(hosts.pick(101, 0), 1u);
  hosts.role_may_fit(0);  // a failed login is not a role: still skipped
  EXPECT_TRUE(hosts.skipped(0, 101));
}

TEST(HostRoles, WhatAHostsRoleSaysToAnEntry) {
  using T = TargetSessionAttrs;
  EXPECT_EQ(role_worth_a_login(T::read_write, true), std::optional<bool>(true));
  EXPECT_EQ(role_worth_a_login(T::read_write, false), std::optional<bool>(false));
  EXPECT_EQ(role_worth_a_login(T::primary, false), std::optional<bool>(false));
  EXPECT_EQ(role_worth_a_login(T::standby, true), std::optional<bool>(false));
  EXPECT_EQ(role_worth_a_login(T::standby, false), std::optional<bool>(true));
  // A primary may be read-only (default_transaction_read_only), or prefer-standby's last host.
  EXPECT_FALSE(role_worth_a_login(T::read_only, true));
  EXPECT_FALSE(role_worth_a_login(T::prefer_standby, true));
  EXPECT_FALSE(role_worth_a_login(T::any, true));
}

TEST(HostRoleBoard, ARoleChangeIsNewsForEveryPool) {
  HostRoleBoard board;
  std::optional<bool> was;
  const uint64_t first = board.tell("h1:5432", /*primary=*/false, was);
  EXPECT_FALSE(was);  // the first word on the host: no change to announce
  EXPECT_EQ(board.news(), 1u);
  // Another pool tells the same: no news.
  EXPECT_EQ(board.tell("h1:5432", false, was), first);
  EXPECT_EQ(board.news(), 1u);
  const uint64_t promoted = board.tell("h1:5432", true, was);
  EXPECT_EQ(was, std::optional<bool>(false));
  EXPECT_GT(promoted, first);
  ASSERT_TRUE(board.known("h1:5432"));
  EXPECT_TRUE(board.known("h1:5432")->primary);
  EXPECT_EQ(board.known("h1:5432")->seq, promoted);
  EXPECT_FALSE(board.known("h2:5432"));
}

TEST(HostRoleBoard, OneCheckPerHostAtATime) {
  HostRoleBoard board;
  EXPECT_TRUE(board.may_check("h1:5432", 1000, 100));
  board.begin_check("h1:5432", 1000);
  EXPECT_FALSE(board.may_check("h1:5432", 1050, 100));  // in flight
  EXPECT_TRUE(board.may_check("h2:5432", 1050, 100));   // another host
  board.end_check("h1:5432");
  EXPECT_FALSE(board.may_check("h1:5432", 1050, 100));  // over, but asked 50 ms ago
  EXPECT_TRUE(board.may_check("h1:5432", 1100, 100));
  // A check whose login never ends is not waited for longer than kCheckTimeoutMs.
  board.begin_check("h1:5432", 2000);
  EXPECT_FALSE(board.may_check("h1:5432", 2500, 100));
  EXPECT_TRUE(board.may_check("h1:5432", 2000 + HostRoleBoard::kCheckTimeoutMs, 100));
  // A told role ends the check.
  board.begin_check("h1:5432", 5000);
  std::optional<bool> was;
  board.tell("h1:5432", true, was);
  EXPECT_TRUE(board.may_check("h1:5432", 5100, 100));
}

}  // namespace
}  // namespace pgsluice
