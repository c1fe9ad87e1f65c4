// See show_peers.h.
#include "pooler/admin/show_peers.h"

#include "pooler/core/peer_forwarder.h"
#include "pooler/core/worker.h"

namespace pgsluice {

AdminResult show_peers(Worker& worker) {
  const Config& config = worker.config();
  AdminResult r;
  r.int4("peer_id").text("host").int4("port").int4("pool_size");
  for (const auto& [id, peer] : config.peers) {
    r.row().add(id).add(peer.host).add(peer.port).add(config.pool_size_for(peer));
  }
  r.set_tag("SHOW");
  return r;
}

AdminResult show_peer_pools(Worker& worker) {
  AdminResult r;
  r.int4("peer_id")
      .int4("cl_active_cancel_req")
      .int4("cl_waiting_cancel_req")
      .int4("sv_active_cancel")
      .int4("sv_login");
  // The forwarder runs on the primary; the world is stopped while the console reads it.
  if (const PeerForwarder* forwarder = worker.group().primary().peer_forwarder_if_any()) {
    for (const PeerForwarder::PoolCounts& p : forwarder->pool_counts()) {
      r.row()
          .add(p.peer_id)
          .add(p.active_requests)
          .add(p.waiting_requests)
          .add(p.sending)
          .add(p.connecting);
    }
  }
  r.set_tag("SHOW");
  return r;
}

size_t peer_pool_count(Worker& worker) {
  const PeerForwarder* forwarder = worker.group().primary().peer_forwarder_if_any();
  return forwarder == nullptr ? 0 : forwarder->pool_count();
}

}  // namespace pgsluice
