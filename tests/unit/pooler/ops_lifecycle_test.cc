// Client timeouts, client connection limits, shutdown signal modes and the pidfile: the pure
// decisions behind them (the integration tests in integration/test_ops_lifecycle.py run them
// against PostgreSQL).
#include <gtest/gtest.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <fstream>
#include <string>

#include "pooler/config/config.h"
#include "pooler/ops/client_limits.h"
#include "pooler/ops/client_timeouts.h"
#include "pooler/ops/pidfile.h"
#include "pooler/ops/shutdown.h"

namespace pgsluice {
namespace {

using std::chrono::milliseconds;

TEST(OpsConfig, KeysAreSettingsNotWarnings) {
  ConfigLoadResult r = load_config_string(
      "[pgbouncer]\nclient_idle_timeout = 5\nquery_timeout = 1.5\nidle_transaction_timeout = 2\n"
      "transaction_timeout = 3\ncancel_wait_timeout = 4\nshutdown_timeout = 0\n"
      "max_db_client_connections = 7\nmax_user_client_connections = 8\nso_reuseport = 1\n",
      "t.ini");
  for (const auto& e : r.errors) ADD_FAILURE() << e.to_string();
  ASSERT_NE(r.config, nullptr);
  EXPECT_TRUE(r.config->warnings.empty()) << r.config->warnings.front();
  const Settings& s = r.config->settings;
  EXPECT_EQ(s.client_idle_timeout, milliseconds(5000));
  EXPECT_EQ(s.query_timeout, milliseconds(1500));
  EXPECT_EQ(s.idle_transaction_timeout, milliseconds(2000));
  EXPECT_EQ(s.transaction_timeout, milliseconds(3000));
  EXPECT_EQ(s.cancel_wait_timeout, milliseconds(4000));
  EXPECT_EQ(s.shutdown_timeout, milliseconds(0));
  EXPECT_EQ(s.max_db_client_connections, 7);
  EXPECT_EQ(s.max_user_client_connections, 8);
  EXPECT_TRUE(s.so_reuseport);
  // PgBouncer's defaults: all off, cancel_wait_timeout 10 s.
  Settings d;
  EXPECT_EQ(d.client_idle_timeout.count(), 0);
  EXPECT_EQ(d.query_timeout.count(), 0);
  EXPECT_EQ(d.cancel_wait_timeout, milliseconds(10000));
  EXPECT_FALSE(d.so_reuseport);
  EXPECT_FALSE(load_config_string("[pgsluice]\nquery_timeout = -1\n", "t.ini").errors.empty());
  EXPECT_FALSE(
      load_config_string("[pgsluice]\nmax_db_client_connections = x\n", "t.ini").errors.empty());
}

TimeoutLimits L(const Settings& s) {
  return timeout_limits(s, nullptr);
}

ClientTimeoutInput linked(char tx, bool awaiting) {
  ClientTimeoutInput in;
  in.linked = true;
  in.tx_status = tx;
  in.awaiting_reply = awaiting;
  in.now_ms = 100'000;
  in.now_us = 100'000'000;
  return in;
}

TEST(ClientTimeouts, OffByDefault) {
  Settings s;
  ClientTimeoutInput in = linked('T', true);
  in.query_start_us = 1;
  in.xact_start_us = 1;
  in.ready_ms = 1;
  in.last_request_ms = 1;
  EXPECT_EQ(due_timeout(L(s), in), ClientTimeout::none);
  in = ClientTimeoutInput{.idle = true, .now_ms = 100'000, .last_request_ms = 1};
  EXPECT_EQ(due_timeout(L(s), in), ClientTimeout::none);
}

TEST(ClientTimeouts, QueryTimeoutCountsFromTheQueryStart) {
  Settings s;
  s.query_timeout = milliseconds(1000);
  ClientTimeoutInput in = linked('I', true);
  in.query_start_us = in.now_us - 999'000;
  EXPECT_EQ(due_timeout(L(s), in), ClientTimeout::none);
  in.query_start_us = in.now_us - 1'000'000;
  EXPECT_EQ(due_timeout(L(s), in), ClientTimeout::query);
  // Nothing running (the reply came): not a query timeout.
  in.awaiting_reply = false;
  EXPECT_EQ(due_timeout(L(s), in), ClientTimeout::none);
  // A client queued for a server that long: PgBouncer's "query_timeout".
  ClientTimeoutInput waiting{.waiting = true, .now_ms = 10'000, .wait_started_ms = 8'000};
  EXPECT_EQ(due_timeout(L(s), waiting), ClientTimeout::query_waiting);
  EXPECT_EQ(timeout_error(ClientTimeout::query).message, "query timeout");
  EXPECT_EQ(timeout_error(ClientTimeout::query).sqlstate, "57014");
}

TEST(ClientTimeouts, IdleTransactionCountsFromTheLastReadyForQuery) {
  Settings s;
  s.idle_transaction_timeout = milliseconds(2000);
  ClientTimeoutInput in = linked('T', false);
  in.ready_ms = in.now_ms - 1999;
  EXPECT_EQ(due_timeout(L(s), in), ClientTimeout::none);
  in.ready_ms = in.now_ms - 2000;
  EXPECT_EQ(due_timeout(L(s), in), ClientTimeout::idle_transaction);
  in.tx_status = 'E';  // a failed transaction holds its server just the same
  EXPECT_EQ(due_timeout(L(s), in), ClientTimeout::idle_transaction);
  in.tx_status = 'I';
  EXPECT_EQ(due_timeout(L(s), in), ClientTimeout::none);
  in.tx_status = 'T';
  in.awaiting_reply = true;  // a query runs: not idle
  EXPECT_EQ(due_timeout(L(s), in), ClientTimeout::none);
  EXPECT_EQ(timeout_error(ClientTimeout::idle_transaction).message, "idle transaction timeout");
}

TEST(ClientTimeouts, TransactionTimeoutCountsFromTheTransactionStart) {
  Settings s;
  s.transaction_timeout = milliseconds(3000);
  ClientTimeoutInput in = linked('T', false);
  in.xact_start_us = in.now_us - 2'999'000;
  EXPECT_EQ(due_timeout(L(s), in), ClientTimeout::none);
  in.xact_start_us = in.now_us - 3'000'000;
  EXPECT_EQ(due_timeout(L(s), in), ClientTimeout::transaction);
  in.awaiting_reply = true;
  EXPECT_EQ(due_timeout(L(s), in), ClientTimeout::transaction);
  in.tx_status = 'I';
  in.awaiting_reply = false;  // it ended
  EXPECT_EQ(due_timeout(L(s), in), ClientTimeout::none);
}

TEST(ClientTimeouts, ClientIdle) {
  Settings s;
  s.client_idle_timeout = milliseconds(5000);
  ClientTimeoutInput in{.idle = true, .now_ms = 10'000, .last_request_ms = 5'001};
  EXPECT_EQ(due_timeout(L(s), in), ClientTimeout::none);
  in.last_request_ms = 5'000;
  EXPECT_EQ(due_timeout(L(s), in), ClientTimeout::client_idle);
  // Session mode: linked, between transactions, silent that long.
  ClientTimeoutInput session = linked('I', false);
  session.last_request_ms = session.now_ms - 5000;
  EXPECT_EQ(due_timeout(L(s), session), ClientTimeout::client_idle);
  session.tx_status = 'T';  // inside a transaction it is idle_transaction_timeout's business
  EXPECT_EQ(due_timeout(L(s), session), ClientTimeout::none);
  EXPECT_EQ(timeout_error(ClientTimeout::client_idle).message, "client_idle_timeout");
}

TEST(ClientTimeouts, UserValuesAboveZeroReplaceTheMainSections) {
  ConfigLoadResult r = load_config_string(
      "[pgsluice]\nquery_timeout = 10\nclient_idle_timeout = 20\n[users]\n"
      "u = query_timeout=2 client_idle_timeout=0 idle_transaction_timeout=3 "
      "transaction_timeout=4 max_user_client_connections=5\n"
      "[databases]\nd = host=127.0.0.1 max_db_client_connections=6\n",
      "t.ini");
  for (const auto& e : r.errors) ADD_FAILURE() << e.to_string();
  ASSERT_NE(r.config, nullptr);
  EXPECT_TRUE(r.config->warnings.empty()) << r.config->warnings.front();
  const UserEntry& u = r.config->users.at("u");
  TimeoutLimits l = timeout_limits(r.config->settings, &u);
  EXPECT_EQ(l.query_ms, 2000u);
  EXPECT_EQ(l.client_idle_ms, 20000u);  // 0 on the user line: the main section's (PgBouncer)
  EXPECT_EQ(l.idle_transaction_ms, 3000u);
  EXPECT_EQ(l.transaction_ms, 4000u);
  EXPECT_EQ(u.max_user_client_connections, 5);
  EXPECT_EQ(r.config->databases.at("d").max_db_client_connections, 6);
  EXPECT_FALSE(load_config_string("[users]\nu = query_timeout=soon\n", "t.ini").errors.empty());
}

TEST(ClientLimits, PgBouncersMessages) {
  EXPECT_EQ(exceeded_client_limit(100, 100, 0, 0), nullptr);
  EXPECT_EQ(exceeded_client_limit(1, 0, 2, 0), nullptr);
  EXPECT_STREQ(exceeded_client_limit(2, 0, 2, 0),
               "client connections exceeded (max_db_client_connections)");
  EXPECT_STREQ(exceeded_client_limit(0, 3, 2, 3),
               "client connections exceeded (max_user_client_connections)");
}

TEST(ShutdownSignals, PgBouncer123Semantics) {
  using M = Shutdown::Mode;
  EXPECT_EQ(Shutdown::mode_for_signal(SIGINT, M::none), M::wait_for_servers);
  EXPECT_EQ(Shutdown::mode_for_signal(SIGTERM, M::none), M::wait_for_clients);
  EXPECT_EQ(Shutdown::mode_for_signal(SIGQUIT, M::none), M::immediate);
  EXPECT_EQ(Shutdown::mode_for_signal(SIGTERM, M::wait_for_clients), M::immediate);
  EXPECT_EQ(Shutdown::mode_for_signal(SIGINT, M::wait_for_servers), M::immediate);
  EXPECT_EQ(Shutdown::mode_for_signal(SIGINT, M::wait_for_clients), M::immediate);
}

TEST(PidFile, Parse) {
  EXPECT_EQ(parse_pid("1234\n"), 1234);
  EXPECT_EQ(parse_pid("1234"), 1234);
  EXPECT_EQ(parse_pid(""), std::nullopt);
  EXPECT_EQ(parse_pid("12x\n"), std::nullopt);
  EXPECT_EQ(parse_pid("-5\n"), std::nullopt);
  EXPECT_EQ(parse_pid("0\n"), std::nullopt);
}

TEST(PidFile, WriteCheckRemove) {
  std::string path = testing::TempDir() + "pgsluice-pidfile-test-" + std::to_string(getpid());
  std::remove(path.c_str());
  std::string error;
  {
    PidFile pf;
    ASSERT_TRUE(pf.write(path, error)) << error;
    std::ifstream in(path);
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    EXPECT_EQ(parse_pid(text), getpid());
    // Held by a live process (the parent of this test stands in for another pgsluice).
    std::ofstream(path) << getppid() << "\n";
    EXPECT_FALSE(PidFile::check(path, error));
    EXPECT_NE(error.find("running"), std::string::npos) << error;
    // Not ours any more: the destructor leaves it alone.
  }
  EXPECT_EQ(access(path.c_str(), F_OK), 0);
  // A stale file (no such process) is replaced.
  std::ofstream(path) << 2147483646 << "\n";
  error.clear();
  EXPECT_TRUE(PidFile::check(path, error)) << error;
  EXPECT_NE(access(path.c_str(), F_OK), 0);
  {
    PidFile pf;
    ASSERT_TRUE(pf.write(path, error)) << error;
    EXPECT_FALSE(PidFile().write(path, error));  // exclusive
  }
  EXPECT_NE(access(path.c_str(), F_OK), 0);  // removed at exit
}

}  // namespace
}  // namespace pgsluice
