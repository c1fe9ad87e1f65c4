// What pgsluice refused from hostile or broken peers, counted for the whole process (every
// worker adds, /metrics reads): an operator sees an attack or a misbehaving server without
// reading the log.
#pragma once

#include <atomic>
#include <cstdint>

namespace pgsluice {

struct Refusals {
  // A client message above PostgreSQL's authentication cap (65535 bytes) before login.
  std::atomic<uint64_t> oversized_login_messages{0};
  // A client message above max_packet_size after login.
  std::atomic<uint64_t> oversized_messages{0};
  // A malformed authentication message from a client (08P01): SCRAM's, a password's.
  std::atomic<uint64_t> malformed_client_auth{0};
  // A server login refused: more than pgsluice takes before ReadyForQuery, or SCRAM that the
  // server did not finish or sign rightly.
  std::atomic<uint64_t> server_logins{0};
};

}  // namespace pgsluice
