// A worker: one thread with one libuv loop that owns its clients, its servers and its share of
// every pool (worker_group.h). Nothing a worker owns is touched by another thread while the worker
// runs, so none of it is locked: the other threads either post it a task (a handed-over
// connection, a server moving to it, a cancel request, a freed pool slot) or stop the world
// (world.h) and act while it is parked. Each worker's janitor keeps its own objects; the primary
// (worker 0) also owns the listening sockets, the signals, the janitor's process-wide part and
// the metrics endpoint.
#pragma once

#include <uv.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "pgsluice/protocol/session_state.h"
#include "pooler/auth/sources.h"
#include "pooler/base/intrusive_list.h"
#include "pooler/config/config.h"
#include "pooler/core/client.h"
#include "pooler/core/pool.h"
#include "pooler/core/prepared_statements.h"
#include "pooler/core/takeover.h"
#include "pooler/core/worker_group.h"
#include "pooler/net/cancel_sender.h"
#include "pooler/net/flush_batch.h"
#include "pooler/net/listen_addresses.h"
#include "pooler/net/tls_context.h"
#include "pooler/session_state/findings.h"

namespace pgsluice {

class AuthQuery;
class PeerForwarder;

class Worker {
 public:
  Worker(WorkerGroup& group, int index, std::shared_ptr<const Config> config,
         std::shared_ptr<const AuthSecrets> secrets);
  Worker(const Worker&) = delete;
  Worker& operator=(const Worker&) = delete;
  ~Worker();

  // Opens the listening sockets (worker_listen.cc). Returns why pgsluice cannot start (a name in
  // listen_addr that does not resolve, no address of listen_addr could be listened on, the Unix
  // socket failed), empty on success; an address that fails beside others that work is a
  // warning, as in PgBouncer.
  std::string listen();
  [[nodiscard]] int index() const { return index_; }
  [[nodiscard]] bool primary() const { return index_ == 0; }
  WorkerGroup& group() { return group_; }
  // Runs `task` on this worker's thread soon; false (task dropped) once the worker stopped.
  bool post(std::function<void()> task);
  // Wakes the loop so that it parks (world.h); false once the worker stopped.
  bool wake();
  // Stops the world for the lifetime of the returned object (world.h).
  // This worker's batched writes go out first: what the paused world reads (queued output, a
  // client's or a server's readiness to move) is then as it would be between loop turns.
  [[nodiscard]] WorldPause pause_world() {
    flushes_.run();
    return WorldPause(group_.world(), index_);
  }
  // A connection the primary accepted and handed to this worker.
  void adopt_client(int fd, bool tcp);
  // --- online restart (worker_takeover.cc, takeover.h) ---
  // Old process, primary, world stopped: SHOW FDS's RowDescription and rows on the console
  // `socket`, each with its descriptor; then this process stops listening and forgets the
  // clients it passed. Returns the failure, empty on success (the caller adds CommandComplete).
  std::string hand_over_sockets(int socket);
  // New process, primary, before listen(): what take_over() got; listen() adopts the listeners
  // instead of binding and then hands each client to its worker.
  void set_taken_over(std::vector<TakeoverSocket> sockets);
  void resume_client(int fd, bool tcp, TakeoverClient state);
  // A taken-over client keeps the cancel key it was given by the old process.
  void adopt_cancel_key(Client& client);
  // Another worker freed a slot this worker starved for: its pools of those keys try again.
  void retry_starving(const LimitSlots& slots);
  // A host's role as the process knows it changed (host_role_board.h): pools with waiting
  // clients look for a host again, on this worker's thread (posted by whoever learned it).
  void on_host_role_news();
  // Pools whose hosts are all skipped ask again at `due_ms` (a role recheck within the
  // janitor's period during a failover); an earlier call's sooner time is kept.
  void wake_pools_at(uint64_t due_ms);
  // Another worker's server went and its slots passed to this worker's share of the pool.
  void take_handed_slot(const LimitSlots& slots);
  // Another worker starves for a slot: idle servers of these keys that no client here waits
  // for close, one per call.
  void yield_idle_server(const LimitSlots& slots);
  // --- servers changing workers (server_release.cc): one pool per process ---
  // Posts `server` (moving, its handles closed on this loop) with its duplicated socket to
  // `target`, which adds it to its share of the pool; when `target` has stopped, the socket is
  // closed and the server freed.
  void send_server(Worker& target, Server& server, int fd, bool answers_ask);
  // Worker `requester` is about to log in a server for the pool of `slots`: this worker's share
  // gives it an idle server, or the next worker is asked (`hops_left` workers are still to
  // ask), or the last one asked tells `requester` that none had one.
  void offer_server(const LimitSlots& slots, int requester, int hops_left);
  // This worker's share of the pool of `slots`; null when it has none.
  Pool* find_pool(const LimitSlots& slots);
  // Servers that came from and went to other workers (SHOW WORKERS; read with the world stopped).
  [[nodiscard]] uint64_t servers_moved_in() const { return servers_moved_in_; }
  [[nodiscard]] uint64_t servers_moved_out() const { return servers_moved_out_; }
  void count_server_moved_out() { ++servers_moved_out_; }
  // Runs the loop until stop() (SIGQUIT, SHUTDOWN, or the end of a graceful shutdown).
  void run();
  void stop();
  // The admin console and the operations (extensions.h), one set for the process.
  Extensions& extensions() { return group_.extensions(); }

  uv_loop_t* loop() { return &loop_; }
  [[nodiscard]] const Config& config() const { return *config_; }
  [[nodiscard]] const Settings& settings() const { return config_->settings; }
  // disable_pqexec as it was at startup: PgBouncer does not apply a change at RELOAD either.
  [[nodiscard]] bool disable_pqexec() const { return disable_pqexec_; }
  // TLS towards clients and towards servers (built by main from the settings; null when off).
  [[nodiscard]] const TlsContexts& tls() const { return tls_; }
  void set_tls(TlsContexts tls) { tls_ = std::move(tls); }
  [[nodiscard]] std::optional<std::string> secret_for(const std::string& user) const;
  // The SCRAM verifier of a plain auth_file password, derived once per user and kept.
  const protocol::ScramVerifier* plain_scram_verifier(const std::string& user,
                                                      const std::string& secret);
  [[nodiscard]] uint64_t now_ms() { return uv_now(&loop_); }
  // Microseconds (now_us's clock) read once per loop turn, at the first call after the loop last
  // waited: what the stats' query and transaction times use. Callbacks of one turn share it.
  [[nodiscard]] uint64_t turn_now_us() {
    if (turn_us_ == 0) turn_us_ = now_us();
    return turn_us_;
  }
  [[nodiscard]] bool stopping() const { return stopping_; }
  // SIGINT's drain (SHUTDOWN WAIT_FOR_SERVERS): a client whose transaction ended, or that starts
  // one, is closed instead of served. Set on every worker with the world stopped (Shutdown); a
  // member of the worker, read at every transaction, rather than a question to the operations.
  [[nodiscard]] bool draining() const { return draining_; }
  void start_draining() { draining_ = true; }

  // The pool for a client of `user` on `db` (created on first use).
  Pool& pool_for(const DatabaseEntry& db, const std::string& user);
  // pool_idle_timeout (maintain_pools): frees this worker's share `pool`, which nothing points
  // to any more; another worker's share of it, or a client here later, makes its own.
  void free_pool(Pool& pool);
  // Since when pool_idle_timeout has been on (`on`), as this worker's janitor saw it; 0: off.
  uint64_t arm_pool_idle_timeout(bool on, uint64_t now_ms) {
    if (!on) return pool_idle_armed_ms_ = 0;
    if (pool_idle_armed_ms_ == 0) pool_idle_armed_ms_ = now_ms == 0 ? 1 : now_ms;
    return pool_idle_armed_ms_;
  }

  // Session-state checks: the verdict cache of this thread and the findings table.
  protocol::SessionStateClassifier& classifier() { return classifier_; }
  SharedFindings& findings() { return group_.findings(); }
  PreparedRegistry& prepared_registry() { return group_.prepared_registry(); }
  Refusals& refusals() { return group_.refusals(); }

  uint64_t next_socket_id() { return group_.next_socket_id(); }
  [[nodiscard]] size_t client_count() const { return clients_.size(); }
  // Its clients and those handed to it not yet adopted; read by the primary's placement
  // (WorkerGroup::next_for_client) from its own thread.
  [[nodiscard]] size_t placed_clients() const {
    return placed_clients_.load(std::memory_order_relaxed);
  }
  void on_client_closed(Client& client);

  // Virtual cancel keys: the (pid, key) a client was given, mapped back to the client.
  // False when the CSPRNG failed: the client must not be let in without a key.
  [[nodiscard]] bool register_cancel_key(Client& client);
  void unregister_cancel_key(Client& client);
  Client* find_cancel_target(int32_t pid, std::string_view key);
  // Clients that listen through a pool's LISTEN relay (listen_relay.h), by id: what the relay
  // posts to this worker names clients by id, and a client that closed meanwhile is not found.
  void register_relay_client(Client& client) { relay_clients_[client.id()] = &client; }
  void unregister_relay_client(const Client& client) { relay_clients_.erase(client.id()); }
  Client* find_relay_client(uint64_t id) {
    auto it = relay_clients_.find(id);
    return it != relay_clients_.end() ? it->second : nullptr;
  }
  // A CancelRequest, delivered by the worker that holds the client (the virtual pid says which).
  void route_cancel(int32_t pid, std::string key, std::string from);
  // Sends a CancelRequest to a server on a connection of its own.
  void send_cancel(const ServerAddress& address, int32_t backend_pid, const std::string& key,
                   CancelHooks hooks = {});
  // --- peering (peer_forwarder.cc) ---
  // A CancelRequest whose key names another peer: passed to the primary's forwarder unless its
  // TTL is spent or the peer is not in [peers] (then logged and dropped).
  void forward_to_peer(int32_t pid, std::string key, const std::string& from);
  // The process's forwarder (the primary's; made on first use, on the primary's thread).
  PeerForwarder& peer_forwarder();
  // Null until a request was forwarded (the console, with the world stopped).
  [[nodiscard]] const PeerForwarder* peer_forwarder_if_any() const { return peer_forwarder_.get(); }

  // --- reload and settings (worker_reload.cc) ---
  // auth_query lookups and their cache (auth_query.h), made on first use.
  AuthQuery& auth_query();
  // Every pool and client of every worker: only with the world stopped (or one worker).
  template <class Fn>
  void for_each_pool(Fn&& fn) {
    group_.for_each_worker([&](Worker& w) { w.for_each_own_pool(fn); });
  }
  template <class Fn>
  void for_each_client(Fn&& fn) {
    group_.for_each_worker([&](Worker& w) { w.clients_.for_each(fn); });
  }
  // This worker's own pools and clients.
  template <class Fn>
  void for_each_own_pool(Fn&& fn) {
    for (auto& [key, pool] : pools_) fn(*pool);
  }
  template <class Fn>
  void for_each_own_client(Fn&& fn) {
    clients_.for_each(fn);
  }
  [[nodiscard]] size_t pool_count() const { return pools_.size(); }
  [[nodiscard]] const AuthSecrets& secrets() const { return *secrets_; }
  [[nodiscard]] uint64_t started_ms() const { return started_ms_; }
  // Opened at start (open_listeners returns the failure as listen() does) and closed at the
  // exit.
  std::string open_listeners();
  // A shutdown closes the TCP ports and keeps the Unix socket for the console (ops/shutdown.h).
  void close_tcp_listeners();
  // Accepts the connections already queued on the TCP listening sockets, so that closing them
  // (SIGTERM, SHUTDOWN WAIT_FOR_CLIENTS) resets none of them: behind so_reuseport the other
  // processes take the next ones.
  void drain_tcp_listeners();
  // RELOAD: re-reads the configuration file and the auth_file and applies them to every worker
  // (with the world stopped); on an error nothing changes and the error is returned.
  std::string reload();
  // SET key = value (a changeable setting); returns an error, empty on success. `notice` gets
  // what the client should be told of a value that was set but could not take effect.
  std::string set_setting(std::string_view key, std::string_view value, std::string& notice);

 private:
  bool listen_tcp(const ListenAddress& address);
  // The taken-over listeners; false with `error` empty when there are none.
  bool adopt_taken_listeners(std::string& error);
  void resume_taken_clients();
  std::string listen_unix(const std::string& dir, int port);
  // tcp_defer_accept on every TCP listener (at start and when the setting changes).
  void set_listeners_defer_accept();
  // The TCP options (socket_options.h) on a client's socket just accepted; false: logged and
  // the client closed, as PgBouncer drops a connection it cannot tune.
  bool tune_client_socket(Client& client);
  // A client on an accepted or taken-over socket, on this worker's list; null (closed with
  // `failure`, or by the socket options) when the socket cannot be used.
  Client* open_client(int fd, bool tcp, std::string_view failure);
  static void on_connection(uv_stream_t* listener, int status);
  static void on_sighup(uv_signal_t* handle, int signum);
  static void on_janitor(uv_timer_t* timer);
  static void on_wake(uv_async_t* handle);
  void janitor_round();
  void deliver_cancel(int32_t pid, const std::string& key, const std::string& from);
  // A new configuration snapshot: pool sizes, modes and database lines applied to the pools.
  void apply_config(std::shared_ptr<const Config> config);
  void accept_client(uv_stream_t* listener);
  void hand_off(uv_stream_t* listener, Worker& target);
  void receive_server(Server& server, int fd, const LimitSlots& slots, const DatabaseEntry& db,
                      const std::string& user, bool answers_ask);

  WorkerGroup& group_;
  const int index_;
  std::shared_ptr<const Config> config_;
  std::shared_ptr<const AuthSecrets> secrets_;
  uv_loop_t loop_{};
  std::vector<std::unique_ptr<uv_stream_t, void (*)(uv_stream_t*)>> listeners_;
  std::vector<TakeoverSocket> taken_over_;  // set_taken_over, until listen() used them
  uv_signal_t sighup_{};
  uv_timer_t janitor_{};
  uv_timer_t hosts_due_{};     // wake_pools_at
  uint64_t hosts_due_ms_ = 0;  // when it fires; 0: not armed
  // Runs before each wait for events: the next turn reads the clock again (turn_now_us).
  uv_prepare_t turn_{};
  // This turn's writes (loop_.data points here): sent after the turn's I/O callbacks (turn_end_)
  // and, for those queued by timers and close callbacks, before the next wait (turn_).
  FlushBatch flushes_;
  uv_check_t turn_end_{};
  uint64_t turn_us_ = 0;
  bool draining_ = false;
  uv_async_t wake_{};
  std::mutex tasks_mutex_;
  std::vector<std::function<void()>> tasks_;
  bool wake_open_ = true;
  std::map<std::pair<std::string, std::string>, std::unique_ptr<Pool>> pools_;
  IntrusiveList<Client, &Client::worker_node> clients_;
  std::atomic<size_t> placed_clients_{0};
  // By pid; with peering a pid may be shared (cancel_key.h).
  std::unordered_multimap<int32_t, Client*> cancel_index_;
  std::unordered_map<uint64_t, Client*> relay_clients_;
  std::unordered_map<std::string, std::pair<std::string, protocol::ScramVerifier>> scram_cache_;
  protocol::SessionStateClassifier classifier_;
  TlsContexts tls_;
  std::unique_ptr<AuthQuery> auth_query_;
  std::unique_ptr<PeerForwarder> peer_forwarder_;
  // The snapshot a RELOAD replaced, kept one more reload: code running when it is swapped may
  // still hold references into it.
  std::shared_ptr<const Config> previous_config_;
  uint64_t started_ms_ = 0;
  uint64_t pool_idle_armed_ms_ = 0;  // arm_pool_idle_timeout
  bool disable_pqexec_ = false;
  uint64_t servers_moved_in_ = 0;
  uint64_t servers_moved_out_ = 0;
  bool stopping_ = false;
};

}  // namespace pgsluice
