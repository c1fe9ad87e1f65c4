// Cancel requests for another process of the peer group (PgBouncer's peering: peer_id and
// [peers]), sent on to that peer on a connection of their own, with the key as it came (its TTL
// already lowered by the worker that took the request, see Worker::forward_to_peer). Per peer at
// most pool_size requests are in flight at once, as in PgBouncer's peer pools; the rest wait in
// order and are dropped past cancel_wait_timeout. A request is in flight from the start of its
// connection until the peer closes it (CancelSender's await_close).
//
// One forwarder per process, on the primary's loop (the workers post their requests to it), so
// that pool_size is one count per peer; the console reads it with the world stopped.
#pragma once

#include <uv.h>

#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <string>
#include <vector>

#include "pooler/config/config.h"
#include "pooler/config/server_address.h"

namespace pgsluice {

class PeerForwarder {
 public:
  explicit PeerForwarder(uv_loop_t* loop) : loop_(loop) {}
  PeerForwarder(const PeerForwarder&) = delete;
  PeerForwarder& operator=(const PeerForwarder&) = delete;

  // Sends `packet` (a whole CancelRequest) to `peer`, now or when one of its pool_size slots
  // frees; `from` names the request in the log.
  void forward(const PeerEntry& peer, int pool_size, std::string packet, const std::string& from,
               uint64_t timeout_ms);
  // After a RELOAD: pools of peers no longer listed go once nothing of theirs is in flight.
  void forget_unlisted(const std::map<int, PeerEntry>& peers);
  // Shutdown: queued requests are dropped (the ones in flight end on their own).
  void stop();

  // SHOW PEER_POOLS: one row per peer that requests were forwarded to, by peer id.
  struct PoolCounts {
    int peer_id = 0;
    size_t active_requests = 0;   // sent, the peer has not closed yet (cl_active_cancel_req)
    size_t waiting_requests = 0;  // not sent yet: queued or connecting (cl_waiting_cancel_req)
    size_t sending = 0;           // connections that sent their request (sv_active_cancel)
    size_t connecting = 0;        // connections being resolved or opened (sv_login)
  };
  [[nodiscard]] std::vector<PoolCounts> pool_counts() const;
  [[nodiscard]] size_t pool_count() const { return pool_counts().size(); }

 private:
  struct Waiting {
    std::string packet;
    std::string from;
    uint64_t queued_ms = 0;
  };
  struct PeerPool {
    PeerEntry peer;
    int pool_size = 1;
    size_t connecting = 0;
    size_t sent = 0;
    std::deque<Waiting> waiting;
    bool listed = true;
    bool draining = false;  // finished() is handing slots to waiting requests
  };

  void launch(PeerPool& pool, std::string packet, const std::string& from, uint64_t timeout_ms);
  // Connects to `address` (an IP literal or a socket path) and sends.
  void send_to(int peer_id, const ServerAddress& address, std::string packet, uint64_t timeout_ms);
  // A host name: looked up first (asynchronously; counted as connecting meanwhile).
  void resolve_and_send(int peer_id, const PeerEntry& peer, std::string packet,
                        uint64_t timeout_ms);
  // A connection of `peer_id`'s ended (sent or not): its slot goes to the next waiting request.
  void finished(int peer_id, bool was_sent, uint64_t timeout_ms);
  // Erases the pools of peers no longer listed that have nothing in flight.
  void prune();

  uv_loop_t* loop_;
  std::map<int, PeerPool> pools_;
  bool stopped_ = false;
};

}  // namespace pgsluice
