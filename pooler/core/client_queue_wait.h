// The pool's bookkeeping on a client while it waits (pool.cc, session_checks.cc: the pin wait).
#pragma once

#include <cstdint>

namespace pgsluice {

// What the pool keeps on a client that waits: for a server (wait-time stats, the queued
// notice) or for a pin (session_state_pin_reserve: on the pool's list of pin waiters, since
// when, up to query_wait_timeout).
struct ClientQueueWait {
  uint64_t started_us = 0;    // set when the client queues
  uint64_t pin_since_ms = 0;  // 0: it does not wait for a pin
  bool notice_sent = false;   // Client::notify_queued() went in this wait (reset when it queues)
  bool on_pin_list = false;
};

}  // namespace pgsluice
