// Per-function verdicts (opaque_call:reset): the judgement of a body, the lookup query and its
// rows, the process's cache (the DDL that empties it: tests/unit/protocol/function_ddl_test.cc).
#include "pooler/session_state/function_verdicts.h"

#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <vector>

#include "tests/unit/pooler/data_row.h"

namespace pgsluice {
namespace {

FunctionJudgement judge(std::string language, std::string body, std::string arguments = "",
                        std::string result = "integer") {
  return judge_function(FunctionRow{.language = std::move(language),
                                    .body = std::move(body),
                                    .arguments = std::move(arguments),
                                    .result = std::move(result)});
}

TEST(FunctionVerdicts, ReadOnlyBodiesChangeNoState) {
  EXPECT_EQ(judge("plpgsql",
                  "BEGIN RETURN (SELECT abalance FROM pgbench_accounts WHERE aid = a); "
                  "END",
                  "a integer"),
            FunctionJudgement{});
  EXPECT_EQ(judge("sql", "SELECT $1 * 2", "integer"), FunctionJudgement{});
  // SET LOCAL and set_config(…, true) end with the transaction.
  EXPECT_EQ(judge("plpgsql", "BEGIN SET LOCAL work_mem = '3MB'; RETURN 1; END"),
            FunctionJudgement{});
  EXPECT_EQ(judge("plpgsql", "BEGIN PERFORM set_config('work_mem', '3MB', true); RETURN 1; END"),
            FunctionJudgement{});
  // currval reads what an earlier nextval left: a use, not a change.
  EXPECT_EQ(judge("sql", "SELECT currval('s')::int"), FunctionJudgement{});
}

TEST(FunctionVerdicts, SettingsNamedByConstantsAreResetAtTheRelease) {
  const FunctionJudgement work_mem{FunctionVerdict::resets_settings, {"work_mem"}};
  EXPECT_EQ(judge("plpgsql", "BEGIN PERFORM set_config('work_mem', '3MB', false); RETURN 1; END"),
            work_mem);
  EXPECT_EQ(judge("plpgsql", "BEGIN SET Work_Mem = '3MB'; RETURN 1; END"), work_mem);
  EXPECT_EQ(judge("plpgsql", "BEGIN RESET work_mem; RETURN 1; END"), work_mem);
  EXPECT_EQ(judge("plpgsql",
                  "BEGIN SET work_mem = '3MB'; SET work_mem = '4MB'; "
                  "PERFORM set_config('app.t', 'x', false); RETURN 1; END"),
            (FunctionJudgement{FunctionVerdict::resets_settings, {"work_mem", "app.t"}}));
  EXPECT_EQ(judge("sql", "SELECT set_config('app.t', $1, false)", "text", "text"),
            (FunctionJudgement{FunctionVerdict::resets_settings, {"app.t"}}));
  // Overloads of one name: settings add up, anything unknown wins.
  FunctionJudgement name = judge("sql", "SELECT 1");
  merge_judgement(name, work_mem);
  merge_judgement(name, FunctionJudgement{FunctionVerdict::resets_settings, {"app.t"}});
  EXPECT_EQ(name, (FunctionJudgement{FunctionVerdict::resets_settings, {"work_mem", "app.t"}}));
  merge_judgement(name, FunctionJudgement{FunctionVerdict::may_change, {}});
  EXPECT_EQ(name.verdict, FunctionVerdict::may_change);
  merge_judgement(name, work_mem);
  EXPECT_EQ(name.verdict, FunctionVerdict::may_change);
}

TEST(FunctionVerdicts, WhatMayChangeStateIsCheckedEveryTime) {
  for (const char* body :
       {"BEGIN RESET ALL; RETURN 1; END", "BEGIN SET ROLE nobody; RETURN 1; END",
        "BEGIN PERFORM pg_advisory_lock(1); RETURN 1; END", "BEGIN LISTEN c; RETURN 1; END",
        "BEGIN EXECUTE 'SELECT ' || 1; RETURN 1; END",             // dynamic SQL
        "BEGIN RETURN other_user_function(); END",                 // another non-built-in function
        "BEGIN PERFORM set_config(n, '1', false); RETURN 1; END",  // n: not declared here
        "BEGIN DISCARD ALL; RETURN 1; END", "this is not plpgsql"}) {
    EXPECT_EQ(judge("plpgsql", body).verdict, FunctionVerdict::may_change) << body;
  }
  EXPECT_EQ(judge("sql", "SELECT set_config($1, 'x', false)", "text", "text").verdict,
            FunctionVerdict::may_change);
  EXPECT_EQ(judge("sql", "").verdict, FunctionVerdict::may_change);  // BEGIN ATOMIC
  EXPECT_EQ(judge("c", "symbol").verdict, FunctionVerdict::may_change);
  EXPECT_EQ(judge("internal", "lower").verdict, FunctionVerdict::may_change);
}

TEST(FunctionVerdicts, NamesTheLookupCanFind) {
  EXPECT_TRUE(names_a_function("f"));
  EXPECT_TRUE(names_a_function("myschema.f"));
  EXPECT_TRUE(names_a_function("CamelCase"));
  EXPECT_FALSE(names_a_function(""));
  EXPECT_FALSE(names_a_function("db.schema.f"));
  EXPECT_FALSE(names_a_function(".f"));  // the lexer's guess
  EXPECT_FALSE(names_a_function("DO (language plperl)"));
  EXPECT_FALSE(names_a_function("DO: EXECUTE of dynamic SQL"));
  EXPECT_FALSE(names_a_function("function (body not analysed)"));
}

TEST(FunctionVerdicts, LookupQuery) {
  EXPECT_EQ(
      function_lookup_query({"f", "s.g", "it's"}),
      "SELECT c.i, l.lanname, p.prosrc, pg_catalog.pg_get_function_arguments(p.oid), "
      "pg_catalog.pg_get_function_result(p.oid) FROM (VALUES (0, 'f', NULL::pg_catalog.text), "
      "(1, 'g', 's'::pg_catalog.text), (2, 'it''s', NULL::pg_catalog.text)) AS c(i, fname, nsp) "
      "JOIN pg_catalog.pg_proc p ON p.proname OPERATOR(pg_catalog.=) c.fname::pg_catalog.name "
      "JOIN pg_catalog.pg_namespace n ON n.oid OPERATOR(pg_catalog.=) p.pronamespace "
      "JOIN pg_catalog.pg_language l ON l.oid OPERATOR(pg_catalog.=) p.prolang "
      "WHERE CASE WHEN c.nsp IS NULL "
      "THEN n.nspname OPERATOR(pg_catalog.=) ANY (pg_catalog.current_schemas(true)) "
      "ELSE n.nspname OPERATOR(pg_catalog.=) c.nsp::pg_catalog.name END");
}

TEST(FunctionVerdicts, LookupRowsGiveOneVerdictPerNameInTheCache) {
  FunctionVerdictCache& cache = FunctionVerdictCache::process();
  cache.clear();
  const std::string prefix = verdict_key_prefix("app", "app", "");
  FunctionLookup lookup;
  lookup.start({"reader", "setter", "missing", "overloaded"}, prefix);
  EXPECT_TRUE(lookup.awaiting());
  lookup.on_row(data_row({"0", "plpgsql", "BEGIN RETURN a; END", "a integer", "integer"}));
  lookup.on_row(data_row({"1", "plpgsql", "BEGIN SET work_mem = '3MB'; END", "", "void"}));
  // One overload reads, the other takes a lock: the name may change state.
  lookup.on_row(data_row({"3", "sql", "SELECT 1", "", "integer"}));
  lookup.on_row(data_row({"3", "sql", "SELECT pg_advisory_lock(1)", "x text", "void"}));
  lookup.finish(1000);
  EXPECT_FALSE(lookup.awaiting());
  EXPECT_EQ(cache.find(prefix + "reader", 1000), FunctionJudgement{});
  const FunctionJudgement unknown{FunctionVerdict::may_change, {}};
  EXPECT_EQ(cache.find(prefix + "setter", 1000),
            (FunctionJudgement{FunctionVerdict::resets_settings, {"work_mem"}}));
  EXPECT_EQ(cache.find(prefix + "missing", 1000), unknown);
  EXPECT_EQ(cache.find(prefix + "overloaded", 1000), unknown);
  // Another search_path, user or database is another key.
  EXPECT_EQ(cache.find(verdict_key_prefix("app", "app", "other") + "reader", 1000), std::nullopt);
  EXPECT_EQ(cache.find(verdict_key_prefix("app", "bob", "") + "reader", 1000), std::nullopt);
  // A verdict expires.
  EXPECT_EQ(cache.find(prefix + "reader", 1000 + kFunctionVerdictTtlMs - 1), FunctionJudgement{});
  EXPECT_EQ(cache.find(prefix + "reader", 1000 + kFunctionVerdictTtlMs), std::nullopt);
  EXPECT_EQ(cache.find(prefix + "reader", 1000), std::nullopt);  // and is gone
  cache.clear();
  EXPECT_EQ(cache.size(), 0u);
}

TEST(FunctionVerdicts, AnAnswerNotUnderstoodJudgesNothing) {
  FunctionVerdictCache& cache = FunctionVerdictCache::process();
  cache.clear();
  const std::string prefix = verdict_key_prefix("app", "app", "");
  FunctionLookup lookup;
  lookup.start({"reader"}, prefix);
  lookup.on_row(data_row({"0", "sql", "SELECT 1", "", "integer"}));
  lookup.on_row(data_row({"7", "sql", "SELECT 1", "", "integer"}));  // no such name
  lookup.finish(0);
  EXPECT_EQ(cache.size(), 0u);
  lookup.start({"reader"}, prefix);
  lookup.on_row(data_row({"0", "sql"}));  // not the lookup's row
  lookup.finish(0);
  EXPECT_EQ(cache.size(), 0u);
}

TEST(FunctionVerdicts, BoundedCache) {
  FunctionVerdictCache& cache = FunctionVerdictCache::process();
  cache.clear();
  for (size_t i = 0; i < FunctionVerdictCache::kMaxEntries; ++i) {
    cache.store("k" + std::to_string(i), FunctionJudgement{}, 0);
  }
  EXPECT_EQ(cache.size(), FunctionVerdictCache::kMaxEntries);
  cache.store("k0", FunctionJudgement{FunctionVerdict::may_change, {}},
              0);  // a known key replaces its entry
  EXPECT_EQ(cache.size(), FunctionVerdictCache::kMaxEntries);
  cache.store("new", FunctionJudgement{}, 0);  // full: starts again
  EXPECT_EQ(cache.size(), 1u);
  cache.clear();
}

}  // namespace
}  // namespace pgsluice
