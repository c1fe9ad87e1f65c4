// A worker: one thread with one libuv loop that owns its listening sockets, its clients, its
// servers and its pools. Nothing a worker owns is touched by another thread, so none of it is
// locked. Today the process runs one worker (workers = 1); the configuration snapshot and the
// auth_file secrets it reads are immutable and shared, which is what more workers will need.
#pragma once

#include <uv.h>

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "pgsluice/protocol/session_state.h"
#include "pooler/admin_control.h"
#include "pooler/auth_sources.h"
#include "pooler/client.h"
#include "pooler/config.h"
#include "pooler/intrusive_list.h"
#include "pooler/pool.h"
#include "pooler/prepared_statements.h"
#include "pooler/session_findings.h"
#include "pooler/shutdown.h"
#include "pooler/tls_context.h"

namespace pgsluice {

class AuthQuery;
class MetricsServer;

class Worker {
 public:
  Worker(std::shared_ptr<const Config> config, std::shared_ptr<const AuthSecrets> secrets);
  Worker(const Worker&) = delete;
  Worker& operator=(const Worker&) = delete;
  ~Worker();

  // Opens the listening sockets; false (with the reason logged) when none could be opened.
  bool listen();
  // Runs the loop until stop() (SIGQUIT, SHUTDOWN, or the end of a graceful shutdown).
  void run();
  void stop();
  // SIGINT / SIGTERM and the console's SHUTDOWN modes (shutdown.h).
  Shutdown& shutdown() { return shutdown_; }

  uv_loop_t* loop() { return &loop_; }
  [[nodiscard]] const Config& config() const { return *config_; }
  [[nodiscard]] const Settings& settings() const { return config_->settings; }
  // TLS towards clients and towards servers (built by main from the settings; null when off).
  [[nodiscard]] const TlsContexts& tls() const { return tls_; }
  void set_tls(TlsContexts tls) { tls_ = std::move(tls); }
  [[nodiscard]] std::optional<std::string> secret_for(const std::string& user) const;
  // The SCRAM verifier of a plain auth_file password, derived once per user and kept.
  const protocol::ScramVerifier* plain_scram_verifier(const std::string& user,
                                                      const std::string& secret);
  [[nodiscard]] uint64_t now_ms() { return uv_now(&loop_); }
  [[nodiscard]] bool stopping() const { return stopping_; }

  // The pool for a client of `user` on `db` (created on first use).
  Pool& pool_for(const DatabaseEntry& db, const std::string& user);

  // Session-state checks: the verdict cache of this thread and the findings table.
  protocol::SessionStateClassifier& classifier() { return classifier_; }
  SessionFindings& findings() { return findings_; }
  PreparedRegistry& prepared_registry() { return prepared_registry_; }

  uint64_t next_client_id() { return ++last_client_id_; }
  uint64_t next_server_id() { return ++last_server_id_; }
  [[nodiscard]] size_t client_count() const { return clients_.size(); }
  void on_client_closed(Client& client);

  // Virtual cancel keys: the (pid, key) a client was given, mapped back to the client.
  // False when the CSPRNG failed: the client must not be let in without a key.
  [[nodiscard]] bool register_cancel_key(Client& client);
  void unregister_cancel_key(Client& client);
  Client* find_cancel_target(int32_t pid, std::string_view key);
  // Sends a CancelRequest to a server on a connection of its own.
  void send_cancel(const ServerAddress& address, int32_t backend_pid, const std::string& key);

  // --- the admin console and metrics (worker_admin.cc) ---
  AdminControl& admin_control() { return admin_control_; }
  // auth_query lookups and their cache (auth_query.h), made on first use.
  AuthQuery& auth_query();
  template <class Fn>
  void for_each_pool(Fn&& fn) {
    for (auto& [key, pool] : pools_) fn(*pool);
  }
  template <class Fn>
  void for_each_client(Fn&& fn) {
    clients_.for_each(fn);
  }
  [[nodiscard]] const AuthSecrets& secrets() const { return *secrets_; }
  [[nodiscard]] uint64_t started_ms() const { return started_ms_; }
  // SUSPEND / RESUME and SHUTDOWN WAIT_FOR_CLIENTS stop and restart accepting.
  bool open_listeners();
  void close_listeners();
  // Accepts the connections already queued on the listening sockets, so that closing them
  // (SIGTERM, SHUTDOWN WAIT_FOR_CLIENTS) resets none of them: behind so_reuseport the other
  // processes take the next ones.
  void drain_listeners();
  // RELOAD: re-reads the configuration file and the auth_file; on an error nothing changes
  // and the error is returned (empty on success).
  std::string reload();
  // SET key = value (a changeable setting); returns an error, empty on success.
  std::string set_setting(std::string_view key, std::string_view value);

 private:
  bool listen_tcp(const std::string& host, int port);
  bool listen_unix(const std::string& dir, int port);
  static void on_connection(uv_stream_t* listener, int status);
  static void on_sighup(uv_signal_t* handle, int signum);
  static void on_janitor(uv_timer_t* timer);
  bool start_metrics();
  void stop_metrics();
  // A new configuration snapshot: pool sizes, modes and database lines applied to the pools.
  void apply_config(std::shared_ptr<const Config> config);
  void accept_client(uv_stream_t* listener);

  std::shared_ptr<const Config> config_;
  std::shared_ptr<const AuthSecrets> secrets_;
  uv_loop_t loop_{};
  std::vector<std::unique_ptr<uv_stream_t, void (*)(uv_stream_t*)>> listeners_;
  uv_signal_t sighup_{};
  uv_timer_t janitor_{};
  std::map<std::pair<std::string, std::string>, std::unique_ptr<Pool>> pools_;
  IntrusiveList<Client, &Client::worker_node> clients_;
  std::unordered_map<int32_t, Client*> cancel_index_;
  std::unordered_map<std::string, std::pair<std::string, protocol::ScramVerifier>> scram_cache_;
  protocol::SessionStateClassifier classifier_;
  SessionFindings findings_;
  TlsContexts tls_;
  PreparedRegistry prepared_registry_;
  AdminControl admin_control_{*this};
  Shutdown shutdown_{*this};
  std::unique_ptr<MetricsServer> metrics_;
  std::unique_ptr<AuthQuery> auth_query_;
  // The snapshot a RELOAD replaced, kept one more reload: code running when it is swapped may
  // still hold references into it.
  std::shared_ptr<const Config> previous_config_;
  uint64_t started_ms_ = 0;
  uint64_t last_client_id_ = 0;
  uint64_t last_server_id_ = 0;
  bool stopping_ = false;
};

}  // namespace pgsluice
