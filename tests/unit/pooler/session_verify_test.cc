// session_state_verify's comparison: what the server holds against what the SQL checks tracked.
#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <vector>

#include "pgsluice/protocol/session_state.h"
#include "pooler/session_state/params.h"
#include "pooler/session_state/verify.h"
#include "tests/unit/pooler/data_row.h"
#include "tests/unit/pooler/session_finding.h"

namespace pgsluice {
namespace {

namespace pp = pgsluice::protocol;

std::vector<std::string> describe(const std::vector<VerifyDifference>& d) {
  std::vector<std::string> out;
  for (const auto& x : d) out.push_back(std::string(x.kind) + ":" + x.detail);
  return out;
}

TEST(SessionVerify, ParsesTheRow) {
  auto a = parse_verify_row(data_row({"1", "2", "0", "3", "4", "work_mem,TimeZone", "t"}));
  ASSERT_TRUE(a);
  EXPECT_EQ(a->listen_channels, 1);
  EXPECT_EQ(a->advisory_locks, 2);
  EXPECT_EQ(a->hold_cursors, 3);
  EXPECT_EQ(a->temp_relations, 4);
  EXPECT_EQ(a->session_settings, (std::vector<std::string>{"work_mem", "TimeZone"}));
  EXPECT_TRUE(a->role_changed);
  auto none = parse_verify_row(data_row({"0", "0", "0", "0", "0", std::nullopt, "f"}));
  ASSERT_TRUE(none);
  EXPECT_TRUE(none->session_settings.empty());
  // Another internal query's row (SELECT pg_advisory_unlock_all()) is not the answer.
  EXPECT_FALSE(parse_verify_row(data_row({"t"})));
  EXPECT_FALSE(parse_verify_row(data_row({"x", "0", "0", "0", "0", std::nullopt, "f"})));
}

TEST(SessionVerify, UntrackedStateIsHidden) {
  VerifyAnswer a;
  a.advisory_locks = 1;
  a.listen_channels = 2;
  a.sql_prepared = 1;
  a.hold_cursors = 1;
  a.temp_relations = 3;
  a.session_settings = {"statement_timeout", "application_name", "search_path"};
  a.role_changed = true;
  SessionTrack track;
  ParameterSet reported;
  reported.set("application_name", "x");
  ParameterSet applied;
  applied.set("search_path", "a");
  EXPECT_EQ(
      describe(compare_with_track(a, track, reported, applied)),
      (std::vector<std::string>{"advisory_lock:1 lock", "listen:2 channels", "prepare:1 statement",
                                "hold_cursor:1 cursor", "temp_object:3 relations",
                                "set:statement_timeout", "role:role"}));
}

TEST(SessionVerify, TrackedStateIsNot) {
  VerifyAnswer a;
  a.advisory_locks = 1;
  a.listen_channels = 1;
  a.session_settings = {"Statement_Timeout", "work_mem"};
  SessionTrack track;
  track.note(finding(pp::SessionStateKind::advisory_lock, "pg_advisory_lock"));
  track.note(finding(pp::SessionStateKind::listen, "jobs"));
  track.note(finding(pp::SessionStateKind::set, "statement_timeout"));
  ParameterSet none;
  EXPECT_EQ(describe(compare_with_track(a, track, none, none)),
            (std::vector<std::string>{"set:work_mem"}));
  // A set_config with a non-constant name may have set anything.
  track.note(finding(pp::SessionStateKind::set_config, ""));
  EXPECT_TRUE(compare_with_track(a, track, none, none).empty());
  // A release (RESET, UNLISTEN) tracks nothing; DISCARD ALL clears the track.
  SessionTrack released;
  pp::SessionStateFinding unlisten = finding(pp::SessionStateKind::listen, "*");
  unlisten.effect = pp::SessionStateEffect::release;
  released.note(unlisten);
  EXPECT_FALSE(released.saw(pp::SessionStateKind::listen));
  track.clear();
  EXPECT_FALSE(track.saw(pp::SessionStateKind::advisory_lock));
  EXPECT_FALSE(track.saw_setting("work_mem"));
}

TEST(SessionVerify, NoAnswerIsADifference) {
  SessionVerifier v;
  v.expect();
  EXPECT_TRUE(v.awaiting());
  ParameterSet none;
  EXPECT_EQ(describe(v.finish(none, none)), (std::vector<std::string>{"verify:no answer"}));
  EXPECT_FALSE(v.awaiting());
  v.expect();
  v.on_data_row(data_row({"0", "0", "0", "0", "0", std::nullopt, "f"}));
  EXPECT_TRUE(v.finish(none, none).empty());
}

TEST(SessionVerify, StrictQueryComparesValuesAndTheRole) {
  const std::string common =
      "SELECT (SELECT pg_catalog.count(*) FROM pg_catalog.pg_listening_channels()), "
      "(SELECT pg_catalog.count(*) FROM pg_catalog.pg_locks WHERE locktype = 'advisory' "
      "AND pid = pg_catalog.pg_backend_pid()), "
      "(SELECT pg_catalog.count(*) FROM pg_catalog.pg_prepared_statements WHERE from_sql "
      "AND name OPERATOR(pg_catalog.!~) '^pgsluice_s[0-9]+$'), "
      "(SELECT pg_catalog.count(*) FROM pg_catalog.pg_cursors WHERE is_holdable), "
      "(SELECT pg_catalog.count(*) FROM pg_catalog.pg_class "
      "WHERE relnamespace = pg_catalog.pg_my_temp_schema()), ";
  EXPECT_EQ(verify_query("app"),
            common +
                "(SELECT pg_catalog.string_agg(name, ',') FROM pg_catalog.pg_settings "
                "WHERE source = 'session'), (current_user <> session_user OR session_user <> "
                "'app')");
  ParameterSet expected;
  EXPECT_EQ(verify_query("app", &expected),
            common +
                "(SELECT pg_catalog.string_agg(name, ',') FROM pg_catalog.pg_settings "
                "WHERE source = 'session'), (session_user::pg_catalog.text <> 'app' OR "
                "current_user::pg_catalog.text <> 'app')");
  expected.set("Work_Mem", "64MB");
  expected.set("search_path", "a, 'b'");
  expected.set("role", "reader");
  EXPECT_EQ(verify_query("app", &expected),
            common +
                "(SELECT pg_catalog.string_agg(name, ',') FROM pg_catalog.pg_settings "
                "WHERE source = 'session' AND (pg_catalog.lower(name), "
                "pg_catalog.current_setting(name)) NOT IN (VALUES ('search_path', 'a, ''b'''), "
                "('work_mem', '64MB'))), (session_user::pg_catalog.text <> 'app' OR "
                "current_user::pg_catalog.text <> 'reader')");
  expected.set("session_authorization", "boss");
  expected.set("role", "none");
  EXPECT_NE(verify_query("app", &expected)
                .find("(session_user::pg_catalog.text <> 'boss' OR current_user::pg_catalog.text "
                      "<> 'boss')"),
            std::string::npos);
}

TEST(SessionVerify, StrictComparisonTrustsOnlyTheReportedParameters) {
  VerifyAnswer a;
  a.advisory_locks = 1;
  a.session_settings = {"work_mem", "TimeZone"};
  a.role_changed = true;
  SessionTrack track;
  track.note(finding(pp::SessionStateKind::advisory_lock, "pg_advisory_lock"));
  track.note(finding(pp::SessionStateKind::set, "work_mem"));
  track.note(finding(pp::SessionStateKind::role, "role"));
  ParameterSet reported;
  reported.set("TimeZone", "UTC");
  ParameterSet applied;
  applied.set("work_mem", "64MB");  // the strict query already left out what has this value
  EXPECT_TRUE(compare_with_track(a, track, reported, applied).empty());
  EXPECT_EQ(describe(compare_with_track(a, track, reported, applied, /*strict=*/true)),
            (std::vector<std::string>{"advisory_lock:1 lock", "set:work_mem", "role:role"}));
}

TEST(SessionVerify, AnOpaqueCallMakesTheNextCheckStrict) {
  SessionVerifier v;
  ParameterSet none;
  EXPECT_FALSE(v.opaque_call_ran());
  for (const char* name : {"f", "g", "f", "h", "i", "j"}) v.note_opaque_call(name);
  EXPECT_TRUE(v.opaque_call_ran());
  v.expect();
  EXPECT_TRUE(v.strict());
  // A setting the track saw is still hidden: the check is strict.
  v.track().note(finding(pp::SessionStateKind::set, "work_mem"));
  v.on_data_row(data_row({"0", "0", "0", "0", "0", "work_mem", "f"}));
  EXPECT_EQ(describe(v.finish(none, none)), (std::vector<std::string>{"set:work_mem"}));
  EXPECT_EQ(v.caused_by(), "f, g, h, i");  // four names at most, each once
  EXPECT_FALSE(v.opaque_call_ran());
  // The next check is an ordinary one again.
  v.expect();
  EXPECT_FALSE(v.strict());
  v.on_data_row(data_row({"0", "0", "0", "0", "0", "work_mem", "f"}));
  EXPECT_TRUE(v.finish(none, none).empty());
  EXPECT_EQ(v.caused_by(), "");
}

TEST(SessionVerify, SampleTurns) {
  EXPECT_FALSE(verify_turn(SessionVerifyMode::off, 1));
  EXPECT_TRUE(verify_turn(SessionVerifyMode::always, 100));
  int checked = 0;
  for (int i = 0; i < 300; ++i) checked += verify_turn(SessionVerifyMode::sample, 100) ? 1 : 0;
  EXPECT_EQ(checked, 3);
}

}  // namespace
}  // namespace pgsluice
