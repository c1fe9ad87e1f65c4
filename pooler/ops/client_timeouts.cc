// See client_timeouts.h.
#include "pooler/ops/client_timeouts.h"

#include <spdlog/spdlog.h>

#include <vector>

#include "pooler/base/sqlstate.h"
#include "pooler/core/client.h"
#include "pooler/core/pool.h"
#include "pooler/core/server.h"
#include "pooler/core/stats.h"
#include "pooler/core/worker.h"

namespace pgsluice {

namespace {
uint64_t ms(Duration d) {
  return static_cast<uint64_t>(d.count());
}
bool elapsed(uint64_t now, uint64_t since, uint64_t limit) {
  return limit > 0 && since != 0 && now >= since && now - since >= limit;
}
}  // namespace

TimeoutLimits timeout_limits(const Settings& s, const UserEntry* user) {
  TimeoutLimits l{.client_idle_ms = ms(s.client_idle_timeout),
                  .query_ms = ms(s.query_timeout),
                  .idle_transaction_ms = ms(s.idle_transaction_timeout),
                  .transaction_ms = ms(s.transaction_timeout)};
  if (user == nullptr) return l;
  auto over = [](uint64_t& field, const std::optional<Duration>& value) {
    if (value && value->count() > 0) field = ms(*value);
  };
  over(l.client_idle_ms, user->client_idle_timeout);
  over(l.query_ms, user->query_timeout);
  over(l.idle_transaction_ms, user->idle_transaction_timeout);
  over(l.transaction_ms, user->transaction_timeout);
  return l;
}

ClientTimeout due_timeout(const TimeoutLimits& l, const ClientTimeoutInput& in) {
  if (in.waiting) {
    return elapsed(in.now_ms, in.wait_started_ms, l.query_ms) ? ClientTimeout::query_waiting
                                                              : ClientTimeout::none;
  }
  if (!in.linked) {
    return in.idle && elapsed(in.now_ms, in.last_request_ms, l.client_idle_ms)
               ? ClientTimeout::client_idle
               : ClientTimeout::none;
  }
  const bool in_transaction = in.tx_status != 'I';
  if (in.awaiting_reply && elapsed(in.now_us, in.query_start_us, l.query_ms * 1000)) {
    return ClientTimeout::query;
  }
  if (!in.awaiting_reply && in_transaction &&
      elapsed(in.now_ms, in.ready_ms, l.idle_transaction_ms)) {
    return ClientTimeout::idle_transaction;
  }
  if ((in.awaiting_reply || in_transaction) &&
      elapsed(in.now_us, in.xact_start_us, l.transaction_ms * 1000)) {
    return ClientTimeout::transaction;
  }
  // A session-mode client keeps its server between transactions: idle there counts too
  // (PgBouncer skips linked clients, so its client_idle_timeout never fires in session mode).
  if (!in.awaiting_reply && !in_transaction &&
      elapsed(in.now_ms, in.last_request_ms, l.client_idle_ms)) {
    return ClientTimeout::client_idle;
  }
  return ClientTimeout::none;
}

ClientTimeoutError timeout_error(ClientTimeout timeout) {
  switch (timeout) {
    case ClientTimeout::client_idle:
      return {sqlstate::kIdleSessionTimeout, "client_idle_timeout"};
    case ClientTimeout::query_waiting:
      return {sqlstate::kQueryCanceled, "query_timeout"};
    case ClientTimeout::query:
      return {sqlstate::kQueryCanceled, "query timeout"};
    case ClientTimeout::idle_transaction:
      return {sqlstate::kIdleInTransactionSessionTimeout, "idle transaction timeout"};
    case ClientTimeout::transaction:
      return {sqlstate::kTransactionTimeout, "transaction timeout"};
    case ClientTimeout::none:
      break;
  }
  return {"", ""};
}

void enforce_client_timeouts(Worker& worker, uint64_t now_ms) {
  const Config& config = worker.config();
  const TimeoutLimits global = timeout_limits(config.settings, nullptr);
  bool user_level = false;
  for (const auto& [name, user] : config.users) {
    user_level = user_level || timeout_limits(config.settings, &user).any();
  }
  if (!global.any() && !user_level) return;
  const uint64_t now = now_us();
  // Failing a client changes the worker's list: collect first, act after.
  std::vector<std::pair<Client*, ClientTimeout>> due;
  worker.for_each_own_client([&](Client& c) {
    if (c.is_admin_console()) return;
    ClientTimeoutInput in;
    in.now_ms = now_ms;
    in.now_us = now;
    in.last_request_ms = c.last_request_ms();
    switch (c.state()) {
      case Client::State::idle:
        in.idle = true;
        break;
      case Client::State::welcome_wait:
        // A replication client's wait is its own (Pool::check_timeouts).
        if (c.replication() != protocol::ReplicationMode::none) return;
        [[fallthrough]];
      case Client::State::waiting:
        in.waiting = true;
        in.wait_started_ms = c.wait_started_ms();
        break;
      case Client::State::active:
        if (c.server() == nullptr) return;
        // A replication stream is one command that lasts as long as the client wants, and its
        // bytes are relayed unparsed (no query or transaction clock): no client timeout
        // applies to it once its walsender is linked.
        if (c.replication() != protocol::ReplicationMode::none) return;
        in.linked = true;
        in.awaiting_reply = c.server()->awaiting_reply();
        in.tx_status = static_cast<char>(c.server()->transaction_status());
        in.ready_ms = c.server()->ready_ms();
        in.query_start_us = c.server()->timing.query_start_us;
        in.xact_start_us = c.server()->timing.xact_start_us;
        break;
      default:
        return;
    }
    auto user = config.users.find(c.user());
    ClientTimeout t = due_timeout(
        user == config.users.end() ? global : timeout_limits(config.settings, &user->second), in);
    if (t != ClientTimeout::none) due.emplace_back(&c, t);
  });
  for (auto& [client, timeout] : due) {
    if (client->state() == Client::State::closing) continue;
    ClientTimeoutError e = timeout_error(timeout);
    // A query still running is cancelled before the server connection is dropped: closing
    // alone would leave the backend running it until it next writes to the socket.
    if (Server* server = client->server(); server != nullptr && server->awaiting_reply()) {
      server->cancel_running_query();
    }
    // The client's close hands the server back: rolled back and reused when it was idle in
    // its transaction, closed when a reply was still on its way. Never returned mid-query.
    std::string message(e.message);
    if (timeout == ClientTimeout::query_waiting && client->pool() != nullptr) {
      message += client->pool()->login_failure_note();
    }
    client->fail(e.sqlstate, message);
  }
}

}  // namespace pgsluice
