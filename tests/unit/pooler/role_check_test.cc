// The role check's answer (role_check.h): pg_is_in_recovery() and transaction_read_only as
// text, read into the role that target_session_attrs is checked against.
#include "pooler/core/role_check.h"

#include <gtest/gtest.h>

#include "pooler/session_state/params.h"

namespace pgsluice {
namespace {

protocol::DataRow row(std::optional<std::string_view> recovery,
                      std::optional<std::string_view> read_only) {
  return protocol::DataRow{{recovery, read_only}};
}

TEST(RoleCheck, ReadsAStandbyAPrimaryAndAReadOnlyPrimary) {
  auto standby = RoleCheck::parse_row(row("t", "on"));
  ASSERT_TRUE(standby);
  EXPECT_TRUE(standby->hot_standby);
  EXPECT_TRUE(standby->read_only);
  auto primary = RoleCheck::parse_row(row("f", "off"));
  ASSERT_TRUE(primary);
  EXPECT_FALSE(primary->hot_standby);
  EXPECT_FALSE(primary->read_only);
  auto read_only = RoleCheck::parse_row(row("f", "on"));
  ASSERT_TRUE(read_only);
  EXPECT_FALSE(read_only->hot_standby);
  EXPECT_TRUE(read_only->read_only);
  EXPECT_TRUE(role_mismatch(TargetSessionAttrs::read_write, *read_only, false).size() > 0);
  EXPECT_TRUE(role_mismatch(TargetSessionAttrs::primary, *read_only, false).empty());
}

TEST(RoleCheck, RefusesAnAnswerItCannotRead) {
  EXPECT_FALSE(RoleCheck::parse_row(row(std::nullopt, "on")));
  EXPECT_FALSE(RoleCheck::parse_row(row("yes", "on")));
  EXPECT_FALSE(RoleCheck::parse_row(protocol::DataRow{{"t"}}));
}

TEST(RoleCheck, ANewCheckForgetsTheLastAnswerAndAnErrorLeavesNone) {
  RoleCheck check;
  check.on_query_row(row("t", "on"));
  check.on_query_done();
  ASSERT_TRUE(check.answer());
  EXPECT_TRUE(check.error().empty());
  check.start();
  EXPECT_FALSE(check.answer());
  check.on_query_error("42501", "permission denied");
  check.on_query_done();
  EXPECT_FALSE(check.answer());
  EXPECT_EQ(check.error(), "permission denied (42501)");
  check.start();
  check.on_query_done();  // no row at all
  EXPECT_FALSE(check.error().empty());
}

TEST(RoleCheck, TheQueryIsOneSimpleQueryMessage) {
  const std::string wire = RoleCheck::messages();
  ASSERT_FALSE(wire.empty());
  EXPECT_EQ(wire[0], 'Q');
  EXPECT_NE(wire.find("pg_catalog.pg_is_in_recovery()"), std::string::npos);
}

TEST(HostRoles, OnlyAServerThatReportsInHotStandbyReportsItsRole) {
  ParameterSet old_server;
  old_server.set("server_version", "13.14");
  EXPECT_FALSE(reports_role(old_server));
  ParameterSet new_server;
  new_server.set("in_hot_standby", "off");
  EXPECT_TRUE(reports_role(new_server));
}

}  // namespace
}  // namespace pgsluice
