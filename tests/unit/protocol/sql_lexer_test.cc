// Unit tests of the SQL tokenizer and the session-state prefilter: token boundaries in each of
// PostgreSQL's quoting forms, keywords that must and must not count, and a few thousand
// realistic application statements (pgbench's and ORM-style, generated from a fixed seed) that
// must all pass without a parse.
#include "pgsluice/protocol/sql_lexer.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>
#include <vector>

namespace pgsluice::protocol {
namespace {

std::vector<SqlToken> tokens(std::string_view sql) {
  std::vector<SqlToken> out;
  SqlTokenizer tokenizer(sql);
  SqlToken t;
  while (tokenizer.next(t)) out.push_back(t);
  return out;
}

std::string kinds(std::string_view sql) {
  std::string out;
  for (const SqlToken& t : tokens(sql)) {
    if (!out.empty()) out += ' ';
    switch (t.kind) {
      case SqlTokenKind::word:
        out += "w";
        break;
      case SqlTokenKind::quoted_identifier:
        out += "q";
        break;
      case SqlTokenKind::string_literal:
        out += "s";
        break;
      case SqlTokenKind::dollar_string:
        out += "d";
        break;
      case SqlTokenKind::number:
        out += "n";
        break;
      case SqlTokenKind::parameter:
        out += "p";
        break;
      case SqlTokenKind::punct:
        out += t.text;
        break;
    }
  }
  return out;
}

TEST(SqlLexerTokens, WordsPunctuationNumbersParameters) {
  EXPECT_EQ(kinds("SELECT a.b, 1.5e-3 FROM t WHERE x = $12;"), "w w . w , n w w w w = p ;");
  const auto t = tokens("select  abc$d  ");
  ASSERT_EQ(t.size(), 2u);
  EXPECT_EQ(t[1].text, "abc$d");
  EXPECT_EQ(t[1].offset, 8u);
}

TEST(SqlLexerTokens, StringsWithEscapes) {
  EXPECT_EQ(kinds("'it''s' x"), "s w");
  EXPECT_EQ(tokens("'it''s' x")[0].text, "'it''s'");
  EXPECT_EQ(kinds("E'\\'' x"), "s w");
  EXPECT_EQ(tokens("E'\\'' x")[0].text, "E'\\''");
  EXPECT_EQ(kinds("e'a\\\\' x"), "s w");
  // Without the E prefix, a backslash is an ordinary character (standard_conforming_strings).
  EXPECT_EQ(kinds("'a\\' x"), "s w");
  EXPECT_EQ(kinds("B'1010' X'ff' N'x' U&'d\\0061' x"), "s s s s w");
}

TEST(SqlLexerTokens, QuotedIdentifiers) {
  EXPECT_EQ(kinds("\"a\"\"b\" x"), "q w");
  EXPECT_EQ(tokens("\"a\"\"b\" x")[0].text, "\"a\"\"b\"");
  EXPECT_EQ(kinds("U&\"d\\0061t\" x"), "q w");
}

TEST(SqlLexerTokens, DollarQuotes) {
  EXPECT_EQ(kinds("$$ a ' b $$ x"), "d w");
  EXPECT_EQ(kinds("$fn$ $$ $x$ $fn$ x"), "d w");
  EXPECT_EQ(tokens("$fn$ $$ $x$ $fn$ x")[0].text, "$fn$ $$ $x$ $fn$");
  EXPECT_EQ(kinds("$1 $a"), "p $ w");
  // An unterminated dollar quote runs to the end.
  EXPECT_EQ(kinds("$q$ never closed"), "d");
}

TEST(SqlLexerTokens, Comments) {
  EXPECT_EQ(kinds("a -- c\nb"), "w w");
  EXPECT_EQ(kinds("a /* x /* nested */ still */ b"), "w w");
  EXPECT_EQ(kinds("a /* unterminated"), "w");
  EXPECT_EQ(kinds("a - - b / c"), "w - - w / w");
}

struct PrefilterCase {
  std::string_view sql;
  bool flagged;
};

// clang-format off
const PrefilterCase kPrefilterCases[] = {
    {"SET x = 1", true},
    {"  set local x = 1", true},
    {"RESET ALL", true},
    {"LISTEN a", true},
    {"unlisten *", true},
    {"PREPARE p AS SELECT 1", true},
    {"EXECUTE p", true},
    {"EXPLAIN EXECUTE p", true},
    {"DEALLOCATE p", true},
    {"DECLARE c CURSOR FOR SELECT 1", true},
    {"CLOSE c", true},
    {"LOAD 'x'", true},
    {"DISCARD ALL", true},
    {"DO $$ BEGIN END $$", true},
    {"CREATE TEMP TABLE t (a int)", true},
    {"CREATE GLOBAL TEMPORARY TABLE t (a int)", true},
    {"SELECT * INTO TEMP t FROM u", true},
    {"CREATE TABLE pg_temp.t (a int)", true},
    {"SELECT pg_advisory_lock(1)", true},
    {"SELECT set_config('a', 'b', false)", true},
    {"SELECT myfunc(1)", true},
    {"SELECT s.myfunc(1)", true},
    {"SELECT public.now()", true},
    {"SELECT \"now\"()", true},
    {"SELECT 1; SET x = 1", true},
    {"BEGIN; SET LOCAL x = 1; COMMIT", true},
    {"SELECT 1 /* c */; LISTEN a", true},
    {"SELECT x FROM t WHERE y = f (1)", true},
    {"CALL p()", true},
    {"SELECT setseed(0.5)", true},
    {"SELECT currval('s')", true},
    {"SELECT query_to_xml('SET x = 1', true, true, '')", true},
    {"SELECT pg_catalog.set_config('a', 'b', false)", true},

    {"SELECT 1", false},
    {"SELECT 'SET x = 1; LISTEN a'", false},
    {"SELECT $$ SET x = 1 $$", false},
    {"SELECT $a$ $$ ; LISTEN b $a$", false},
    {"/* SET x */ SELECT 1", false},
    {"/* a /* b */ SET x */ SELECT 1", false},
    {"-- SET x\nSELECT 1", false},
    {"SELECT \"set\", \"listen\" FROM t", false},
    {"SELECT E'\\'; SET x = 1'", false},
    {"UPDATE t SET a = 1 WHERE b = 2", false},
    {"UPDATE t SET (a, b) = (1, 2)", false},
    {"INSERT INTO t (a, b) VALUES (1, 2) ON CONFLICT (a) DO NOTHING", false},
    {"INSERT INTO s.t (a) VALUES (1) ON CONFLICT (a) DO UPDATE SET a = 2", false},
    {"SELECT temp, role, session, load, reset FROM weather", false},
    {"SELECT count(*), sum(x), coalesce(a, b), lower(n) FROM t GROUP BY n", false},
    {"SELECT pg_catalog.lower(n) FROM t", false},
    {"SELECT pg_advisory_xact_lock(1)", false},
    {"SELECT CAST(x AS numeric(10, 2)), y::varchar(20) FROM t", false},
    {"SELECT * FROM t WHERE a IN (1, 2) AND NOT EXISTS (SELECT 1)", false},
    {"WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r) SELECT * FROM r", false},
    {"SELECT row_number() OVER (PARTITION BY a ORDER BY b) FROM t", false},
    {"SELECT * FROM t AS x(a, b)", false},
    {"COPY t (a, b) FROM STDIN", false},
    {"CREATE TABLE t (a int)", false},
    {"SELECT jsonb_build_object('a', 1), now() - interval '1 day'", false},
    {"SELECT x FROM t FOR UPDATE SKIP LOCKED", false},
    {"SELECT 'unterminated; SET x = 1", false},
    // Built-ins beyond the everyday ones: PostgreSQL 15's pg_proc, by their properties.
    {"SELECT inet_server_addr(), inet_server_port(), pg_backend_pid()", false},
    {"SELECT pg_catalog.pg_postmaster_start_time(), pg_listening_channels()", false},
    {"SELECT lo_open(1, 262144), random(), nextval('s')", false},
    {"SELECT greatest(a, b), least(a, b), nullif(a, 0), trim(both 'x' from y) FROM t", false},
};
// clang-format on

TEST(SqlLexerPrefilter, Cases) {
  for (const PrefilterCase& c : kPrefilterCases) {
    EXPECT_EQ(may_change_session_state(c.sql), c.flagged) << "SQL: " << c.sql;
  }
}

// The quick pass (prefilter_quick_scan.cc) stops at '(', ';', "temp", "execute" and comments;
// these put each stop where only the token pass can tell, and where the bytes around a stop
// mislead: a comment between a name and its '(', a name glued to a parameter, a qualified name.
// clang-format off
const PrefilterCase kQuickPassCases[] = {
    {"SELECT f -- c\n(1)", true},
    {"SELECT f /* c */ (1)", true},
    {"SELECT now /* c */ (1)", false},
    {"SELECT now(), count(*), lower(a) FROM t", false},
    {"SELECT s . now()", true},
    {"SELECT pg_catalog . now()", false},
    {"SELECT $1now()", false},
    {"SELECT 1e5now()", false},
    {"SELECT x FROM t WHERE a = (1)", false},
    {"(SELECT 1)", false},
    {"  (SELECT myfunc(1))", true},
    {"SELECT 'a (b' FROM t", false},
    {"SELECT 'f (b' FROM t", false},
    {"SELECT 1;  \n ", false},
    {"SELECT 1; -- trailing", false},
    {"SELECT 1;;", false},
    {";SET x = 1", true},
    {"SELECT 'a;b' FROM t", false},
    {"SELECT templates FROM t", false},
    {"SELECT contempt FROM t", false},
    {"CREATE TEMPORARY VIEW v AS SELECT 1", true},
    {"SELECT * FROM Pg_Temp_3.t", true},
    {"SELECT executed FROM t", false},
    {"EXPLAIN ExEcUtE p", true},
    {"SELECT a-b, a/b FROM t", false},
    {"SELECT x FROM \"T\"(1)", true},
    {"INSERT INTO t (a) VALUES (1)", false},
    {"INSERT INTO pgbench_history (tid, bid, aid, delta, mtime) VALUES (1, 2, 3, -4, "
     "CURRENT_TIMESTAMP)", false},
    {"insert into Public . T(a) values (1)", false},
    {"INSERT INTO t (a) SELECT myfunc(1)", true},
    {"INSERT INTO t (a) VALUES (set_config('a.b', 'c', false))", true},
    {"INSERT INTO a.b.t (a) VALUES (1)", false},
    {"INSERT INTO \"T\" (a) VALUES (1)", false},
    {"INSERT INTO \"a\"\"b\" (a) VALUES (1)", false},
    {"SELECT 'into' \"f\"(1)", true},
    {"SELECT \"x\" AS \"y\" (1)", false},
    {"SELECT x FROM into_t (1)", true},
    {"SELECT 1 AS x, f (1)", true},
    {"CREATE TABLE t (id int)", false},
    {"WITH c (a) AS (SELECT 1) SELECT * FROM c", false},
    {"SELECT aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa(1)", true},
    {"/* SET */ SELECT 1", false},
    // A keyword glued to a number is part of it (the fuzz target's find): not an INTO.
    {"5.INTO r(", true},
    {"SELECT 5e+INTO r(1)", true},
    {"SELECT 5e-into r (1)", true},
    {"", false},
    {"  -- only a comment", false},
};
// clang-format on

TEST(SqlLexerPrefilter, QuickPassCases) {
  for (const PrefilterCase& c : kQuickPassCases) {
    EXPECT_EQ(may_change_session_state(c.sql), c.flagged) << "SQL: " << c.sql;
    EXPECT_EQ(may_change_session_state_by_tokens(c.sql), c.flagged) << "SQL: " << c.sql;
  }
}

// Column lists are cleared by the quick pass on its own: pgbench's tpcb INSERT and an
// application's INSERT with a qualified table no longer cost the token pass.
TEST(SqlLexerPrefilter, QuickPassClearsColumnLists) {
  for (std::string_view sql :
       {"INSERT INTO pgbench_history (tid, bid, aid, delta, mtime) VALUES (1, 2, 3, -4, "
        "CURRENT_TIMESTAMP);",
        "insert into Public . T(a) values ($1)", "INSERT INTO t(a, b) VALUES (1, now())",
        "CREATE TABLE t (id int)", "WITH c (a) AS (SELECT 1) SELECT * FROM c",
        "INSERT INTO \"users\" (\"name\", \"email\") VALUES ($1, $2) RETURNING \"users\".\"id\"",
        "INSERT INTO \"public\".\"Users\"(\"id\") VALUES (1)",
        "insert into public.\"T\" (a) values (1)"}) {
    EXPECT_TRUE(quick_pass_clears(sql)) << "SQL: " << sql;
  }
  // Handed over: a name with a doubled quote, a twice-qualified name, a U& name, a quoted
  // function, a call after the column list.
  for (std::string_view sql :
       {"INSERT INTO \"a\"\"b\" (a) VALUES (1)", "INSERT INTO a.b.t (a) VALUES (1)",
        "SELECT \"MyFunc\"(1)", "SELECT x FROM U&\"t\" (1)", "INSERT INTO \"a\".\"b\".t (a)",
        "INSERT INTO t (a) SELECT myfunc(1)", "SELECT x FROM into_t (1)"}) {
    EXPECT_FALSE(quick_pass_clears(sql)) << "SQL: " << sql;
  }
}

// The scan finds a stop wherever it is in a long statement (sixteen bytes at a time, then eight,
// then one), and control bytes that look like stops once their case bit is set ('\r' like '-',
// '\b' like '(') are not taken for them.
TEST(SqlLexerPrefilter, QuickPassFindsStopsAtEveryOffset) {
  for (size_t at = 0; at < 48; ++at) {
    for (std::string_view stop : {"EXECUTE p", "f(1)", "; SET x = 1", "temp", "-- c", "/* c */"}) {
      std::string sql = "SELECT " + std::string(at, 'a') + " " + std::string(stop) + " FROM t";
      EXPECT_FALSE(quick_pass_clears(sql)) << "SQL: " << sql;
    }
    std::string clean = "SELECT " + std::string(at, 'a') + "\r\n\b\x0f\x1b\x0d" + " FROM t";
    EXPECT_TRUE(quick_pass_clears(clean)) << "at " << at;
  }
}

// The quick pass gives the token pass's answer on every case here (it never clears a flagged
// statement, and never flags: it only hands over).
TEST(SqlLexerPrefilter, QuickPassAgreesWithTokenPass) {
  for (const PrefilterCase& c : kPrefilterCases) {
    EXPECT_EQ(may_change_session_state(c.sql), may_change_session_state_by_tokens(c.sql))
        << "SQL: " << c.sql;
  }
}

TEST(SqlLexerPrefilter, BuiltinLists) {
  EXPECT_TRUE(is_known_safe_builtin("now"));
  EXPECT_TRUE(is_known_safe_builtin("pg_advisory_xact_lock"));
  EXPECT_TRUE(is_known_safe_builtin("inet_server_addr"));  // STABLE, reads the connection
  EXPECT_TRUE(is_known_safe_builtin("clock_timestamp"));   // VOLATILE, PARALLEL SAFE
  EXPECT_TRUE(is_known_safe_builtin("lo_open"));           // reviewed: closed at commit
  EXPECT_TRUE(is_known_safe_builtin("uuid_generate_v4"));  // uuid-ossp's, by choice
  // Built-ins that do leave state in the session: findings of their kinds, or opaque calls.
  for (std::string_view name :
       {"set_config", "pg_advisory_lock", "pg_advisory_lock_shared", "pg_try_advisory_lock",
        "pg_try_advisory_lock_shared", "pg_advisory_unlock", "pg_advisory_unlock_shared",
        "pg_advisory_unlock_all", "currval", "lastval", "setseed", "pg_backup_start",
        "pg_create_logical_replication_slot", "pg_replication_origin_session_setup", "query_to_xml",
        "ts_stat", "binary_upgrade_set_next_pg_type_oid"}) {
    EXPECT_FALSE(is_known_safe_builtin(name)) << name;
  }
  EXPECT_FALSE(is_known_safe_builtin("no_such_function"));
  EXPECT_FALSE(is_known_safe_builtin(""));
  EXPECT_FALSE(is_known_safe_builtin("NOW"));  // callers lowercase first
  EXPECT_TRUE(is_paren_keyword("values"));
  EXPECT_TRUE(is_column_list_intro("into"));
  EXPECT_TRUE(iequals_keyword("SeT", "set"));
  EXPECT_FALSE(iequals_keyword("sets", "set"));
}

// A fixed linear congruential generator: the same "random" queries on every run.
class Lcg {
 public:
  uint32_t next() {
    state_ = state_ * 6364136223846793005ULL + 1442695040888963407ULL;
    return static_cast<uint32_t>(state_ >> 33);
  }
  template <size_t N>
  std::string_view pick(const std::string_view (&items)[N]) {
    return items[next() % N];
  }

 private:
  uint64_t state_ = 20240601;
};

// pgbench's built-in scripts (tpcb-like, simple-update, select-only), as pgbench sends them with
// -M extended (parameters) and -M simple (literals).
std::vector<std::string> pgbench_statements(Lcg& rng) {
  const std::string aid = std::to_string(rng.next() % 100000 + 1);
  const std::string bid = std::to_string(rng.next() % 10 + 1);
  const std::string tid = std::to_string(rng.next() % 100 + 1);
  const std::string delta = std::to_string(static_cast<int>(rng.next() % 10001) - 5000);
  return {
      "BEGIN;",
      "UPDATE pgbench_accounts SET abalance = abalance + " + delta + " WHERE aid = " + aid + ";",
      "SELECT abalance FROM pgbench_accounts WHERE aid = " + aid + ";",
      "UPDATE pgbench_tellers SET tbalance = tbalance + " + delta + " WHERE tid = " + tid + ";",
      "UPDATE pgbench_branches SET bbalance = bbalance + " + delta + " WHERE bid = " + bid + ";",
      "INSERT INTO pgbench_history (tid, bid, aid, delta, mtime) VALUES (" + tid + ", " + bid +
          ", " + aid + ", " + delta + ", CURRENT_TIMESTAMP);",
      "END;",
      "SELECT abalance FROM pgbench_accounts WHERE aid = $1",
      "UPDATE pgbench_accounts SET abalance = abalance + $1 WHERE aid = $2",
      "INSERT INTO pgbench_history (tid, bid, aid, delta, mtime) VALUES ($1, $2, $3, $4, "
      "CURRENT_TIMESTAMP)",
  };
}

// What Django, Rails, Hibernate and SQLAlchemy send: quoted identifiers, aliases, joins, IN
// lists, LIMIT/OFFSET, RETURNING, upserts, aggregates, json operators, comments with trace ids.
std::string orm_statement(Lcg& rng) {
  static constexpr std::string_view kTables[] = {"users",    "orders",   "order_items", "products",
                                                 "accounts", "sessions", "roles",       "settings"};
  static constexpr std::string_view kColumns[] = {"id",         "name", "email",  "created_at",
                                                  "updated_at", "role", "status", "session_id",
                                                  "temp",       "load", "set_id", "reset_token"};
  static constexpr std::string_view kFuncs[] = {"lower", "upper",      "coalesce", "length",
                                                "trim",  "date_trunc", "count",    "max"};
  const std::string t(rng.pick(kTables));
  const std::string u(rng.pick(kTables));
  const std::string c(rng.pick(kColumns));
  const std::string d(rng.pick(kColumns));
  const std::string n = std::to_string(rng.next() % 100000);
  switch (rng.next() % 10) {
    case 0:
      return "SELECT \"" + t + "\".\"" + c + "\", \"" + t + "\".\"" + d + "\" FROM \"" + t +
             "\" WHERE \"" + t + "\".\"id\" = " + n + " LIMIT 21";
    case 1:
      return "SELECT " + t + "0_." + c + " AS " + c + "1_0_, " + t + "0_." + d + " AS " + d +
             "2_0_ FROM " + t + " " + t + "0_ WHERE " + t + "0_.id=$5 AND " + t + "0_." + d +
             " IN ($1, $2, $3) ORDER BY " + t + "0_." + c + " DESC LIMIT $4";
    case 2:
      return "INSERT INTO \"" + t + "\" (\"" + c + "\", \"" + d +
             "\", \"created_at\") VALUES ($1, $2, now()) RETURNING \"" + t + "\".\"id\"";
    case 3:
      return "UPDATE \"" + t + "\" SET \"" + c + "\" = $1, \"updated_at\" = $2 WHERE \"" + t +
             "\".\"id\" = $3";
    case 4:
      return "SELECT COUNT(*) AS \"__count\" FROM \"" + t + "\" INNER JOIN \"" + u + "\" ON (\"" +
             t + "\".\"id\" = \"" + u + "\".\"" + d + "\") WHERE \"" + u + "\".\"" + c + "\" = '" +
             n + "'";
    case 5:
      return "/* trace_id=" + n + " controller='" + t + "' */ SELECT " +
             std::string(rng.pick(kFuncs)) + "(" + c + ") FROM " + t + " WHERE " + d +
             " BETWEEN $1 AND $2 GROUP BY " + c;
    case 6:
      return "INSERT INTO " + t + " (" + c + ", " + d + ") VALUES ($1, $2) ON CONFLICT (" + c +
             ") DO UPDATE SET " + d + " = EXCLUDED." + d;
    case 7:
      return "DELETE FROM " + t + " WHERE " + c + " = ANY($1::bigint[]) AND " + d +
             " < now() - interval '30 days'";
    case 8:
      return "SELECT t.*, u." + c + " FROM " + t + " t LEFT OUTER JOIN " + u + " u ON u.id = t." +
             d + " WHERE t.payload->>'kind' = $1 AND t." + c +
             " IS NOT NULL ORDER BY t.id OFFSET " + n + " LIMIT 50";
    default:
      return "WITH recent AS (SELECT id, " + c + " FROM " + t +
             " WHERE created_at > $1) SELECT r.id, jsonb_build_object('v', r." + c +
             ") FROM recent r WHERE EXISTS (SELECT 1 FROM " + u + " x WHERE x.id = r.id)";
  }
}

TEST(SqlLexerPrefilter, RealisticApplicationQueriesPass) {
  Lcg rng;
  size_t checked = 0;
  for (int i = 0; i < 300; ++i) {
    for (const std::string& sql : pgbench_statements(rng)) {
      EXPECT_FALSE(may_change_session_state(sql)) << "SQL: " << sql;
      ++checked;
    }
  }
  for (int i = 0; i < 3000; ++i) {
    const std::string sql = orm_statement(rng);
    EXPECT_FALSE(may_change_session_state(sql)) << "SQL: " << sql;
    ++checked;
  }
  EXPECT_GE(checked, 6000u);
}

// Statements glued at random from fragments that sit near the quick pass's stops (comments,
// quotes, names, dots, parameters, ';', TEMP, EXECUTE): the quick pass must agree with the token
// pass on every one. fuzz_sql_lexer checks the same on arbitrary bytes.
TEST(SqlLexerPrefilter, QuickPassAgreesOnGluedFragments) {
  static constexpr std::string_view kFragments[] = {
      "SELECT ", "f",     "now",     "(",          ")",      ";",   " ",          "\n",
      "--c\n",   "/*c*/", "'a(b'",   "\"q\"",      ".",      "$1",  "$$ ( $$",    "temp",
      "execute", "SET ",  "pg_temp", "E'\\'",      "into ",  "t",   ",",          "1e5",
      "x",       "lower", "s.",      "create ",    "-",      "/",   "pg_catalog", "COUNT",
      "*",       "=",     "U&\"a\"", "$a$x$a$",    "table ", "as ", "with ",      "INTO",
      "1",       "'x'",   "\"",      "\"a\"\"b\"", "&"};
  Lcg rng;
  int flagged = 0;
  for (int i = 0; i < 20000; ++i) {
    std::string sql;
    const uint32_t parts = rng.next() % 9 + 1;
    for (uint32_t p = 0; p < parts; ++p) sql += rng.pick(kFragments);
    const bool by_tokens = may_change_session_state_by_tokens(sql);
    ASSERT_EQ(may_change_session_state(sql), by_tokens) << "SQL: " << sql;
    flagged += by_tokens ? 1 : 0;
  }
  EXPECT_GT(flagged, 1000);  // both answers occur: the fragments reach the flagged conditions
  EXPECT_LT(flagged, 19000);
}

// Prints the prefilter's cost; asserts nothing about time.
TEST(SqlLexerPrefilter, CostOfPgbenchSelect) {
  const std::string_view select = "SELECT abalance FROM pgbench_accounts WHERE aid = $1";
  const std::string_view update =
      "UPDATE pgbench_accounts SET abalance = abalance + $1 WHERE aid = $2";
  constexpr int kRounds = 200000;
  size_t flagged = 0;
  auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < kRounds; ++i) flagged += may_change_session_state(select) ? 1 : 0;
  auto mid = std::chrono::steady_clock::now();
  for (int i = 0; i < kRounds; ++i) flagged += may_change_session_state(update) ? 1 : 0;
  auto end = std::chrono::steady_clock::now();
  EXPECT_EQ(flagged, 0u);
  const double ns_select = std::chrono::duration<double, std::nano>(mid - start).count() / kRounds;
  const double ns_update = std::chrono::duration<double, std::nano>(end - mid).count() / kRounds;
  std::printf("prefilter: %.1f ns/query (pgbench select), %.1f ns/query (pgbench update)\n",
              ns_select, ns_update);
}

}  // namespace
}  // namespace pgsluice::protocol
