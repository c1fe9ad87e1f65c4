// The classifier's list of statements that name SQL prepared statements (PreparedNameUse), which
// the pooler renames under SQL PREPARE keep: which statement, which name, where it is written.
#include <gtest/gtest.h>

#include <string>
#include <string_view>

#include "pgsluice/protocol/session_state.h"

namespace pgsluice::protocol {
namespace {

using Op = PreparedNameUse::Op;

// The name's bytes as the input spells them.
std::string_view spelled(std::string_view sql, const PreparedNameUse& use) {
  return sql.substr(use.name_span.offset, use.name_span.length);
}

TEST(PreparedNames, PrepareExecuteDeallocateInOneQuery) {
  const std::string_view sql =
      "PREPARE p (int) AS SELECT $1; EXECUTE p(1);\n DEALLOCATE PREPARE p; DEALLOCATE ALL";
  const Classification c = classify_sql(sql);
  ASSERT_EQ(c.source, VerdictSource::parser);
  ASSERT_EQ(c.prepared_names.size(), 4u);
  EXPECT_EQ(c.prepared_names[0].op, Op::prepare);
  EXPECT_EQ(c.prepared_names[0].statement, 0u);
  EXPECT_EQ(c.prepared_names[0].name, "p");
  EXPECT_EQ(c.prepared_names[0].name_span.offset, 8u);
  EXPECT_EQ(c.prepared_names[0].statement_span.offset, 0u);
  EXPECT_EQ(c.prepared_names[0].statement_span.length, 28u);  // without the ';'
  EXPECT_EQ(c.prepared_names[1].op, Op::execute);
  EXPECT_EQ(c.prepared_names[1].statement, 1u);
  EXPECT_EQ(c.prepared_names[1].name_span.offset, 38u);
  EXPECT_EQ(c.prepared_names[2].op, Op::deallocate);
  EXPECT_EQ(c.prepared_names[2].statement, 2u);
  EXPECT_EQ(spelled(sql, c.prepared_names[2]), "p");
  EXPECT_EQ(c.prepared_names[2].name_span.offset, sql.find("p;", 50));
  EXPECT_EQ(c.prepared_names[3].op, Op::deallocate_all);
  EXPECT_EQ(c.prepared_names[3].statement, 3u);
  EXPECT_EQ(c.prepared_names[3].name, "");
}

TEST(PreparedNames, NamesAreFoldedUnlessQuoted) {
  const std::string_view sql = R"(PREPARE MyStmt AS SELECT 1; EXECUTE "MyStmt"; EXECUTE "a""b")";
  const Classification c = classify_sql(sql);
  ASSERT_EQ(c.prepared_names.size(), 3u);
  EXPECT_EQ(c.prepared_names[0].name, "mystmt");
  EXPECT_EQ(spelled(sql, c.prepared_names[0]), "MyStmt");
  EXPECT_EQ(c.prepared_names[1].name, "MyStmt");
  EXPECT_EQ(spelled(sql, c.prepared_names[1]), "\"MyStmt\"");
  EXPECT_EQ(c.prepared_names[2].name, "a\"b");
  EXPECT_EQ(spelled(sql, c.prepared_names[2]), "\"a\"\"b\"");
}

TEST(PreparedNames, ExplainAndCreateTableAsExecute) {
  // PostgreSQL's grammar: EXECUTE, and CREATE [TEMP|UNLOGGED] TABLE [IF NOT EXISTS] … AS EXECUTE
  // (ExecuteStmt's second form), both explainable. SELECT … INTO, DECLARE, COPY and PREPARE take
  // no EXECUTE.
  for (std::string_view sql :
       {"EXPLAIN EXECUTE q(2)", "EXPLAIN (ANALYZE, COSTS off) execute q(2)",
        "CREATE TEMP TABLE execute AS EXECUTE q(2)",
        "CREATE TABLE IF NOT EXISTS t AS EXECUTE q(2) WITH NO DATA",
        "explain (costs off) create table parallel_write as execute q",
        "EXPLAIN CREATE UNLOGGED TABLE IF NOT EXISTS q AS EXECUTE q(2)",
        "EXPLAIN (ANALYZE) CREATE TABLE t (a) AS EXECUTE q(2)",
        "EXPLAIN (FORMAT json, ANALYZE false) CREATE TABLE t AS EXECUTE q"}) {
    const Classification c = classify_sql(sql);
    ASSERT_EQ(c.prepared_names.size(), 1u) << sql;
    EXPECT_EQ(c.prepared_names[0].op, Op::execute) << sql;
    EXPECT_EQ(c.prepared_names[0].name, "q") << sql;
    EXPECT_EQ(spelled(sql, c.prepared_names[0]), "q") << sql;
  }
}

TEST(PreparedNames, ANameThatIsAKeywordOrAppearsInTheQuery) {
  // The name token follows the statement's own keyword, not a column of the same name.
  const std::string_view sql = "PREPARE execute AS SELECT 1 AS execute";
  const Classification c = classify_sql(sql);
  ASSERT_EQ(c.prepared_names.size(), 1u);
  EXPECT_EQ(c.prepared_names[0].name, "execute");
  EXPECT_EQ(c.prepared_names[0].name_span.offset, 8u);
}

TEST(PreparedNames, DiscardAllAndNothingElse) {
  Classification c = classify_sql("DISCARD ALL");
  ASSERT_EQ(c.prepared_names.size(), 1u);
  EXPECT_EQ(c.prepared_names[0].op, Op::discard_all);
  EXPECT_TRUE(classify_sql("DISCARD PLANS").prepared_names.empty());
  EXPECT_TRUE(classify_sql("SELECT 1").prepared_names.empty());
  EXPECT_TRUE(classify_sql("SET x.y = 1; SELECT 'EXECUTE p'").prepared_names.empty());
}

TEST(PreparedNames, NotInsideDoBlocksOrPreparedQueries) {
  // Not the client's text to rename: the statement runs from inside PL/pgSQL.
  const Classification c =
      classify_sql("DO $$BEGIN EXECUTE 'PREPARE inner_p AS SELECT 1'; END$$; SELECT 1");
  EXPECT_TRUE(c.prepared_names.empty());
}

TEST(PreparedNames, StatementIndexesCountEveryStatement) {
  const std::string_view sql = "SELECT 1; BEGIN; SELECT 2; EXECUTE p; COMMIT";
  const Classification c = classify_sql(sql);
  ASSERT_EQ(c.prepared_names.size(), 1u);
  EXPECT_EQ(c.prepared_names[0].statement, 3u);
  EXPECT_EQ(c.statements, 5u);
}

TEST(PreparedNames, LongNamesAreCutAsPostgreSQLCutsThem) {
  const std::string name(70, 'n');
  const std::string sql = "EXECUTE " + name;
  const Classification c = classify_sql(sql);
  ASSERT_EQ(c.prepared_names.size(), 1u);
  EXPECT_EQ(c.prepared_names[0].name, std::string(63, 'n'));
  EXPECT_EQ(c.prepared_names[0].name_span.length, 70u);
}

TEST(PreparedNames, UnicodeEscapedNamesAreNotLocated) {
  const std::string_view sql = R"(EXECUTE U&"d\0061t\+000061")";
  const Classification c = classify_sql(sql);
  ASSERT_EQ(c.prepared_names.size(), 1u);
  EXPECT_EQ(c.prepared_names[0].name, "data");
  EXPECT_EQ(c.prepared_names[0].name_span.length, 0u);
}

TEST(PreparedNames, LocateOnItsOwn) {
  const std::string_view sql = "SELECT 1; deallocate  prepare \"X\"";
  const StatementSpan s = locate_prepared_name(sql, StatementSpan{10, sql.size() - 10}, "X");
  EXPECT_EQ(sql.substr(s.offset, s.length), "\"X\"");
  EXPECT_EQ(locate_prepared_name(sql, StatementSpan{10, sql.size() - 10}, "x").length, 0u);
}

}  // namespace
}  // namespace pgsluice::protocol
