// PgBouncer's client-side timeouts, checked by the worker's janitor (every 200 ms):
//   client_idle_timeout       a logged-in client that sent nothing for this long, with no query
//                             running and no transaction open, is closed;
//   query_timeout             a query running (a reply owed) this long is cancelled on the server
//                             and the client closed; a client queued for a server this long is
//                             closed as well (PgBouncer's "query_timeout" on waiting clients);
//   idle_transaction_timeout  a client idle inside a transaction this long is closed and its
//                             transaction rolled back;
//   transaction_timeout       a transaction open this long is ended the same way (a running
//                             query is cancelled first).
// The messages are PgBouncer's; the SQLSTATEs are PostgreSQL's for the same events (PgBouncer
// sends 08P01 for all of them, which drivers read as a protocol violation).
// client_login_timeout stays in the janitor (worker.cc); cancel_wait_timeout in cancel_sender.h.
#pragma once

#include <cstdint>
#include <string_view>

#include "pooler/config/config.h"

namespace pgsluice {

class Worker;

enum class ClientTimeout { none, client_idle, query_waiting, query, idle_transaction, transaction };

// What the janitor knows about one client at one instant. Times in ms are the loop clock
// (uv_now); the query and transaction starts are ServerTiming's microsecond clock (now_us).
struct ClientTimeoutInput {
  bool idle = false;     // logged in, no server, nothing queued
  bool waiting = false;  // queued for a server
  bool linked = false;   // has a server
  bool awaiting_reply = false;
  char tx_status = 'I';
  uint64_t now_ms = 0;
  uint64_t last_request_ms = 0;
  uint64_t wait_started_ms = 0;
  uint64_t ready_ms = 0;  // the server's last ReadyForQuery
  uint64_t now_us = 0;
  uint64_t query_start_us = 0;  // 0: none
  uint64_t xact_start_us = 0;   // 0: none
};

// The timeouts of one client, in ms (0: off): the main section's, each replaced by its user's
// ([users] line) when that is above 0, as PgBouncer does.
struct TimeoutLimits {
  uint64_t client_idle_ms = 0;
  uint64_t query_ms = 0;
  uint64_t idle_transaction_ms = 0;
  uint64_t transaction_ms = 0;
  [[nodiscard]] bool any() const {
    return client_idle_ms + query_ms + idle_transaction_ms + transaction_ms > 0;
  }
};
TimeoutLimits timeout_limits(const Settings& settings, const UserEntry* user);

// The timeout that fires for this client now, if any (pure: unit-tested).
ClientTimeout due_timeout(const TimeoutLimits& limits, const ClientTimeoutInput& in);

struct ClientTimeoutError {
  std::string_view sqlstate;
  std::string_view message;
};
ClientTimeoutError timeout_error(ClientTimeout timeout);

// Walks the worker's clients and enforces the timeouts that are due.
void enforce_client_timeouts(Worker& worker, uint64_t now_ms);

}  // namespace pgsluice
