// The workers of one pgsluice process and what they share: the World they stop to act on each
// other (world.h), the global server counts of the pool limits (shared_limits.h), the findings
// table, the prepared statements, auth_query's cache, client and server ids. Worker 0, the
// primary, listens, takes the signals, runs the janitor's process-wide part and the metrics
// endpoint; it accepts every connection and places it (next_for_client: the worker with the
// fewest clients, or itself while the process has at most spread_clients_above), and that
// worker owns the client from then on. Servers move between workers (server_release.cc).
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "pooler/auth/sources.h"
#include "pooler/config/config.h"
#include "pooler/core/auth_cache.h"
#include "pooler/core/extensions.h"
#include "pooler/core/host_role_board.h"
#include "pooler/core/listen_relay.h"
#include "pooler/core/prepared_statements.h"
#include "pooler/core/refusals.h"
#include "pooler/core/shared_limits.h"
#include "pooler/core/world.h"
#include "pooler/session_state/findings.h"
#include "pooler/session_state/params.h"

namespace pgsluice {

class Worker;
struct TlsContexts;

// The ParameterStatus set a pool greets new clients with, for every worker's share of the pool:
// a client that lands on a worker whose share has no server yet is greeted at once (and is not
// held up by a paused pool, which starts no server).
class SharedWelcomes {
 public:
  void publish(const std::string& db, const std::string& user, const ParameterSet& params);
  [[nodiscard]] std::optional<ParameterSet> find(const std::string& db, const std::string& user);

 private:
  std::mutex mutex_;
  std::map<std::pair<std::string, std::string>, ParameterSet> welcomes_;
};

class WorkerGroup {
 public:
  WorkerGroup(const std::shared_ptr<const Config>& config,
              const std::shared_ptr<const AuthSecrets>& secrets, int workers);
  WorkerGroup(const WorkerGroup&) = delete;
  WorkerGroup& operator=(const WorkerGroup&) = delete;
  ~WorkerGroup();

  [[nodiscard]] int size() const { return static_cast<int>(workers_.size()); }
  Worker& primary() { return *workers_.front(); }
  Worker& worker(int index) { return *workers_[static_cast<size_t>(index)]; }
  template <class Fn>
  void for_each_worker(Fn&& fn) {
    for (auto& w : workers_) fn(*w);
  }
  World& world() { return *world_; }
  SharedLimits& limits() { return limits_; }
  SharedFindings& findings() { return findings_; }
  SharedWelcomes& welcomes() { return welcomes_; }
  // Each server host's role as any pool learned it (host_role_board.h).
  HostRoleBoard& host_roles() { return host_roles_; }
  // Every pool's LISTEN relay (listen_relay.h).
  ListenRelays& relays() { return relays_; }
  // Prepared statements are one registry per process: one name and one stale-plan generation
  // per statement, whichever worker's client prepared it (prepared_statements.h).
  PreparedRegistry& prepared_registry() { return prepared_; }
  // auth_query's results: one cache per process (auth_cache.h).
  AuthCache& auth_cache() { return auth_cache_; }
  // What was refused from peers (refusals.h).
  Refusals& refusals() { return refusals_; }
  // The admin console and the operations, as main.cc wired them (extensions.h); until then, none.
  Extensions& extensions() { return *extensions_; }
  void set_extensions(Extensions& extensions) { extensions_ = &extensions; }
  // Clients of every worker (max_client_conn is one number for the process).
  std::atomic<size_t>& client_count() { return clients_; }
  // Connections accepted by the primary and not yet adopted by their worker.
  std::atomic<size_t>& handoffs_in_flight() { return handoffs_; }

  // Clients and servers are numbered from one sequence, as PgBouncer numbers its sockets: the
  // ids SHOW CLIENTS, SHOW SERVERS and SHOW SOCKETS print (and KILL_CLIENT takes) never name
  // two connections at once, and tools that read them expect a server's id to follow the
  // client it was opened for.
  uint64_t next_socket_id() { return last_socket_id_.fetch_add(1, std::memory_order_relaxed) + 1; }
  // The worker that takes the next accepted connection (called by the primary): the primary
  // while the process has at most `spread_above` clients, else the worker with the fewest
  // (ties in turn, so that balanced workers alternate).
  Worker& next_for_client(size_t spread_above);

  void set_tls(const TlsContexts& tls);
  // Opens the primary's listening sockets and signal handlers; why not (Worker::listen), empty
  // on success.
  std::string listen();
  // Runs every worker (the primary on the calling thread) until all have stopped.
  void run();
  // Every worker stops (called with the world stopped, or with one worker).
  void stop_all();

 private:
  NoExtensions no_extensions_;
  Extensions* extensions_ = &no_extensions_;
  std::vector<std::unique_ptr<Worker>> workers_;
  std::unique_ptr<World> world_;
  SharedLimits limits_;
  SharedFindings findings_;
  SharedWelcomes welcomes_;
  HostRoleBoard host_roles_;
  ListenRelays relays_;
  PreparedRegistry prepared_;
  AuthCache auth_cache_;
  Refusals refusals_;
  std::atomic<size_t> clients_{0};
  std::atomic<size_t> handoffs_{0};
  std::atomic<uint64_t> last_socket_id_{0};
  size_t next_worker_ = 0;
};

}  // namespace pgsluice
