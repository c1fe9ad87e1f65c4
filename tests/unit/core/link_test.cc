// The link between a client and a server, driven byte by byte in-process (link_harness.h): the
// tests a reviewer reads to learn what the pooler sends where. Each one plays a client and
// PostgreSQL, asserts the exact bytes each of them receives, and the pool's state at the
// transaction boundary.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tests/unit/core/link_harness.h"
#include "tests/unit/core/link_wire.h"

namespace pgsluice::test_support {
namespace {

using wire::show_wire;

// What a client is greeted with: AuthenticationOk, the pool's parameters (those the first
// server reported), BackendKeyData with the pooler's own cancel key, ReadyForQuery 'I'. The key
// is random (Worker::register_cancel_key): its body is checked for size and then blanked.
std::string blank_cancel_key(std::string_view greeting) {
  std::string out;
  for (const wire::Message& m : wire::split(greeting)) {
    if (m.type == 'K') {
      EXPECT_EQ(m.body.size(), 8u) << "a protocol 3.0 client's BackendKeyData: pid and 4 bytes";
      protocol::write_backend_key_data(out, 0, std::string(4, '\0'));
      continue;
    }
    protocol::MessageWriter(out, m.type).bytes(m.body);
  }
  return out;
}

std::string expected_greeting() {
  std::string out = wire::authentication_ok();
  for (const auto& [name, value] : LinkHarness::kServerParameters) {
    out += wire::parameter_status(name, value);
  }
  protocol::write_backend_key_data(out, 0, std::string(4, '\0'));
  return out + wire::ready('I');
}

// SELECT 1's answer, as PostgreSQL sends it.
std::string select_one_result() {
  return wire::row_description("?column?", protocol::kOidInt4) + wire::data_row("1") +
         wire::command_complete("SELECT 1") + wire::ready('I');
}

TEST(LinkTransaction, SimpleQueryGoesThroughAndTheServerReturnsToThePool) {
  LinkHarness h;
  TestEnd* client = h.log_in_client(/*answer_server_login=*/true);
  ASSERT_NE(client, nullptr);
  EXPECT_EQ(show_wire(blank_cancel_key(client->take())), show_wire(expected_greeting()));
  Server* server = h.only_server();
  ASSERT_NE(server, nullptr);
  EXPECT_EQ(server->state(), Server::State::idle);  // logged in for the greeting, unlinked

  // One byte per loop turn: the pooler forwards the Query only once it is whole.
  const std::string select_one = wire::query("SELECT 1");
  h.send_byte_by_byte(*client, select_one);
  TestEnd& pg = h.pg();
  ASSERT_TRUE(h.pump_until_received(pg, select_one.size(), "the Query at PostgreSQL"));
  EXPECT_EQ(show_wire(pg.take()), show_wire(select_one));
  EXPECT_EQ(server->state(), Server::State::active);
  EXPECT_NE(server->client(), nullptr);

  const std::string result = select_one_result();
  pg.send(result);
  ASSERT_TRUE(h.pump_until_received(*client, result.size(), "SELECT 1's result at the client"));
  EXPECT_EQ(show_wire(client->take()), show_wire(result));
  // ReadyForQuery 'I' with nothing else owed: back to the pool, idle (transaction mode).
  EXPECT_EQ(server->state(), Server::State::idle);
  EXPECT_EQ(server->client(), nullptr);
  EXPECT_EQ(h.pool().busy_count(), 0u);

  // A second client is greeted from the pool's parameters and served by the same server: no
  // second connection reaches PostgreSQL.
  TestEnd* second = h.log_in_client(/*answer_server_login=*/false);
  ASSERT_NE(second, nullptr);
  EXPECT_EQ(show_wire(blank_cancel_key(second->take())), show_wire(expected_greeting()));
  const std::string select_two = wire::query("SELECT 2");
  second->send(select_two);
  ASSERT_TRUE(h.pump_until_received(pg, select_two.size(), "the second client's Query"));
  EXPECT_EQ(show_wire(pg.take()), show_wire(select_two));
  EXPECT_EQ(h.only_server(), server);
  EXPECT_EQ(server->state(), Server::State::active);
  EXPECT_EQ(h.connections_waiting(), 0u);
}

// A logged-in client of a fresh harness, its greeting taken, and PostgreSQL's end of the
// pool's one server (idle).
struct ClientAndServer {
  TestEnd* client = nullptr;
  TestEnd* pg = nullptr;
  Server* server = nullptr;
};
ClientAndServer log_in(LinkHarness& h) {
  ClientAndServer l;
  l.client = h.log_in_client(/*answer_server_login=*/true);
  if (l.client == nullptr) return ClientAndServer{};
  l.client->take();
  l.pg = &h.pg();
  l.server = h.only_server();
  return l;
}

// The client sends `request`; PostgreSQL must receive exactly `forwarded`.
void expect_forwarded(LinkHarness& h, ClientAndServer& l, const std::string& request,
                      const std::string& forwarded) {
  l.client->send(request);
  ASSERT_TRUE(h.pump_until_received(*l.pg, forwarded.size(), "the request at PostgreSQL"));
  EXPECT_EQ(show_wire(l.pg->take()), show_wire(forwarded));
}

// PostgreSQL sends `reply`; the client must receive exactly `delivered`.
void expect_delivered(LinkHarness& h, ClientAndServer& l, const std::string& reply,
                      const std::string& delivered) {
  l.pg->send(reply);
  ASSERT_TRUE(h.pump_until_received(*l.client, delivered.size(), "the reply at the client"));
  EXPECT_EQ(show_wire(l.client->take()), show_wire(delivered));
}

// The first client prepares `SELECT 1` as s1: the process's first statement, PGSLUICE_1 on
// the server whatever the client called it.
void prepare_s1(LinkHarness& h, ClientAndServer& l) {
  expect_forwarded(h, l, wire::parse("s1", "SELECT 1") + wire::sync(),
                   wire::parse("PGSLUICE_1", "SELECT 1") + wire::sync());
  const std::string parsed = wire::parse_complete() + wire::ready('I');
  expect_delivered(h, l, parsed, parsed);
}

TEST(LinkPipeline, TwoSyncsKeepTheServerUntilTheSecondReadyForQuery) {
  LinkHarness h;
  ClientAndServer l = log_in(h);
  ASSERT_NE(l.server, nullptr);
  // Two extended-protocol batches in one write, unnamed statements (nothing to rename).
  const std::string first =
      wire::parse("", "SELECT 1") + wire::bind("") + wire::execute() + wire::sync();
  const std::string second =
      wire::parse("", "SELECT 2") + wire::bind("") + wire::execute() + wire::sync();
  expect_forwarded(h, l, first + second, first + second);

  const std::string first_result = wire::parse_complete() + wire::bind_complete() +
                                   wire::data_row("1") + wire::command_complete("SELECT 1") +
                                   wire::ready('I');
  expect_delivered(h, l, first_result, first_result);
  // ReadyForQuery 'I', but the second Sync is still owed: the server stays with its client.
  EXPECT_EQ(l.server->state(), Server::State::active);
  EXPECT_NE(l.server->client(), nullptr);

  const std::string second_result = wire::parse_complete() + wire::bind_complete() +
                                    wire::data_row("2") + wire::command_complete("SELECT 1") +
                                    wire::ready('I');
  expect_delivered(h, l, second_result, second_result);
  EXPECT_EQ(l.server->state(), Server::State::idle);
  EXPECT_EQ(l.server->client(), nullptr);
}

TEST(LinkCopy, CopyFromStdinKeepsTheServerUntilTheCopyEnds) {
  LinkHarness h;
  ClientAndServer l = log_in(h);
  ASSERT_NE(l.server, nullptr);
  const std::string copy = wire::query("COPY items FROM STDIN");
  expect_forwarded(h, l, copy, copy);
  expect_delivered(h, l, wire::copy_in_response(1), wire::copy_in_response(1));
  EXPECT_EQ(l.server->state(), Server::State::active);

  // The rows, one byte per loop turn: CopyData is forwarded whole, whatever the splits.
  const std::string rows = wire::copy_data("1\n") + wire::copy_data("2\n") + wire::copy_done();
  h.send_byte_by_byte(*l.client, rows);
  ASSERT_TRUE(h.pump_until_received(*l.pg, rows.size(), "the rows at PostgreSQL"));
  EXPECT_EQ(show_wire(l.pg->take()), show_wire(rows));
  EXPECT_EQ(l.server->state(), Server::State::active);

  const std::string done = wire::command_complete("COPY 2") + wire::ready('I');
  expect_delivered(h, l, done, done);
  EXPECT_EQ(l.server->state(), Server::State::idle);
}

TEST(LinkError, AFailedTransactionKeepsItsServerUntilRollback) {
  LinkHarness h;
  ClientAndServer l = log_in(h);
  ASSERT_NE(l.server, nullptr);
  const std::string begin = wire::query("BEGIN");
  expect_forwarded(h, l, begin, begin);
  const std::string begun = wire::command_complete("BEGIN") + wire::ready('T');
  expect_delivered(h, l, begun, begun);
  EXPECT_EQ(l.server->state(), Server::State::active);

  const std::string divide = wire::query("SELECT 1/0");
  expect_forwarded(h, l, divide, divide);
  const std::string failed = wire::error("22012", "division by zero") + wire::ready('E');
  expect_delivered(h, l, failed, failed);
  // In a failed transaction: the server is this client's until the transaction ends.
  EXPECT_EQ(l.server->state(), Server::State::active);
  EXPECT_NE(l.server->client(), nullptr);
  EXPECT_EQ(l.server->transaction_status(), protocol::TransactionStatus::failed);

  const std::string rollback = wire::query("ROLLBACK");
  expect_forwarded(h, l, rollback, rollback);
  const std::string rolled_back = wire::command_complete("ROLLBACK") + wire::ready('I');
  expect_delivered(h, l, rolled_back, rolled_back);
  EXPECT_EQ(l.server->state(), Server::State::idle);
  EXPECT_EQ(l.server->client(), nullptr);
}

TEST(LinkKeptSetting, ASetIsReadBackAndTheNextClientsServerIsResetFirst) {
  LinkHarness h;
  ClientAndServer l = log_in(h);
  ASSERT_NE(l.server, nullptr);
  // A plain SET outside a transaction: transaction mode's default action for settings is
  // `keep` (kept_settings.h). It runs as sent.
  const std::string set = wire::query("SET search_path = a");
  expect_forwarded(h, l, set, set);
  const std::string set_done = wire::command_complete("SET") + wire::ready('I');
  l.pg->send(set_done);
  // The client has its answer at once; the server stays linked while the pooler reads back
  // what PostgreSQL now has (server_session_state.cc): search_path is not reported by
  // ParameterStatus.
  const std::string read_back =
      wire::query("SELECT pg_catalog.current_setting('search_path', true)");
  ASSERT_TRUE(h.pump_until_received(*l.pg, read_back.size(), "the read-back at PostgreSQL"));
  EXPECT_EQ(show_wire(l.pg->take()), show_wire(read_back));
  EXPECT_EQ(show_wire(l.client->take()), show_wire(set_done));
  EXPECT_EQ(l.server->state(), Server::State::active);

  // The read-back's answer is the pooler's own: the client sees none of it, and the server
  // goes back to the pool holding search_path = a.
  l.pg->send(wire::row_description("current_setting", protocol::kOidText) + wire::data_row("a") +
             wire::command_complete("SELECT 1") + wire::ready('I'));
  ASSERT_TRUE(h.pump_until([&] { return l.server->state() == Server::State::idle; },
                           "the server back in the pool"));
  EXPECT_EQ(l.client->received(), "");

  // Another client, which never set search_path, on the same server: the server is brought to
  // its settings first (params.cc's sync query), and its statement waits for that answer.
  TestEnd* second = h.log_in_client(/*answer_server_login=*/false);
  ASSERT_NE(second, nullptr);
  second->take();
  second->send(wire::query("SELECT 1"));
  const std::string reset = wire::query("RESET search_path;");
  ASSERT_TRUE(h.pump_until_received(*l.pg, reset.size(), "the reset at PostgreSQL"));
  EXPECT_EQ(show_wire(l.pg->take()), show_wire(reset));
  EXPECT_EQ(h.only_server(), l.server);
  EXPECT_EQ(l.server->state(), Server::State::active);  // linked to the second client

  l.pg->send(wire::command_complete("RESET") + wire::ready('I'));
  const std::string select_one = wire::query("SELECT 1");
  ASSERT_TRUE(h.pump_until_received(*l.pg, select_one.size(), "the client's own statement"));
  EXPECT_EQ(show_wire(l.pg->take()), show_wire(select_one));
  // Only SELECT 1's result reaches the client: the reset's answer was the pooler's.
  const std::string result = select_one_result();
  l.pg->send(result);
  ASSERT_TRUE(h.pump_until_received(*second, result.size(), "SELECT 1's result"));
  EXPECT_EQ(show_wire(second->take()), show_wire(result));
  EXPECT_EQ(l.server->state(), Server::State::idle);
}

TEST(LinkPrepared, AStatementIsPreparedOncePerServerUnderThePoolersName) {
  // Transaction mode with statement rewriting on (max_prepared_statements > 0: the default,
  // set here to say so): a client's statement names map to the pooler's names per server
  // (core/prepared_statements.h, core/client_statements.cc).
  LinkHarness h("max_prepared_statements = 10\n");
  ClientAndServer l = log_in(h);
  ASSERT_NE(l.server, nullptr);
  prepare_s1(h, l);
  EXPECT_EQ(l.server->state(), Server::State::idle);
  EXPECT_EQ(l.server->prepared_statement_count(), 1u);

  // A second client prepares the same text under the same name, binds and runs it, one byte
  // per loop turn. The server has the statement: the Parse is answered by the pooler (a
  // made-up ParseComplete, at once), the Bind is renamed, and PostgreSQL parses nothing.
  TestEnd* second = h.log_in_client(/*answer_server_login=*/false);
  ASSERT_NE(second, nullptr);
  second->take();
  h.send_byte_by_byte(
      *second, wire::parse("s1", "SELECT 1") + wire::bind("s1") + wire::execute() + wire::sync());
  const std::string forwarded = wire::bind("PGSLUICE_1") + wire::execute() + wire::sync();
  ASSERT_TRUE(h.pump_until_received(*l.pg, forwarded.size(), "the renamed Bind"));
  EXPECT_EQ(show_wire(l.pg->take()), show_wire(forwarded));
  EXPECT_EQ(show_wire(second->take()), show_wire(wire::parse_complete()));

  const std::string ran = wire::bind_complete() + wire::data_row("1") +
                          wire::command_complete("SELECT 1") + wire::ready('I');
  l.pg->send(ran);
  ASSERT_TRUE(h.pump_until_received(*second, ran.size(), "the statement's result"));
  EXPECT_EQ(show_wire(second->take()), show_wire(ran));
  EXPECT_EQ(l.server->state(), Server::State::idle);
  EXPECT_EQ(l.server->prepared_statement_count(), 1u);
  EXPECT_EQ(h.connections_waiting(), 0u);
}

TEST(LinkPrepared, AMadeUpParseCompleteWaitsForTheQueryAheadOfIt) {
  // A plain Query sent while nothing is pending is counted, not queued (server_statements_
  // state.h, plain_queries_ahead): the ParseComplete the pooler makes up for a Parse behind it
  // must still reach the client after the Query's ReadyForQuery, never before its rows.
  LinkHarness h("max_prepared_statements = 10\n");
  ClientAndServer l = log_in(h);
  ASSERT_NE(l.server, nullptr);
  prepare_s1(h, l);

  TestEnd* second = h.log_in_client(/*answer_server_login=*/false);
  ASSERT_NE(second, nullptr);
  second->take();
  second->send(wire::query("SELECT 1") + wire::parse("s1", "SELECT 1") + wire::bind("s1") +
               wire::execute() + wire::sync());
  const std::string forwarded =
      wire::query("SELECT 1") + wire::bind("PGSLUICE_1") + wire::execute() + wire::sync();
  ASSERT_TRUE(h.pump_until_received(*l.pg, forwarded.size(), "the Query and the renamed Bind"));
  EXPECT_EQ(show_wire(l.pg->take()), show_wire(forwarded));
  h.turn();
  EXPECT_EQ(show_wire(second->take()), "") << "nothing before the Query's own replies";

  const std::string ran = wire::bind_complete() + wire::data_row("1") +
                          wire::command_complete("SELECT 1") + wire::ready('I');
  l.pg->send(select_one_result() + ran);
  const std::string expected = select_one_result() + wire::parse_complete() + ran;
  ASSERT_TRUE(h.pump_until_received(*second, expected.size(), "both results"));
  EXPECT_EQ(show_wire(second->take()), show_wire(expected));
  EXPECT_EQ(l.server->state(), Server::State::idle);
}

TEST(LinkUnnamed, TheUnnamedStatementIsTheClientsInItsNextTransaction) {
  // PostgreSQL keeps a session's unnamed statement until its next unnamed Parse, a Query or its
  // Close, across transactions. psql's \gdesc parses it and describes it in two exchanges,
  // between which another client may use the server (or the client get another).
  LinkHarness h("max_prepared_statements = 10\n");
  ClientAndServer l = log_in(h);
  ASSERT_NE(l.server, nullptr);
  // What most drivers send per query goes as it is, with nothing added.
  const std::string select_one =
      wire::parse("", "SELECT 1") + wire::bind("") + wire::execute() + wire::sync();
  expect_forwarded(h, l, select_one, select_one);
  const std::string one = wire::parse_complete() + wire::bind_complete() + wire::data_row("1") +
                          wire::command_complete("SELECT 1") + wire::ready('I');
  expect_delivered(h, l, one, one);
  // \gdesc's first exchange.
  const std::string gdesc = wire::parse("", "SELECT 2 AS a") + wire::sync();
  expect_forwarded(h, l, gdesc, gdesc);
  const std::string parsed = wire::parse_complete() + wire::ready('I');
  expect_delivered(h, l, parsed, parsed);
  EXPECT_EQ(l.server->state(), Server::State::idle);

  // Another client's unnamed statement takes the server's place of it.
  TestEnd* second = h.log_in_client(/*answer_server_login=*/false);
  ASSERT_NE(second, nullptr);
  second->take();
  second->send(select_one);
  ASSERT_TRUE(h.pump_until_received(*l.pg, select_one.size(), "the second client's query"));
  EXPECT_EQ(show_wire(l.pg->take()), show_wire(select_one));
  l.pg->send(one);
  ASSERT_TRUE(h.pump_until_received(*second, one.size(), "the second client's result"));
  second->take();

  // \gdesc's second exchange: the client's statement is parsed again first, hidden.
  const std::string describe = wire::describe_statement("") + wire::sync();
  expect_forwarded(h, l, describe, wire::parse("", "SELECT 2 AS a") + describe);
  const std::string description =
      wire::no_parameters() + wire::row_description("a", protocol::kOidInt4) + wire::ready('I');
  expect_delivered(h, l, wire::parse_complete() + description, description);
  // The server has it now: a Bind of it in the next transaction goes as it is.
  const std::string run = wire::bind("") + wire::execute() + wire::sync();
  expect_forwarded(h, l, run, run);
  const std::string two = wire::bind_complete() + wire::data_row("2") +
                          wire::command_complete("SELECT 1") + wire::ready('I');
  expect_delivered(h, l, two, two);

  // A Query ends the unnamed statement: the Describe gets PostgreSQL's own 26000, whatever the
  // server's unnamed statement is (the pooler's Close goes first).
  const std::string select_three = wire::query("SELECT 3");
  expect_forwarded(h, l, select_three, select_three);
  const std::string three = wire::row_description("?column?", protocol::kOidInt4) +
                            wire::data_row("3") + wire::command_complete("SELECT 1") +
                            wire::ready('I');
  expect_delivered(h, l, three, three);
  expect_forwarded(h, l, describe, wire::close_statement("") + describe);
  const std::string missing =
      wire::error("26000", "unnamed prepared statement does not exist") + wire::ready('I');
  expect_delivered(h, l, wire::close_complete() + missing, missing);
  EXPECT_EQ(l.server->state(), Server::State::idle);
  EXPECT_EQ(h.connections_waiting(), 0u);
}

TEST(LinkTerminate, AClientLeavingBetweenTransactionsLeavesItsServerInThePool) {
  LinkHarness h;
  ClientAndServer l = log_in(h);
  ASSERT_NE(l.server, nullptr);
  // Terminate is the pooler's to act on: PostgreSQL's connection serves the next client.
  l.client->send(wire::terminate());
  ASSERT_TRUE(h.pump_until([&] { return l.client->peer_closed(); }, "the client's close"));
  EXPECT_EQ(l.client->received(), "");
  EXPECT_EQ(l.pg->received(), "");
  EXPECT_EQ(h.only_server(), l.server);
  EXPECT_EQ(l.server->state(), Server::State::idle);
  EXPECT_EQ(h.worker().client_count(), 0u);
}

TEST(LinkDrain, AClientLeavingBeforeItsReplyLeavesTheServerDrainingThenInThePool) {
  LinkHarness h;
  ClientAndServer l = log_in(h);
  ASSERT_NE(l.server, nullptr);
  expect_forwarded(h, l, wire::query("SELECT 1"), wire::query("SELECT 1"));
  // The client goes with its reply under way: the server reads the reply for nobody (a state
  // of its own, still busy for the pool), then goes back without a new backend login.
  l.client->close();
  ASSERT_TRUE(h.pump_until([&] { return h.worker().client_count() == 0; }, "the client gone"));
  EXPECT_EQ(l.server->state(), Server::State::draining);
  EXPECT_EQ(l.server->client(), nullptr);
  EXPECT_EQ(h.pool().busy_count(), 1u);
  l.pg->send(select_one_result());
  ASSERT_TRUE(h.pump_until([&] { return l.server->state() == Server::State::idle; },
                           "the drained server idle"));
  EXPECT_EQ(h.only_server(), l.server);
  EXPECT_EQ(h.pool().busy_count(), 0u);
  EXPECT_EQ(l.pg->received(), "");  // nothing to clean in transaction mode after a SELECT
}

TEST(LinkFailClosed, AStartupSettingNoServerTakesEndsTheSessionWithPostgresqlsFatal) {
  // PostgreSQL refuses a login whose startup packet sets work_mem=abc with FATAL. The pooler
  // logs the client in without a server; at its first statement the sync (only the client's
  // own values to set) is refused: the client gets PostgreSQL's error as FATAL and is closed,
  // the server too (its state is unknown), and the statement runs nowhere.
  LinkHarness h;
  TestEnd* client = h.log_in_client(/*answer_server_login=*/true,
                                    wire::startup_with("alice", "app", "work_mem", "abc"));
  ASSERT_NE(client, nullptr);
  client->take();
  TestEnd& pg = h.pg();
  client->send(wire::query("SELECT 1"));
  const std::string sync = wire::query("SELECT pg_catalog.set_config('work_mem', 'abc', false);");
  ASSERT_TRUE(h.pump_until_received(pg, sync.size(), "the sync at PostgreSQL"));
  EXPECT_EQ(show_wire(pg.take()), show_wire(sync));
  pg.send(wire::error("22023", "invalid value for parameter \"work_mem\": \"abc\"") +
          wire::ready('I'));
  ASSERT_TRUE(h.pump_until([&] { return client->peer_closed(); }, "the client's close"));
  const std::vector<wire::Message> answer = wire::split(client->take());
  ASSERT_EQ(answer.size(), 1u);
  EXPECT_EQ(answer[0].type, 'E');
  EXPECT_NE(answer[0].body.find(std::string("SFATAL\0", 7)), std::string::npos);
  EXPECT_NE(answer[0].body.find("C22023"), std::string::npos);
  EXPECT_NE(answer[0].body.find("invalid value for parameter \"work_mem\""), std::string::npos);
  ASSERT_TRUE(h.pump_until([&] { return !pg.received().empty() || pg.peer_closed(); },
                           "the server's close"));
  EXPECT_EQ(show_wire(pg.take()), show_wire(wire::terminate()));
}

TEST(LinkFailClosed, AFailedSyncClosesTheServerAndTheStatementNeverRunsThere) {
  // Issue 42's first rule: a client's statement never runs on a server that is not in the
  // client's state. The first client leaves search_path = a on the pool's only server; the
  // second client's link must reset it first, and here PostgreSQL refuses the reset.
  LinkHarness h;
  ClientAndServer l = log_in(h);
  ASSERT_NE(l.server, nullptr);
  const std::string set = wire::query("SET search_path = a");
  expect_forwarded(h, l, set, set);
  l.pg->send(wire::command_complete("SET") + wire::ready('I'));
  const std::string read_back =
      wire::query("SELECT pg_catalog.current_setting('search_path', true)");
  ASSERT_TRUE(h.pump_until_received(*l.pg, read_back.size(), "the read-back at PostgreSQL"));
  l.pg->take();
  l.pg->send(wire::row_description("current_setting", protocol::kOidText) + wire::data_row("a") +
             wire::command_complete("SELECT 1") + wire::ready('I'));
  ASSERT_TRUE(h.pump_until([&] { return l.server->state() == Server::State::idle; },
                           "the server back in the pool"));

  TestEnd* second = h.log_in_client(/*answer_server_login=*/false);
  ASSERT_NE(second, nullptr);
  second->take();
  second->send(wire::query("SELECT 1"));
  const std::string reset = wire::query("RESET search_path;");
  ASSERT_TRUE(h.pump_until_received(*l.pg, reset.size(), "the reset at PostgreSQL"));
  EXPECT_EQ(show_wire(l.pg->take()), show_wire(reset));
  l.pg->send(wire::error("42501", "permission denied to reset search_path") + wire::ready('I'));

  // The client's statement is answered with the failure instead of running, and the client
  // stays connected; PostgreSQL gets a Terminate, never the SELECT.
  ASSERT_TRUE(h.pump_until([&] { return second->received().ends_with(wire::ready('I')); },
                           "the refusal's end"));
  const std::vector<wire::Message> answer = wire::split(second->take());
  ASSERT_EQ(answer.size(), 2u);
  EXPECT_EQ(answer[0].type, 'E');
  EXPECT_NE(answer[0].body.find("42501"), std::string::npos);
  EXPECT_NE(answer[0].body.find("pgsluice could not apply this session's settings"),
            std::string::npos);
  ASSERT_TRUE(h.pump_until([&] { return !l.pg->received().empty() || l.pg->peer_closed(); },
                           "the server's close"));
  EXPECT_EQ(show_wire(l.pg->take()), show_wire(wire::terminate()));
  EXPECT_FALSE(second->peer_closed());

  // Its next statement gets a server of its own state: a new connection, which has the
  // defaults the client expects, so nothing needs resetting and the statement runs there.
  l.pg->close();
  second->send(wire::query("SELECT 1"));
  TestEnd* fresh = h.accept_and_log_in_server();
  ASSERT_NE(fresh, nullptr);
  const std::string select_one = wire::query("SELECT 1");
  ASSERT_TRUE(h.pump_until_received(*fresh, select_one.size(), "the statement on a new server"));
  EXPECT_EQ(show_wire(fresh->take()), show_wire(select_one));
  const std::string result = select_one_result();
  fresh->send(result);
  ASSERT_TRUE(h.pump_until_received(*second, result.size(), "SELECT 1's result"));
  EXPECT_EQ(show_wire(second->take()), show_wire(result));
}

}  // namespace
}  // namespace pgsluice::test_support
