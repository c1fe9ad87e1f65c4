// See peer_forwarder.h; Worker::forward_to_peer is the workers' side.
#include "pooler/core/peer_forwarder.h"

#include <netdb.h>
#include <spdlog/spdlog.h>

#include <memory>
#include <utility>

#include "pgsluice/protocol/writer.h"
#include "pooler/core/cancel_key.h"
#include "pooler/core/worker.h"
#include "pooler/net/cancel_sender.h"

namespace pgsluice {

namespace pp = pgsluice::protocol;

// --- the worker that took the CancelRequest ---

PeerForwarder& Worker::peer_forwarder() {
  if (!peer_forwarder_) peer_forwarder_ = std::make_unique<PeerForwarder>(&loop_);
  return *peer_forwarder_;
}

void Worker::forward_to_peer(int32_t pid, std::string key, const std::string& from) {
  const int peer_id = cancel_key::peer_id_of(pid);
  const int ttl = cancel_key::ttl_of(key);
  // PgBouncer's loop guard: each forward lowers the TTL, and at 0 the request goes no further
  // ([peers] lines that send it round, or a peer's address that reaches another process).
  if (ttl == 0) {
    spdlog::info("{} cancel request for peer {} dropped: its TTL is exhausted", from, peer_id);
    return;
  }
  auto it = config().peers.find(peer_id);
  if (it == config().peers.end()) {
    // A key of no peer of the group: another group's, a guess, or from before peer_id was set.
    spdlog::info("{} cancel request for unknown peer {} ignored", from, peer_id);
    return;
  }
  cancel_key::set_ttl(key, ttl - 1);
  std::string packet;
  pp::write_cancel_request(packet, pid, key);
  spdlog::info("{} cancel request forwarded to peer {}", from, peer_id);
  Worker& primary = group_.primary();
  const uint64_t timeout_ms = static_cast<uint64_t>(settings().cancel_wait_timeout.count());
  primary.post([&primary, peer = it->second, pool_size = config().pool_size_for(it->second),
                packet = std::move(packet), from, timeout_ms]() mutable {
    primary.peer_forwarder().forward(peer, pool_size, std::move(packet), from, timeout_ms);
  });
}

// --- the forwarder, on the primary ---

void PeerForwarder::forward(const PeerEntry& peer, int pool_size, std::string packet,
                            const std::string& from, uint64_t timeout_ms) {
  if (stopped_) return;
  prune();
  PeerPool& pool = pools_[peer.id];
  // The newest [peers] line and settings (a RELOAD may have changed them).
  pool.peer = peer;
  pool.pool_size = pool_size;
  pool.listed = true;
  if (pool.connecting + pool.sent >= static_cast<size_t>(pool.pool_size)) {
    pool.waiting.push_back({std::move(packet), from, uv_now(loop_)});
    return;
  }
  launch(pool, std::move(packet), from, timeout_ms);
}

void PeerForwarder::launch(PeerPool& pool, std::string packet, const std::string& from,
                           uint64_t timeout_ms) {
  const PeerEntry& peer = pool.peer;
  ++pool.connecting;
  spdlog::debug("{} forwarding the cancel request to peer {}", from, peer.id);
  ServerAddress address;
  address.port = peer.port;
  if (peer.host.starts_with('/')) {
    address.unix_path = fmt::format("{}/.s.PGSQL.{}", peer.host, peer.port);
  } else {
    sockaddr_storage storage{};
    const bool literal =
        uv_ip4_addr(peer.host.c_str(), peer.port, reinterpret_cast<sockaddr_in*>(&storage)) == 0 ||
        uv_ip6_addr(peer.host.c_str(), peer.port, reinterpret_cast<sockaddr_in6*>(&storage)) == 0;
    if (!literal) {
      resolve_and_send(peer.id, peer, std::move(packet), timeout_ms);
      return;
    }
    address.host = peer.host;
  }
  send_to(peer.id, address, std::move(packet), timeout_ms);
}

void PeerForwarder::send_to(int peer_id, const ServerAddress& address, std::string packet,
                            uint64_t timeout_ms) {
  // The hooks find the pool by id: it stays while anything of its own is in flight.
  auto sent = std::make_shared<bool>(false);
  CancelSender::Hooks hooks;
  hooks.sent = [this, peer_id, sent] {
    *sent = true;
    PeerPool& pool = pools_.at(peer_id);
    --pool.connecting;
    ++pool.sent;
  };
  hooks.done = [this, peer_id, sent, timeout_ms] { finished(peer_id, *sent, timeout_ms); };
  hooks.await_close = true;
  CancelSender::send(loop_, address, std::move(packet), timeout_ms, std::move(hooks));
}

namespace {

struct Lookup {
  uv_getaddrinfo_t req{};
  PeerForwarder* forwarder = nullptr;
  int peer_id = 0;
  int port = 0;
  std::string host;
  std::string packet;
  uint64_t timeout_ms = 0;
};

}  // namespace

void PeerForwarder::resolve_and_send(int peer_id, const PeerEntry& peer, std::string packet,
                                     uint64_t timeout_ms) {
  auto lookup = std::make_unique<Lookup>();
  lookup->forwarder = this;
  lookup->peer_id = peer_id;
  lookup->port = peer.port;
  lookup->host = peer.host;
  lookup->packet = std::move(packet);
  lookup->timeout_ms = timeout_ms;
  lookup->req.data = lookup.get();
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  auto on_resolved = [](uv_getaddrinfo_t* req, int status, addrinfo* res) {
    std::unique_ptr<Lookup> done(static_cast<Lookup*>(req->data));
    char ip[INET6_ADDRSTRLEN] = {};
    const bool ok = status == 0 && res != nullptr && uv_ip_name(res->ai_addr, ip, sizeof(ip)) == 0;
    uv_freeaddrinfo(res);
    if (!ok) {
      spdlog::warn("cancel request to peer {} not sent: cannot resolve {}: {}", done->peer_id,
                   done->host, status != 0 ? uv_strerror(status) : "no address");
      done->forwarder->finished(done->peer_id, false, done->timeout_ms);
      return;
    }
    ServerAddress address;
    address.host = ip;
    address.port = done->port;
    done->forwarder->send_to(done->peer_id, address, std::move(done->packet), done->timeout_ms);
  };
  if (int rc = uv_getaddrinfo(loop_, &lookup->req, on_resolved, peer.host.c_str(), nullptr, &hints);
      rc != 0) {
    spdlog::warn("cancel request to peer {} not sent: cannot resolve {}: {}", peer_id, peer.host,
                 uv_strerror(rc));
    finished(peer_id, false, timeout_ms);
    return;
  }
  (void)lookup.release();  // on_resolved owns it now
}

void PeerForwarder::finished(int peer_id, bool was_sent, uint64_t timeout_ms) {
  auto it = pools_.find(peer_id);
  if (it == pools_.end()) return;
  PeerPool& pool = it->second;
  if (was_sent) {
    --pool.sent;
  } else {
    --pool.connecting;
  }
  // A launch below may end at once and land here again: the loop that runs already goes on.
  if (pool.draining) return;
  pool.draining = true;
  const uint64_t now = uv_now(loop_);
  while (!pool.waiting.empty() &&
         pool.connecting + pool.sent < static_cast<size_t>(pool.pool_size)) {
    Waiting next = std::move(pool.waiting.front());
    pool.waiting.pop_front();
    if (timeout_ms > 0 && now - next.queued_ms > timeout_ms) {
      spdlog::warn("{} cancel request for peer {} dropped: not sent within cancel_wait_timeout",
                   next.from, peer_id);
      continue;
    }
    launch(pool, std::move(next.packet), next.from, timeout_ms);
  }
  pool.draining = false;
}

void PeerForwarder::forget_unlisted(const std::map<int, PeerEntry>& peers) {
  for (auto& [id, pool] : pools_) pool.listed = peers.contains(id);
  prune();
}

void PeerForwarder::prune() {
  // Only from the top of a task: launch() may end a connection at once (finished() then runs
  // inside it), so a pool is never erased below a caller that holds it.
  std::erase_if(pools_, [](const auto& entry) {
    const PeerPool& pool = entry.second;
    return !pool.listed && pool.connecting == 0 && pool.sent == 0 && pool.waiting.empty();
  });
}

void PeerForwarder::stop() {
  stopped_ = true;
  for (auto& [id, pool] : pools_) pool.waiting.clear();
}

std::vector<PeerForwarder::PoolCounts> PeerForwarder::pool_counts() const {
  std::vector<PoolCounts> rows;
  for (const auto& [id, pool] : pools_) {
    if (!pool.listed && pool.connecting == 0 && pool.sent == 0 && pool.waiting.empty()) continue;
    rows.push_back({.peer_id = id,
                    .active_requests = pool.sent,
                    .waiting_requests = pool.waiting.size() + pool.connecting,
                    .sending = pool.sent,
                    .connecting = pool.connecting});
  }
  return rows;
}

}  // namespace pgsluice
