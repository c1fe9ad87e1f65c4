// The `keep` action's read-back (kept_settings.h): which names a transaction's findings make it
// read, the query's text, and how the answer row changes the client's and the server's settings;
// plus the order in which the link's sync query applies a role and a session authorization.
#include "pooler/session_state/kept_settings.h"

#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <vector>

#include "pgsluice/protocol/writer.h"
#include "tests/unit/pooler/session_finding.h"

namespace pgsluice {
namespace {

namespace pp = pgsluice::protocol;

pp::SessionStateFinding set(std::string name) {
  return finding(pp::SessionStateKind::set, std::move(name));
}
pp::SessionStateFinding reset(std::string name) {
  return finding(pp::SessionStateKind::set, std::move(name), pp::SessionStateEffect::release);
}

// The body of the DataRow the read-back query gets: one value per name.
std::string row(const std::vector<std::optional<std::string_view>>& values) {
  std::string wire;
  pp::write_data_row(wire, values);
  return wire.substr(5);  // type byte and length
}

struct Sides {
  ParameterSet startup;
  ParameterSet client;
  ParameterSet server;
};

TEST(KeptSettings, NothingNotedReadsNothing) {
  SettingsCapture c;
  EXPECT_FALSE(c.any());
  Sides s;
  EXPECT_EQ(c.begin_query(s.client, s.server), "");
  EXPECT_FALSE(c.awaiting());
}

TEST(KeptSettings, ReportedParametersNeedNoReading) {
  SettingsCapture c;
  c.note(set("application_name"));
  c.note(set("timezone"));
  c.note(set("client_encoding"));
  EXPECT_FALSE(c.any());
}

TEST(KeptSettings, OtherKindsAreNotSettings) {
  SettingsCapture c;
  c.note(finding(pp::SessionStateKind::listen, "a"));
  c.note(finding(pp::SessionStateKind::advisory_lock, "pg_advisory_lock"));
  EXPECT_FALSE(c.any());
}

TEST(KeptSettings, ReadsEachNameOnce) {
  SettingsCapture c;
  c.note(set("search_path"));
  c.note(finding(pp::SessionStateKind::set_config, "work_mem"));
  c.note(set("Search_Path"));
  Sides s;
  EXPECT_EQ(c.begin_query(s.client, s.server),
            "SELECT pg_catalog.current_setting('search_path', true), "
            "pg_catalog.current_setting('work_mem', true)");
  EXPECT_TRUE(c.awaiting());
}

TEST(KeptSettings, NamesAreQuotedAsLiterals) {
  SettingsCapture c;
  c.note(set("x.y'z"));
  Sides s;
  EXPECT_NE(c.begin_query(s.client, s.server).find("current_setting('x.y''z', true)"),
            std::string::npos);
}

TEST(KeptSettings, ASetThatStuckIsKeptOnBothSides) {
  SettingsCapture c;
  c.note(set("search_path"));
  Sides s;
  c.begin_query(s.client, s.server);
  c.on_row(row({"app, public"}));
  ASSERT_TRUE(c.finish(s.startup, "alice", s.client, s.server));
  EXPECT_EQ(*s.client.get("search_path"), "app, public");
  EXPECT_EQ(*s.server.get("search_path"), "app, public");
  EXPECT_FALSE(c.any());
  EXPECT_FALSE(c.awaiting());
}

TEST(KeptSettings, ASetThatWasRolledBackLeavesWhatWasThere) {
  // BEGIN; SET search_path = x; ROLLBACK: the server still has the value applied at the link.
  SettingsCapture c;
  c.note(set("search_path"));
  Sides s;
  s.client.set("search_path", "app");
  s.server.set("search_path", "app");
  c.begin_query(s.client, s.server);
  c.on_row(row({"app"}));
  ASSERT_TRUE(c.finish(s.startup, "alice", s.client, s.server));
  EXPECT_EQ(*s.client.get("search_path"), "app");
  EXPECT_EQ(*s.server.get("search_path"), "app");
}

// A plain SET's literal (set_literal.h): read back the first time, then known for the pool.
TEST(KeptSettings, ALiteralIsReadBackOnceThenKnown) {
  SetValueCache known;
  Sides s;
  SettingsCapture c;
  c.note(set("work_mem"), "65536");
  EXPECT_FALSE(c.settle_known(known, "15.18", s.client, s.server));
  EXPECT_EQ(c.begin_query(s.client, s.server),
            "SELECT pg_catalog.current_setting('work_mem', true)");
  c.on_row(row({"64MB"}));
  ASSERT_TRUE(c.finish(s.startup, "alice", s.client, s.server, &known, "15.18"));
  ASSERT_NE(known.find("15.18", "work_mem", "65536"), nullptr);
  EXPECT_EQ(*known.find("15.18", "work_mem", "65536"), "64MB");

  // Another client, another server of the pool: the same SET needs no query, and both sides
  // take the value the server showed, not the literal.
  Sides t;
  t.server.set("work_mem", "1MB");
  SettingsCapture d;
  d.note(set("work_mem"), "65536");
  ASSERT_TRUE(d.settle_known(known, "15.18", t.client, t.server));
  EXPECT_FALSE(d.any());
  EXPECT_FALSE(d.awaiting());
  EXPECT_EQ(*t.client.get("work_mem"), "64MB");
  EXPECT_EQ(*t.server.get("work_mem"), "64MB");
  // Another server version does not know it.
  SettingsCapture e;
  e.note(set("work_mem"), "65536");
  EXPECT_FALSE(e.settle_known(known, "16.4", t.client, t.server));
}

TEST(KeptSettings, ALiteralIsKnownOnlyWhenEverythingNotedIs) {
  SetValueCache known;
  known.learn("15", "work_mem", "'64MB'", "64MB");
  known.learn("15", "work_mem", "64MB", "64MB");
  Sides s;
  {
    SettingsCapture c;  // a second setting without a literal: all is read back
    c.note(set("work_mem"), "64MB");
    c.note(set("search_path"));
    EXPECT_FALSE(c.settle_known(known, "15", s.client, s.server));
    EXPECT_NE(c.begin_query(s.client, s.server), "");
  }
  {
    SettingsCapture c;  // a later RESET of it
    c.note(set("work_mem"), "64MB");
    c.note(reset("work_mem"));
    EXPECT_FALSE(c.settle_known(known, "15", s.client, s.server));
  }
  {
    SettingsCapture c;  // RESET ALL after it
    c.note(set("work_mem"), "64MB");
    c.note(reset("all"));
    EXPECT_FALSE(c.settle_known(known, "15", s.client, s.server));
  }
  {
    SettingsCapture c;  // an error or another flagged statement since
    c.note(set("work_mem"), "64MB");
    c.forget_literals();
    EXPECT_FALSE(c.settle_known(known, "15", s.client, s.server));
    c.begin_query(s.client, s.server);
    c.on_row(row({"2MB"}));  // what a function called after it set
    SetValueCache learned;
    ASSERT_TRUE(c.finish(s.startup, "alice", s.client, s.server, &learned, "15"));
    EXPECT_EQ(learned.size(), 0U);
    EXPECT_EQ(*s.client.get("work_mem"), "2MB");
  }
  {
    SettingsCapture c;  // a literal noted again, after the forgetting, counts
    c.note(set("work_mem"), "64MB");
    c.forget_literals();
    c.note(set("work_mem"), "64MB");
    EXPECT_TRUE(c.settle_known(known, "15", s.client, s.server));
  }
}

TEST(KeptSettings, NothingIsSettledWhileAReadBackIsUnderWay) {
  // Its answer, for the same name, would come after and overwrite the newer value.
  SetValueCache known;
  known.learn("15", "work_mem", "64MB", "64MB");
  Sides s;
  SettingsCapture c;
  c.note(set("work_mem"));
  c.begin_query(s.client, s.server);
  c.note(set("work_mem"), "64MB");
  EXPECT_FALSE(c.settle_known(known, "15", s.client, s.server));
  EXPECT_TRUE(c.any());
}

TEST(KeptSettings, ASetIsCarriedWhateverItsValue) {
  // SET work_mem = '4MB' where that is the server's default: the pooler does not know the
  // default, so both sides carry it (a next client without it costs one RESET).
  SettingsCapture c;
  c.note(set("work_mem"));
  Sides s;
  c.begin_query(s.client, s.server);
  c.on_row(row({"4MB"}));
  ASSERT_TRUE(c.finish(s.startup, "alice", s.client, s.server));
  EXPECT_EQ(*s.client.get("work_mem"), "4MB");
  EXPECT_EQ(*s.server.get("work_mem"), "4MB");
}

TEST(KeptSettings, AResetOfWhatThePoolerNeverAppliedLeavesBothSidesWithout) {
  SettingsCapture c;
  c.note(reset("work_mem"));
  Sides s;
  c.begin_query(s.client, s.server);
  c.on_row(row({"4MB"}));
  ASSERT_TRUE(c.finish(s.startup, "alice", s.client, s.server));
  EXPECT_EQ(s.client.get("work_mem"), nullptr);
  EXPECT_EQ(s.server.get("work_mem"), nullptr);
}

TEST(KeptSettings, AResetGoesBackToTheStartupValue) {
  // On a direct connection the startup packet's value is the session default that RESET
  // returns to; on the pooled server RESET returns to the server's, so the client gets its own.
  SettingsCapture c;
  c.note(set("search_path"));
  c.note(reset("search_path"));
  Sides s;
  s.startup.set("search_path", "app");
  s.client.set("search_path", "other");
  s.server.set("search_path", "other");
  c.begin_query(s.client, s.server);
  c.on_row(row({"\"$user\", public"}));  // not what was applied: the reset stuck
  ASSERT_TRUE(c.finish(s.startup, "alice", s.client, s.server));
  EXPECT_EQ(*s.client.get("search_path"), "app");
  EXPECT_EQ(s.server.get("search_path"), nullptr);
}

TEST(KeptSettings, AResetThatWasRolledBackKeepsTheValue) {
  SettingsCapture c;
  c.note(reset("search_path"));
  Sides s;
  s.startup.set("search_path", "app");
  s.client.set("search_path", "other");
  s.server.set("search_path", "other");
  c.begin_query(s.client, s.server);
  c.on_row(row({"other"}));  // what was applied: the reset was rolled back
  ASSERT_TRUE(c.finish(s.startup, "alice", s.client, s.server));
  EXPECT_EQ(*s.client.get("search_path"), "other");
  EXPECT_EQ(*s.server.get("search_path"), "other");
}

TEST(KeptSettings, AnUnknownNameIsDroppedFromBothSides) {
  SettingsCapture c;
  c.note(finding(pp::SessionStateKind::set_config, "myapp.tenant"));
  Sides s;
  s.client.set("myapp.tenant", "7");
  s.server.set("myapp.tenant", "7");
  c.begin_query(s.client, s.server);
  c.on_row(row({std::nullopt}));
  ASSERT_TRUE(c.finish(s.startup, "alice", s.client, s.server));
  EXPECT_EQ(s.client.get("myapp.tenant"), nullptr);
  EXPECT_EQ(s.server.get("myapp.tenant"), nullptr);
}

TEST(KeptSettings, RoleAndSessionAuthorizationDefaultsAreKnownWithoutPgSettings) {
  SettingsCapture c;
  c.note(finding(pp::SessionStateKind::role, "role"));
  c.note(finding(pp::SessionStateKind::role, "session_authorization"));
  Sides s;
  s.server.set("role", "admin");
  s.server.set("session_authorization", "bob");
  c.begin_query(s.client, s.server);
  // SET ROLE … then RESET ROLE, and SET SESSION AUTHORIZATION DEFAULT: none, the login user.
  c.on_row(row({"none", "alice"}));
  ASSERT_TRUE(c.finish(s.startup, "alice", s.client, s.server));
  EXPECT_TRUE(s.client.empty());
  EXPECT_TRUE(s.server.empty());

  c.note(finding(pp::SessionStateKind::role, "role"));
  c.begin_query(s.client, s.server);
  c.on_row(row({"reporting"}));
  ASSERT_TRUE(c.finish(s.startup, "alice", s.client, s.server));
  EXPECT_EQ(*s.client.get("role"), "reporting");
  EXPECT_EQ(*s.server.get("role"), "reporting");
}

TEST(KeptSettings, SessionAuthorizationReadsTheRoleBack) {
  // SET ROLE reporting (kept), then SET SESSION AUTHORIZATION bob: PostgreSQL resets the role
  // to none, which the read-back must see, or the link would SET ROLE reporting again.
  SettingsCapture c;
  Sides s;
  s.client.set("role", "reporting");
  s.server.set("role", "reporting");
  c.note(finding(pp::SessionStateKind::role, "session_authorization"));
  const std::string q = c.begin_query(s.client, s.server);
  EXPECT_EQ(q,
            "SELECT pg_catalog.current_setting('session_authorization', true), "
            "pg_catalog.current_setting('role', true)");
  c.on_row(row({"bob", "none"}));
  ASSERT_TRUE(c.finish(s.startup, "alice", s.client, s.server));
  EXPECT_EQ(*s.client.get("session_authorization"), "bob");
  EXPECT_EQ(s.client.get("role"), nullptr);
  EXPECT_EQ(s.server.get("role"), nullptr);

  // Rolled back: the role the server still has is kept.
  c.note(finding(pp::SessionStateKind::role, "session_authorization",
                 pp::SessionStateEffect::release));
  s.client.set("role", "reporting");
  s.server.set("role", "reporting");
  c.begin_query(s.client, s.server);
  c.on_row(row({"bob", "reporting"}));
  ASSERT_TRUE(c.finish(s.startup, "alice", s.client, s.server));
  EXPECT_EQ(*s.client.get("role"), "reporting");
  EXPECT_EQ(*s.client.get("session_authorization"), "bob");

  // SET SESSION AUTHORIZATION, then SET ROLE in the same transaction: the role set last.
  c.note(finding(pp::SessionStateKind::role, "session_authorization"));
  c.note(finding(pp::SessionStateKind::role, "role"));
  c.begin_query(s.client, s.server);
  c.on_row(row({"bob", "auditor"}));
  ASSERT_TRUE(c.finish(s.startup, "alice", s.client, s.server));
  EXPECT_EQ(*s.client.get("role"), "auditor");
}

TEST(KeptSettings, ResetAllReadsEveryKnownSettingButTheRole) {
  SettingsCapture c;
  c.note(reset("all"));
  Sides s;
  s.client.set("search_path", "app");
  s.client.set("role", "reporting");
  s.server.set("search_path", "app");
  s.server.set("role", "reporting");
  s.server.set("work_mem", "64MB");  // what the server carried before (a stale belief)
  const std::string q = c.begin_query(s.client, s.server);
  EXPECT_NE(q.find("'search_path'"), std::string::npos);
  EXPECT_NE(q.find("'work_mem'"), std::string::npos);
  EXPECT_EQ(q.find("'role'"), std::string::npos);
  c.on_row(row({"\"$user\", public", "4MB"}));
  ASSERT_TRUE(c.finish(s.startup, "alice", s.client, s.server));
  EXPECT_EQ(s.client.get("search_path"), nullptr);
  EXPECT_EQ(*s.client.get("role"), "reporting");
  EXPECT_EQ(s.server.get("work_mem"), nullptr);
  EXPECT_EQ(*s.server.get("role"), "reporting");
}

TEST(KeptSettings, ASetAfterResetAllInTheSameTransactionKeepsItsValue) {
  SettingsCapture c;
  c.note(reset("all"));
  c.note(set("search_path"));
  Sides s;
  s.client.set("search_path", "old");
  s.server.set("search_path", "old");
  c.begin_query(s.client, s.server);
  c.on_row(row({"new"}));
  ASSERT_TRUE(c.finish(s.startup, "alice", s.client, s.server));
  EXPECT_EQ(*s.client.get("search_path"), "new");
}

TEST(KeptSettings, DiscardAllReadsTheRoleToo) {
  SettingsCapture c;
  c.note_reset_all(/*discard_all=*/true);
  Sides s;
  s.client.set("role", "reporting");
  s.server.set("role", "reporting");
  s.startup.set("search_path", "app");
  s.client.set("search_path", "app");
  s.server.set("search_path", "app");
  const std::string q = c.begin_query(s.client, s.server);
  EXPECT_NE(q.find("'role'"), std::string::npos);
  EXPECT_NE(q.find("'session_authorization'"), std::string::npos);
  // items: role, session_authorization, search_path
  c.on_row(row({"none", "alice", "\"$user\", public"}));
  ASSERT_TRUE(c.finish(s.startup, "alice", s.client, s.server));
  EXPECT_EQ(s.client.get("role"), nullptr);
  EXPECT_EQ(*s.client.get("search_path"), "app");  // the startup value, applied at the next link
  EXPECT_TRUE(s.server.empty());
}

TEST(KeptSettings, NoAnswerLeavesBothSidesAndSaysSo) {
  SettingsCapture c;
  c.note(set("search_path"));
  Sides s;
  s.client.set("search_path", "a");
  c.begin_query(s.client, s.server);
  c.on_row(row({"two", "columns"}));  // malformed: ignored
  EXPECT_FALSE(c.finish(s.startup, "alice", s.client, s.server));
  EXPECT_EQ(*s.client.get("search_path"), "a");
  EXPECT_FALSE(c.any());
}

TEST(KeptSettings, WhatIsNotedDuringAReadBackWaitsForTheNext) {
  // The client sends its next SET while the read-back of the last one is under way.
  SettingsCapture c;
  c.note(set("work_mem"));
  Sides s;
  c.begin_query(s.client, s.server);
  EXPECT_FALSE(c.any());
  c.note(set("statement_timeout"));
  EXPECT_TRUE(c.any());
  c.on_row(row({"64MB"}));  // one item read: one column
  ASSERT_TRUE(c.finish(s.startup, "alice", s.client, s.server));
  EXPECT_EQ(*s.client.get("work_mem"), "64MB");
  EXPECT_TRUE(c.any());
  EXPECT_EQ(c.begin_query(s.client, s.server),
            "SELECT pg_catalog.current_setting('statement_timeout', true)");
}

TEST(KeptSettings, UnreadSettingsAreResetWithTheCleaning) {
  SettingsCapture c;
  c.note(set("search_path"));
  c.note(finding(pp::SessionStateKind::role, "role"));
  DirtyState d;
  c.mark_for_reset(d);
  ASSERT_EQ(d.cleanup_queries(), std::vector<std::string>{"RESET ROLE;RESET search_path"});
  EXPECT_TRUE(d.resets_role());
}

TEST(KeptSettings, AResetOfAStartupReportedParameterIsTakenOnce) {
  ParameterSet startup;
  startup.set("DateStyle", "German");
  startup.set("TimeZone", "Asia/Tokyo");
  SettingsCapture c;
  c.note(set("datestyle"));
  EXPECT_FALSE(c.any());  // reported: no read-back
  EXPECT_TRUE(c.resets_reported());
  EXPECT_TRUE(c.take_reported_resets(startup).empty());  // set, not reset
  c.note(reset("datestyle"));
  c.note(reset("application_name"));  // not given at startup: the server's default is right
  EXPECT_EQ(c.take_reported_resets(startup), std::vector<std::string>{"DateStyle"});
  EXPECT_FALSE(c.resets_reported());
  // RESET ALL resets them all, but a SET after it is the client's.
  c.note(reset("all"));
  c.note(set("TimeZone"));
  EXPECT_EQ(c.take_reported_resets(startup), std::vector<std::string>{"DateStyle"});
  c.note_reset_all(/*discard_all=*/true);
  EXPECT_EQ(c.take_reported_resets(startup), (std::vector<std::string>{"DateStyle", "TimeZone"}));
  // What is read back is forgotten apart from them.
  c.note(reset("datestyle"));
  c.note(set("work_mem"));
  c.forget_pending();
  EXPECT_FALSE(c.any());
  EXPECT_TRUE(c.resets_reported());
}

// Settings are replayed as the login role, then who the client is: the session authorization,
// and the role last (issue 42: a superuser-only setting made before SET SESSION AUTHORIZATION
// would be refused to the less privileged identity).
TEST(SyncQuery, SettingsAsTheLoginRoleThenSessionAuthorizationThenRole) {
  ParameterSet client, server, extras, server_extras;
  extras.set("role", "reporting");
  extras.set("session_authorization", "bob");
  extras.set("work_mem", "64MB");
  EXPECT_EQ(build_parameter_sync_query(client, server, extras, server_extras),
            "SELECT pg_catalog.set_config('work_mem', '64MB', false);"
            "SELECT pg_catalog.set_config('session_authorization', 'bob', false);"
            "SELECT pg_catalog.set_config('role', 'reporting', false);");
  EXPECT_EQ(build_parameter_sync_query(client, server, extras, server_extras), "");
}

TEST(SyncQuery, AnotherIdentityOnTheServerGoesBackToTheLoginRoleFirst) {
  // The reproduction: the server runs as the previous client's u4 with its
  // superuser-only setting; the next client is u1 with neither.
  ParameterSet client, server, extras, server_extras;
  server_extras.set("session_authorization", "u4");
  server_extras.set("lo_compat_privileges", "on");
  extras.set("session_authorization", "u1");
  EXPECT_EQ(build_parameter_sync_query(client, server, extras, server_extras),
            "RESET role;RESET session_authorization;"
            "RESET lo_compat_privileges;"
            "SELECT pg_catalog.set_config('session_authorization', 'u1', false);");
  EXPECT_EQ(server_extras, extras);
}

TEST(SyncQuery, ASettingUnderTheSameIdentityIsMadeAsTheLoginRole) {
  // Client and server are both u4, only a superuser-only setting differs: u4 could not make
  // it, the login role can, and u4 is taken again after it.
  ParameterSet client, server, extras, server_extras;
  server_extras.set("session_authorization", "u4");
  extras.set("session_authorization", "u4");
  extras.set("lo_compat_privileges", "on");
  EXPECT_EQ(build_parameter_sync_query(client, server, extras, server_extras),
            "RESET role;RESET session_authorization;"
            "SELECT pg_catalog.set_config('lo_compat_privileges', 'on', false);"
            "SELECT pg_catalog.set_config('session_authorization', 'u4', false);");
}

TEST(SyncQuery, ChangingTheSessionAuthorizationSetsTheRoleAgain) {
  ParameterSet client, server, extras, server_extras;
  server_extras.set("role", "reporting");
  server_extras.set("session_authorization", "bob");
  extras.set("role", "reporting");
  EXPECT_EQ(build_parameter_sync_query(client, server, extras, server_extras),
            "RESET role;RESET session_authorization;"
            "SELECT pg_catalog.set_config('role', 'reporting', false);");
}

TEST(SyncQuery, ResetsTheRoleOfThePreviousClientBeforeItsSettings) {
  ParameterSet client, server, extras, server_extras;
  server_extras.set("role", "reporting");
  server_extras.set("search_path", "x");
  EXPECT_EQ(build_parameter_sync_query(client, server, extras, server_extras),
            "RESET role;RESET session_authorization;RESET search_path;");
  EXPECT_TRUE(server_extras.empty());
}

TEST(SyncQuery, TheSameIdentityWithNothingElseToChangeIsLeftAlone) {
  ParameterSet client, server, extras, server_extras;
  server_extras.set("role", "reporting");
  extras.set("role", "reporting");
  EXPECT_EQ(build_parameter_sync_query(client, server, extras, server_extras), "");
}

TEST(SyncQuery, ATrackedParameterUnderAnIdentityStillGoesThroughTheLoginRole) {
  ParameterSet client, server, extras, server_extras;
  client.set("application_name", "b");
  server.set("application_name", "a");
  server_extras.set("role", "reporting");
  extras.set("role", "reporting");
  EXPECT_EQ(build_parameter_sync_query(client, server, extras, server_extras),
            "RESET role;RESET session_authorization;"
            "SET application_name='b';"
            "SELECT pg_catalog.set_config('role', 'reporting', false);");
}

}  // namespace
}  // namespace pgsluice
