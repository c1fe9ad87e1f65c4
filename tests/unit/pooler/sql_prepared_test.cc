// SQL PREPARE kept (pooler/session_state/sql_prepared.h): a Query renamed byte by byte, what the
// client and the server are believed to have, what an error undoes, the client's error.
#include "pooler/session_state/sql_prepared.h"

#include <gtest/gtest.h>

#include <string>
#include <string_view>
#include <utility>

#include "pgsluice/protocol/backend.h"
#include "pgsluice/protocol/session_state.h"
#include "pgsluice/protocol/writer.h"

namespace pgsluice {
namespace {

namespace pp = pgsluice::protocol;

std::optional<SqlQueryPlan> plan(std::string_view sql, ClientSqlStatements& client,
                                 ServerSqlStatements& server) {
  const pp::Classification c = pp::classify_sql(sql);
  return plan_sql_query(sql, c.prepared_names, client, server);
}

// The id-dependent name of the statement a client holds as `name`.
std::string server_name(const ClientSqlStatements& client, const std::string& name) {
  return client.at(name)->server_name();
}

TEST(SqlPrepared, PrepareIsRenamedAndBelievedAtOnce) {
  ClientSqlStatements client;
  ServerSqlStatements server;
  auto p = plan("PREPARE p (int) AS SELECT $1 -- one", client, server);
  ASSERT_TRUE(p);
  ASSERT_TRUE(client.contains("p"));
  const std::string srv = server_name(client, "p");
  EXPECT_TRUE(srv.starts_with("pgsluice_s"));
  EXPECT_EQ(p->sent_sql, "PREPARE " + srv + " (int) AS SELECT $1 -- one");
  EXPECT_EQ(client.at("p")->definition(), " (int) AS SELECT $1 -- one");
  EXPECT_TRUE(server.has(client.at("p")->id()));
  ASSERT_EQ(p->effects.size(), 1u);
  EXPECT_EQ(p->effects[0].kind, SqlEffect::Kind::prepare);
  // Its CommandComplete is the client's.
  EXPECT_FALSE(p->on_command_complete());
}

TEST(SqlPrepared, ExecuteOnAServerWithoutItInsertsThePrepare) {
  ClientSqlStatements client;
  ServerSqlStatements first;
  ASSERT_TRUE(plan("PREPARE p (int) AS SELECT $1 -- one", client, first));
  const std::string srv = server_name(client, "p");
  ServerSqlStatements second;
  auto p = plan("SELECT 0; EXECUTE p(1); EXECUTE P (2)", client, second);
  ASSERT_TRUE(p);
  // The PREPARE goes just before the first statement that needs it, once; the newline ends the
  // definition's comment.
  EXPECT_EQ(p->sent_sql, "SELECT 0; PREPARE " + srv + " (int) AS SELECT $1 -- one\n;EXECUTE " +
                             srv + "(1); EXECUTE " + srv + " (2)");
  EXPECT_TRUE(second.has(client.at("p")->id()));
  // SELECT 0's CommandComplete goes to the client, the PREPARE's not, the EXECUTEs' do.
  EXPECT_FALSE(p->on_command_complete());
  EXPECT_TRUE(p->on_command_complete());
  EXPECT_FALSE(p->on_command_complete());
  EXPECT_FALSE(p->on_command_complete());
  // On the first server nothing is inserted.
  auto again = plan("EXECUTE p(3)", client, first);
  ASSERT_TRUE(again);
  EXPECT_EQ(again->sent_sql, "EXECUTE " + srv + "(3)");
  EXPECT_TRUE(again->effects.empty());
}

TEST(SqlPrepared, TwoClientsWithTheSameNameNeverShareAServerName) {
  ClientSqlStatements a, b;
  ServerSqlStatements server;
  ASSERT_TRUE(plan("PREPARE p AS SELECT 1", a, server));
  ASSERT_TRUE(plan("PREPARE p AS SELECT 2", b, server));
  EXPECT_NE(server_name(a, "p"), server_name(b, "p"));
  EXPECT_EQ(server.size(), 2u);
}

TEST(SqlPrepared, UnknownNamesGoAsTheyAreForPostgreSQLsOwn26000) {
  ClientSqlStatements client;
  ServerSqlStatements server;
  auto p = plan("EXECUTE nope; DEALLOCATE nope", client, server);
  EXPECT_FALSE(p);  // nothing renamed: the Query goes unchanged
  // A name spelled like the pooler's never reaches another client's statement.
  p = plan("EXECUTE pgsluice_s1", client, server);
  ASSERT_TRUE(p);
  EXPECT_EQ(p->sent_sql, "EXECUTE pgsluice_none");
}

TEST(SqlPrepared, DuplicatePrepareIsSentUnderTheLiveName) {
  ClientSqlStatements client;
  ServerSqlStatements first;
  ASSERT_TRUE(plan("PREPARE p AS SELECT 1", client, first));
  const std::string srv = server_name(client, "p");
  ServerSqlStatements second;
  auto p = plan("PREPARE p AS SELECT 2", client, second);
  ASSERT_TRUE(p);
  // PostgreSQL refuses it (42P05) after the checks it makes first.
  EXPECT_EQ(p->sent_sql, "PREPARE " + srv + " AS SELECT 1\n;PREPARE " + srv + " AS SELECT 2");
  EXPECT_EQ(client.at("p")->definition(), " AS SELECT 1");
  // Its error names the client's statement.
  std::string error;
  pp::write_error_response(
      error, pp::ErrorNotice{.severity = "ERROR",
                             .code = "42P05",
                             .message = "prepared statement \"" + srv + "\" already exists",
                             .detail = {},
                             .hint = {}});
  auto body = p->client_error(std::string_view(error).substr(5), second);
  ASSERT_TRUE(body);
  EXPECT_NE(body->find("prepared statement \"p\" already exists"), std::string::npos);
  EXPECT_EQ(body->find(srv), std::string::npos);
}

TEST(SqlPrepared, AFailedPrepareDoesNotStick) {
  ClientSqlStatements client;
  ServerSqlStatements server;
  auto p = plan("SELECT 1; PREPARE p AS SELECT nosuchcolumn", client, server);
  ASSERT_TRUE(p);
  const uint64_t id = client.at("p")->id();
  EXPECT_FALSE(p->on_command_complete());  // SELECT 1
  p->on_error(&client, server);            // the PREPARE failed
  EXPECT_FALSE(client.contains("p"));
  EXPECT_FALSE(server.has(id));
}

TEST(SqlPrepared, DeallocateAndItsUndo) {
  ClientSqlStatements client;
  ServerSqlStatements server;
  ASSERT_TRUE(plan("PREPARE p AS SELECT 1", client, server));
  const SqlStatementRef stmt = client.at("p");
  ServerSqlStatements other;
  // On a server without it, it is prepared first (DEALLOCATE of a missing name would fail).
  auto p = plan("DEALLOCATE p", client, other);
  ASSERT_TRUE(p);
  EXPECT_EQ(p->sent_sql,
            "PREPARE " + stmt->server_name() + " AS SELECT 1\n;DEALLOCATE " + stmt->server_name());
  EXPECT_FALSE(client.contains("p"));
  EXPECT_FALSE(other.has(stmt->id()));
  // In a failed transaction the inserted PREPARE fails (25P02): nothing ran, nothing changed.
  p->on_error(&client, other);
  EXPECT_EQ(client.at("p"), stmt);
  EXPECT_FALSE(other.has(stmt->id()));
  // The DEALLOCATE itself failing leaves the inserted PREPARE's statement there.
  auto q = plan("DEALLOCATE p", client, other);
  ASSERT_TRUE(q);
  EXPECT_TRUE(q->on_command_complete());
  q->on_error(&client, other);
  EXPECT_EQ(client.at("p"), stmt);
  EXPECT_TRUE(other.has(stmt->id()));
}

TEST(SqlPrepared, DeallocateAllForgetsEverythingUnlessItFails) {
  ClientSqlStatements client, someone_else;
  ServerSqlStatements server;
  ASSERT_TRUE(plan("PREPARE a AS SELECT 1; PREPARE b AS SELECT 2", client, server));
  ASSERT_TRUE(plan("PREPARE c AS SELECT 3", someone_else, server));
  auto p = plan("DEALLOCATE ALL", client, server);
  ASSERT_TRUE(p);
  EXPECT_EQ(p->sent_sql, "DEALLOCATE ALL");
  EXPECT_TRUE(client.empty());
  EXPECT_EQ(server.size(), 0u);  // the other client's statement is gone from this server too
  p->on_error(&client, server);
  EXPECT_EQ(client.size(), 2u);
  EXPECT_EQ(server.size(), 3u);
}

TEST(SqlPrepared, DeadStatementsAreTakenOnce) {
  ServerSqlStatements server;
  std::string dead_name;
  {
    ClientSqlStatements client;
    ASSERT_TRUE(plan("PREPARE gone AS SELECT 1", client, server));
    dead_name = server_name(client, "gone");
    EXPECT_FALSE(server.may_have_dead() && !server.take_dead().empty());
  }
  ClientSqlStatements alive;
  ASSERT_TRUE(plan("PREPARE kept AS SELECT 1", alive, server));
  EXPECT_TRUE(server.may_have_dead());
  EXPECT_EQ(server.take_dead(), std::vector<std::string>{dead_name});
  EXPECT_FALSE(server.may_have_dead());
  EXPECT_EQ(server.size(), 1u);
}

TEST(SqlPrepared, ErrorPositionsPointIntoTheClientsText) {
  ClientSqlStatements client;
  ServerSqlStatements first;
  ASSERT_TRUE(plan("PREPARE é AS SELECT 1", client, first));
  const std::string srv = server_name(client, "é");
  ServerSqlStatements second;
  const std::string_view sql = "EXECUTE \"é\"; SELECT nosuch";
  auto p = plan(sql, client, second);
  ASSERT_TRUE(p);
  const size_t sent_position = p->sent_sql.find("nosuch") + 1;  // ASCII before it: bytes = chars
  const size_t client_position = 21;                            // "é" is one character
  EXPECT_EQ(map_error_position(sent_position, p->sent_sql, sql, p->edits), client_position);
  // Inside the inserted PREPARE: the start of the statement that needed it.
  EXPECT_EQ(map_error_position(3, p->sent_sql, sql, p->edits), 1u);
}

// An ErrorResponse body with a position.
std::string error_at(size_t position) {
  std::string body;
  for (const auto& [type, value] : {std::pair<char, std::string>{'S', "ERROR"},
                                    {'C', "42703"},
                                    {'M', "column \"nosuch\" does not exist"},
                                    {'P', std::to_string(position)}}) {
    body.push_back(type);
    body.append(value);
    body.push_back('\0');
  }
  body.push_back('\0');
  return body;
}

TEST(SqlPrepared, AnErrorInAnInsertedPrepareHasThePositionOfTheClientsPrepare) {
  // PostgreSQL analyses a changed statement again at EXECUTE and counts the error's position in
  // the text the PREPARE came in: so does the pooler for the PREPARE it inserts.
  ClientSqlStatements client;
  ServerSqlStatements first;
  const std::string_view prepare = "SELECT 'a first statement'; PREPARE p AS SELECT nosuch FROM t";
  ASSERT_TRUE(plan(prepare, client, first));
  const size_t direct = prepare.find("nosuch") + 1;
  EXPECT_EQ(client.at("p")->definition_position(), prepare.find(" AS"));
  ServerSqlStatements second;
  auto p = plan("EXECUTE p", client, second);
  ASSERT_TRUE(p);
  EXPECT_EQ(p->client_position(p->sent_sql.find("nosuch") + 1, second), direct);
  // In the pooler's own words ("PREPARE pgsluice_s<n>"): no position, as for the EXECUTE.
  EXPECT_EQ(p->client_position(3, second), std::nullopt);
  auto body = p->client_error(error_at(3), second);
  ASSERT_TRUE(body);
  EXPECT_EQ(pp::parse_error_fields(*body).value.field('P'), "");
  body = p->client_error(error_at(p->sent_sql.find("nosuch") + 1), second);
  ASSERT_TRUE(body);
  EXPECT_EQ(pp::parse_error_fields(*body).value.field('P'), std::to_string(direct));
}

TEST(SqlPrepared, AnErrorOfADefinitionAnalysedAgainAtExecute) {
  ClientSqlStatements client;
  ServerSqlStatements server;
  const std::string_view prepare = "PREPARE p (int) AS\n  SELECT nosuch + $1";
  ASSERT_TRUE(plan(prepare, client, server));
  const size_t direct = prepare.find("nosuch") + 1;
  // The server counts from the start of the PREPARE it got, with the pooler's longer name.
  const std::string sent = "PREPARE " + server_name(client, "p") + " (int) AS\n  SELECT nosuch";
  const size_t on_server = sent.find("nosuch") + 1;
  const std::string_view sql = "SELECT 0; EXECUTE p(1)";
  auto p = plan(sql, client, server);
  ASSERT_TRUE(p);
  EXPECT_FALSE(p->on_command_complete());  // SELECT 0: the EXECUTE failed
  EXPECT_EQ(p->client_position(on_server, server), direct);
  // A position in the EXECUTE's own text (its argument) is the client's.
  EXPECT_EQ(p->client_position(p->sent_sql.find("(1)") + 2, server), sql.find("(1)") + 2);
  // Neither in the EXECUTE nor in the server's definition: none.
  EXPECT_EQ(p->client_position(2, server), std::nullopt);
}

TEST(SqlPrepared, AnErrorOfThePoolersOwnPrepareBeforeAParse) {
  ClientSqlStatements client;
  ServerSqlStatements first;
  const std::string_view prepare = "PREPARE p AS SELECT nosuch";
  ASSERT_TRUE(plan(prepare, client, first));
  const SqlStatement& stmt = *client.at("p");
  EXPECT_EQ(stmt.prepare_text(), "PREPARE " + stmt.server_name() + " AS SELECT nosuch");
  auto body = hidden_prepare_error(error_at(stmt.prepare_text().find("nosuch") + 1), stmt);
  ASSERT_TRUE(body);
  EXPECT_EQ(pp::parse_error_fields(*body).value.field('P'),
            std::to_string(prepare.find("nosuch") + 1));
}

TEST(SqlPrepared, AParsesPreparesAreListedNotInserted) {
  ClientSqlStatements client;
  ServerSqlStatements first;
  ASSERT_TRUE(plan("PREPARE p AS SELECT $1::int", client, first));
  const SqlStatementRef stmt = client.at("p");
  ServerSqlStatements second;
  const std::string_view sql = "EXECUTE p($1)";
  const pp::Classification c = pp::classify_sql(sql);
  auto p = plan_sql_query(sql, c.prepared_names, client, second, SqlPlanMode::parse);
  ASSERT_TRUE(p);
  // One statement per Parse: the PREPARE goes in messages of its own before it.
  EXPECT_EQ(p->sent_sql, "EXECUTE " + stmt->server_name() + "($1)");
  ASSERT_EQ(p->prepares.size(), 1u);
  EXPECT_EQ(p->prepares[0], stmt);
  EXPECT_TRUE(second.has(stmt->id()));
  // Several statements in one Parse: PostgreSQL's error, nothing renamed.
  const std::string_view two = "EXECUTE p(1); EXECUTE p(2)";
  EXPECT_FALSE(plan_sql_query(two, pp::classify_sql(two).prepared_names, client, second,
                              SqlPlanMode::parse));
}

TEST(SqlPrepared, AParsesPrepareUndoneWhenNeverExecuted) {
  ClientSqlStatements client;
  ServerSqlStatements server;
  const std::string_view sql = "PREPARE p AS SELECT 1";
  const pp::Classification c = pp::classify_sql(sql);
  auto p = plan_sql_query(sql, c.prepared_names, client, server, SqlPlanMode::parse);
  ASSERT_TRUE(p);
  ASSERT_TRUE(client.contains("p"));
  p->undo(&client, server);
  EXPECT_FALSE(client.contains("p"));
  EXPECT_EQ(server.size(), 0u);
  p->on_error(&client, server);  // once only
  EXPECT_FALSE(client.contains("p"));
}

TEST(SqlPrepared, PoolerNames) {
  EXPECT_TRUE(is_pooler_sql_name("pgsluice_s12"));
  EXPECT_FALSE(is_pooler_sql_name("pgsluice_s"));
  EXPECT_FALSE(is_pooler_sql_name("pgsluice_s1x"));
  EXPECT_FALSE(is_pooler_sql_name("PGSLUICE_12"));
}

}  // namespace
}  // namespace pgsluice
