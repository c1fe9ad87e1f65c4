// session_state_action parsing, the per-kind lookup, targeted cleanup queries and the findings
// table.
#include "pooler/config/session_policy.h"

#include <gtest/gtest.h>

#include "pooler/session_state/dirty_state.h"
#include "pooler/session_state/findings.h"
#include "tests/unit/pooler/session_finding.h"

namespace pgsluice {
namespace {

namespace pp = pgsluice::protocol;

TEST(SessionPolicy, DefaultActionAlone) {
  SessionPolicy p;
  ASSERT_EQ(parse_session_policy("reset", p), "");
  EXPECT_EQ(p.default_action, SessionAction::reset);
  EXPECT_EQ(p.action_for(pp::SessionStateKind::listen), SessionAction::reset);
  EXPECT_EQ(format_session_policy(p), "reset");
}

TEST(SessionPolicy, OverridesPerKind) {
  SessionPolicy p;
  ASSERT_EQ(parse_session_policy("reset, listen:pin ,advisory_lock:reject", p), "");
  EXPECT_EQ(p.action_for(pp::SessionStateKind::set), SessionAction::reset);
  EXPECT_EQ(p.action_for(pp::SessionStateKind::listen), SessionAction::pin);
  EXPECT_EQ(p.action_for(pp::SessionStateKind::advisory_lock), SessionAction::reject);
  EXPECT_EQ(format_session_policy(p), "reset,advisory_lock:reject,listen:pin");
}

TEST(SessionPolicy, KeepIsForSettingsAndWarnsOnTheRest) {
  SessionPolicy p;
  ASSERT_EQ(parse_session_policy("keep", p), "");
  EXPECT_EQ(p.action_for(pp::SessionStateKind::set), SessionAction::keep);
  EXPECT_EQ(p.action_for(pp::SessionStateKind::set_config), SessionAction::keep);
  EXPECT_EQ(p.action_for(pp::SessionStateKind::role), SessionAction::keep);
  EXPECT_EQ(p.action_for(pp::SessionStateKind::prepare), SessionAction::keep);
  EXPECT_EQ(p.action_for(pp::SessionStateKind::listen), SessionAction::warn);
  EXPECT_EQ(p.action_for(pp::SessionStateKind::temp_object), SessionAction::warn);
  ASSERT_EQ(parse_session_policy("reset,role:keep", p), "");
  EXPECT_EQ(p.action_for(pp::SessionStateKind::role), SessionAction::keep);
  EXPECT_EQ(p.action_for(pp::SessionStateKind::set), SessionAction::reset);
  EXPECT_EQ(parse_session_policy("warn,listen:keep", p),
            "keep applies to set, set_config, role and prepare, not to 'listen'");
}

TEST(SessionPolicy, RelayIsForListenOnly) {
  SessionPolicy p;
  ASSERT_EQ(parse_session_policy("pin,listen:relay", p), "");
  EXPECT_EQ(p.action_for(pp::SessionStateKind::listen), SessionAction::relay);
  EXPECT_EQ(p.action_for(pp::SessionStateKind::advisory_lock), SessionAction::pin);
  // As a default action, relay is warn for every other kind.
  ASSERT_EQ(parse_session_policy("relay", p), "");
  EXPECT_EQ(p.action_for(pp::SessionStateKind::listen), SessionAction::relay);
  EXPECT_EQ(p.action_for(pp::SessionStateKind::temp_object), SessionAction::warn);
  EXPECT_EQ(parse_session_policy("warn,set:relay", p), "relay applies to listen, not to 'set'");
  // The other actions stay choosable for listen.
  ASSERT_EQ(parse_session_policy("reset,listen:pin", p), "");
  EXPECT_EQ(p.action_for(pp::SessionStateKind::listen), SessionAction::pin);
}

TEST(SessionPolicy, CurrvalIsWarnedOrRefusedNeverPinnedOrReset) {
  SessionPolicy p;
  ASSERT_EQ(parse_session_policy("reset,currval:reject", p), "");
  EXPECT_EQ(p.action_for(pp::SessionStateKind::currval), SessionAction::reject);
  ASSERT_EQ(parse_session_policy("pin", p), "");
  EXPECT_EQ(p.action_for(pp::SessionStateKind::currval), SessionAction::warn);
  ASSERT_EQ(parse_session_policy("warn,currval:reset", p), "");
  EXPECT_EQ(p.action_for(pp::SessionStateKind::currval), SessionAction::warn);
  ASSERT_EQ(parse_session_policy("warn,currval:off", p), "");
  EXPECT_EQ(p.action_for(pp::SessionStateKind::currval), SessionAction::off);
}

TEST(SessionPolicy, TransactionModeKeepsSettingsByDefault) {
  const SessionPolicy p = SessionPolicy::transaction_default();
  EXPECT_EQ(format_session_policy(p),
            "pin,set:keep,set_config:keep,role:keep,listen:relay,prepare:keep");
  EXPECT_EQ(p.action_for(pp::SessionStateKind::advisory_lock), SessionAction::pin);
  EXPECT_EQ(p.action_for(pp::SessionStateKind::prepare), SessionAction::keep);
  EXPECT_EQ(p.action_for(pp::SessionStateKind::listen), SessionAction::relay);
  // currval/lastval leave nothing to pin: they are counted and logged.
  EXPECT_EQ(p.action_for(pp::SessionStateKind::currval), SessionAction::warn);
  SessionPolicy parsed;
  ASSERT_EQ(parse_session_policy(format_session_policy(p), parsed), "");
  EXPECT_EQ(parsed, p);
}

TEST(SessionPolicy, EveryKindAndActionName) {
  for (const char* kind : {"set", "set_config", "role", "advisory_lock", "listen", "prepare",
                           "hold_cursor", "temp_object", "load", "seed"}) {
    for (const char* action : {"off", "warn", "reject", "reset", "pin"}) {
      SessionPolicy p;
      std::string text = std::string("warn,") + kind + ":" + action;
      EXPECT_EQ(parse_session_policy(text, p), "") << text;
      EXPECT_EQ(to_string(p.action_for(*parse_session_state_kind(kind))), action) << text;
    }
  }
}

TEST(SessionPolicy, Errors) {
  SessionPolicy p;
  p.default_action = SessionAction::pin;
  EXPECT_NE(parse_session_policy("teleport", p), "");
  EXPECT_NE(parse_session_policy("reset,listen:teleport", p), "");
  EXPECT_NE(parse_session_policy("reset,cursor:pin", p), "");
  EXPECT_NE(parse_session_policy("reset,,listen:pin", p), "");
  EXPECT_NE(parse_session_policy("", p), "");
  EXPECT_NE(parse_session_policy("reset,warn", p), "");  // the default comes first, once
  EXPECT_EQ(p.default_action, SessionAction::pin);       // untouched on error
}

TEST(SessionPolicy, OpaqueCallsFollowTheDefaultUnlessSet) {
  SessionPolicy p;
  // The transaction-mode default (pin) verifies the server after an opaque call, it never pins.
  EXPECT_EQ(SessionPolicy::transaction_default().opaque_action(), SessionAction::reset);
  const std::pair<const char*, SessionAction> derived[] = {
      {"off", SessionAction::off},     {"warn", SessionAction::warn},
      {"reject", SessionAction::warn}, {"reset", SessionAction::reset},
      {"pin", SessionAction::reset},   {"keep", SessionAction::reset},
      {"relay", SessionAction::reset}};
  for (const auto& [text, action] : derived) {
    ASSERT_EQ(parse_session_policy(text, p), "") << text;
    EXPECT_EQ(p.opaque_action(), action) << text;
  }
  ASSERT_EQ(parse_session_policy("pin,set:keep,opaque_call:warn", p), "");
  EXPECT_EQ(p.opaque_action(), SessionAction::warn);
  EXPECT_EQ(p.action_for(pp::SessionStateKind::set), SessionAction::keep);
  EXPECT_EQ(format_session_policy(p), "pin,set:keep,opaque_call:warn");
  SessionPolicy round;
  ASSERT_EQ(parse_session_policy(format_session_policy(p), round), "");
  EXPECT_EQ(round, p);
  ASSERT_EQ(parse_session_policy("warn,opaque_call:reset", p), "");
  EXPECT_EQ(p.opaque_action(), SessionAction::reset);
  EXPECT_EQ(parse_session_policy("warn,opaque_call:pin", p),
            "opaque_call takes off, warn or reset, not 'pin'");
  EXPECT_NE(parse_session_policy("warn,opaque_call:keep", p), "");
  // off for everything but opaque calls still looks at statements.
  ASSERT_EQ(parse_session_policy("off,opaque_call:reset", p), "");
  EXPECT_FALSE(p.all_off());
  ASSERT_EQ(parse_session_policy("warn,opaque_call:off", p), "");
  EXPECT_EQ(p.opaque_action(), SessionAction::off);
}

TEST(SessionPolicy, OverridesAloneKeepTheWarnDefault) {
  SessionPolicy p;
  ASSERT_EQ(parse_session_policy("listen:pin", p), "");
  EXPECT_EQ(p.default_action, SessionAction::warn);
  EXPECT_EQ(p.action_for(pp::SessionStateKind::listen), SessionAction::pin);
}

TEST(SessionPolicy, AllOff) {
  SessionPolicy p;
  ASSERT_EQ(parse_session_policy("off", p), "");
  EXPECT_TRUE(p.all_off());
  ASSERT_EQ(parse_session_policy("off,listen:warn", p), "");
  EXPECT_FALSE(p.all_off());
}

TEST(DirtyState, CleanServerSendsNothing) {
  DirtyState d;
  EXPECT_FALSE(d.any());
  EXPECT_TRUE(d.cleanup_queries().empty());
}

TEST(DirtyState, ResetsExactlyTheSettingsThatWereSet) {
  DirtyState d;
  d.add(finding(pp::SessionStateKind::set, "search_path"));
  d.add(finding(pp::SessionStateKind::set_config, "statement_timeout"));
  d.add(finding(pp::SessionStateKind::set, "SEARCH_PATH"));
  ASSERT_EQ(d.cleanup_queries().size(), 1u);
  EXPECT_EQ(d.cleanup_queries()[0], "RESET search_path;RESET statement_timeout");
  EXPECT_FALSE(d.resets_all_settings());
  EXPECT_EQ(d.reset_names().size(), 2u);
}

TEST(DirtyState, ReleasesAreNotDirt) {
  DirtyState d;
  d.add(finding(pp::SessionStateKind::listen, "a", pp::SessionStateEffect::release));
  EXPECT_FALSE(d.any());
}

TEST(DirtyState, EachKindHasItsCleanup) {
  DirtyState d;
  d.add(finding(pp::SessionStateKind::role, "session_authorization"));
  d.add(finding(pp::SessionStateKind::advisory_lock, "pg_advisory_lock"));
  d.add(finding(pp::SessionStateKind::listen, "jobs"));
  d.add(finding(pp::SessionStateKind::hold_cursor, "c"));
  d.add(finding(pp::SessionStateKind::prepare, "p"));
  d.add(finding(pp::SessionStateKind::temp_object, "t"));
  ASSERT_EQ(d.cleanup_queries().size(), 1u);
  EXPECT_EQ(d.cleanup_queries()[0],
            "SET SESSION AUTHORIZATION DEFAULT;RESET ROLE;"
            "SELECT pg_catalog.pg_advisory_unlock_all();UNLISTEN *;CLOSE ALL;DEALLOCATE ALL;"
            "DISCARD TEMP");
}

TEST(DirtyState, UnknownMeansDiscardAllAlone) {
  DirtyState d;
  d.add(finding(pp::SessionStateKind::listen, "jobs"));
  d.add_unknown();
  ASSERT_EQ(d.cleanup_queries().size(), 1u);
  EXPECT_EQ(d.cleanup_queries()[0], "DISCARD ALL");
  EXPECT_TRUE(d.resets_all_settings());
}

TEST(DirtyState, ResetAllAndLoad) {
  DirtyState d;
  d.add(finding(pp::SessionStateKind::set, "all"));
  EXPECT_EQ(d.cleanup_queries()[0], "RESET ALL");
  EXPECT_TRUE(d.resets_all_settings());
  d.add(finding(pp::SessionStateKind::load, "auto_explain"));
  EXPECT_TRUE(d.needs_close());
  d.clear();
  EXPECT_FALSE(d.any());
}

FindingEvent event(std::string_view statement, std::string_view app = "app1") {
  return FindingEvent{.kind = "set",
                      .detail = "work_mem",
                      .certainty = "definite",
                      .action = "warn",
                      .database = "db",
                      .user = "u",
                      .application_name = app,
                      .client_addr = "127.0.0.1:5",
                      .source = "query",
                      .statement = statement};
}

TEST(SessionFindings, SameFingerprintIsOneRow) {
  SessionFindings f;
  bool created = false;
  const FindingRow* row = f.record(event("SET work_mem = '64MB'"), 100, created);
  ASSERT_NE(row, nullptr);
  EXPECT_TRUE(created);
  row = f.record(event("SET work_mem = '128MB'"), 105, created);
  EXPECT_FALSE(created);
  ASSERT_EQ(f.rows().size(), 1u);
  EXPECT_EQ(f.rows()[0].count, 2u);
  EXPECT_EQ(f.rows()[0].first_seen, 100);
  EXPECT_EQ(f.rows()[0].last_seen, 105);
  EXPECT_NE(f.rows()[0].sample.find("$1"), std::string::npos) << f.rows()[0].sample;
  EXPECT_EQ(f.total(), 2u);
}

TEST(SessionFindings, OtherApplicationIsAnotherRow) {
  SessionFindings f;
  bool created = false;
  f.record(event("SET work_mem = '64MB'", "a"), 1, created);
  f.record(event("SET work_mem = '64MB'", "b"), 1, created);
  EXPECT_TRUE(created);
  EXPECT_EQ(f.rows().size(), 2u);
}

TEST(SessionFindings, BoundedTable) {
  SessionFindings f;
  bool created = false;
  for (size_t i = 0; i < SessionFindings::kMaxRows + 5; ++i) {
    std::string app = "app" + std::to_string(i);
    f.record(event("SET work_mem = 1", app), 1, created);
  }
  EXPECT_EQ(f.rows().size(), SessionFindings::kMaxRows);
  EXPECT_EQ(f.dropped(), 5u);
}

FindingEvent prepare_event(std::string_view statement, bool use, std::string_view app = "app1") {
  FindingEvent e = event(statement, app);
  e.kind = "prepare";
  e.detail = "p";
  e.uses_earlier_state = use;
  return e;
}

TEST(SessionFindings, ExecuteCountsInItsPreparesRow) {
  SessionFindings f;
  bool created = false;
  f.record(prepare_event("PREPARE p AS SELECT 1", false), 10, created);
  f.record(prepare_event("EXECUTE p", true), 11, created);
  EXPECT_FALSE(created);
  f.record(prepare_event("EXECUTE p (1)", true), 12, created);
  ASSERT_EQ(f.rows().size(), 1u);
  EXPECT_EQ(f.rows()[0].count, 3u);
  EXPECT_EQ(f.rows()[0].last_seen, 12);
  EXPECT_NE(f.rows()[0].sample.find("PREPARE"), std::string::npos) << f.rows()[0].sample;
  // Another application's PREPARE p is another row, and its EXECUTE counts there.
  f.record(prepare_event("PREPARE p AS SELECT 1", false, "app2"), 13, created);
  f.record(prepare_event("EXECUTE p", true, "app2"), 14, created);
  ASSERT_EQ(f.rows().size(), 2u);
  EXPECT_EQ(f.rows()[1].count, 2u);
  EXPECT_EQ(f.total(), 5u);
}

TEST(SessionFindings, ExecuteWithoutAPrepareSeenHasItsOwnRow) {
  SessionFindings f;
  bool created = false;
  f.record(prepare_event("EXECUTE p", true), 1, created);
  EXPECT_TRUE(created);
  // The next PREPARE p makes its own row, and the EXECUTEs after it count there.
  f.record(prepare_event("PREPARE p AS SELECT 2", false), 2, created);
  EXPECT_TRUE(created);
  f.record(prepare_event("EXECUTE p", true), 3, created);
  EXPECT_FALSE(created);
  ASSERT_EQ(f.rows().size(), 2u);
  EXPECT_EQ(f.rows()[0].count, 1u);
  EXPECT_EQ(f.rows()[1].count, 2u);
  // The last PREPARE p of the name is the one its uses count for.
  f.record(prepare_event("PREPARE p AS SELECT a FROM t", false), 4, created);
  f.record(prepare_event("EXECUTE p", true), 5, created);
  ASSERT_EQ(f.rows().size(), 3u);
  EXPECT_EQ(f.rows()[2].count, 2u);
}

std::string error_body(std::vector<std::pair<char, std::string>> fields) {
  std::string body;
  for (const auto& [type, value] : fields) {
    body += type;
    body += value;
    body += '\0';
  }
  body += '\0';
  return body;
}

TEST(SessionFindings, FailedBeforeRunningIsUndefinedFunctionAtAnalysis) {
  const std::pair<char, std::string> base[] = {
      {'S', "ERROR"}, {'V', "ERROR"}, {'M', "function nosuch() does not exist"}};
  auto with = [&](std::vector<std::pair<char, std::string>> extra) {
    std::vector<std::pair<char, std::string>> all(std::begin(base), std::end(base));
    all.insert(all.end(), extra.begin(), extra.end());
    return error_body(all);
  };
  // SELECT nosuch(): refused while analysed, at a position in the client's text.
  EXPECT_TRUE(failed_before_running(with({{'C', "42883"}, {'P', "8"}})));
  // Raised inside a PL/pgSQL function the statement called: the function ran up to there.
  EXPECT_FALSE(failed_before_running(
      with({{'C', "42883"}, {'P', "8"}, {'W', "PL/pgSQL function f() line 1 at PERFORM"}})));
  EXPECT_FALSE(failed_before_running(
      with({{'C', "42883"}, {'p', "8"}, {'q', "SELECT nosuch()"}, {'W', "PL/pgSQL function"}})));
  // A regprocedure cast of a column: at run time, without a position.
  EXPECT_FALSE(failed_before_running(with({{'C', "42883"}})));
  // Another error at a position (a syntax error, an unknown column): not this rule's.
  EXPECT_FALSE(failed_before_running(with({{'C', "42703"}, {'P', "8"}})));
  EXPECT_FALSE(failed_before_running("garbage C42883"));
}

TEST(SessionFindings, EveryKindHasAHint) {
  // SHOW LEAKS' hint column: every kind a finding row can have says what to change.
  for (pp::SessionStateKind kind :
       {pp::SessionStateKind::set, pp::SessionStateKind::set_config, pp::SessionStateKind::role,
        pp::SessionStateKind::advisory_lock, pp::SessionStateKind::listen,
        pp::SessionStateKind::prepare, pp::SessionStateKind::hold_cursor,
        pp::SessionStateKind::temp_object, pp::SessionStateKind::load, pp::SessionStateKind::seed,
        pp::SessionStateKind::currval}) {
    EXPECT_FALSE(finding_hint(pp::to_string(kind)).empty()) << pp::to_string(kind);
  }
  for (const char* kind : {"opaque_call", "hidden", "long_hold"}) {
    EXPECT_FALSE(finding_hint(kind).empty()) << kind;
  }
  EXPECT_EQ(finding_hint("set"),
            "Use SET LOCAL inside a transaction, or ALTER ROLE/DATABASE … SET for a default.");
  EXPECT_EQ(finding_hint("nonsense"), "");
  EXPECT_NE(finding_hint("seed"), finding_hint("opaque_call"));
  EXPECT_NE(finding_hint("seed").find("setseed()"), std::string_view::npos);
}

}  // namespace
}  // namespace pgsluice
