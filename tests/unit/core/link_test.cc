// The link between a client and a server, driven byte by byte in-process (link_harness.h): the
// tests a reviewer reads to learn what the pooler sends where. Each one plays a client and
// PostgreSQL, asserts the exact bytes each of them receives, and the pool's state at the
// transaction boundary.
#include <gtest/gtest.h>

#include <string>

#include "tests/unit/core/link_harness.h"
#include "tests/unit/core/link_wire.h"

namespace pgsluice::test_support {
namespace {

using wire::show_wire;

constexpr uint32_t kOidInt4 = 23;

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
  return wire::row_description("?column?", kOidInt4) + wire::data_row("1") +
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

}  // namespace
}  // namespace pgsluice::test_support
