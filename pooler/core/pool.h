// A pool: the server connections of one (database, server user) pair on one worker, and the
// clients waiting for one of them. It decides who gets which server: an idle server (most recently
// used first, so that few servers stay warm), a new one while the pool is below its size, or a
// place in the FIFO queue. It also keeps what new clients are greeted with: the ParameterStatus
// set of the first server that logged in.
#pragma once

#include <uv.h>

#include <array>
#include <cstdint>
#include <deque>
#include <functional>
#include <optional>
#include <string>

#include "pgsluice/protocol/scram.h"
#include "pooler/base/intrusive_list.h"
#include "pooler/config/config.h"
#include "pooler/config/server_address.h"
#include "pooler/core/client.h"
#include "pooler/core/host_role_board.h"
#include "pooler/core/host_roles.h"
#include "pooler/core/pool_hosts.h"
#include "pooler/core/pool_limits.h"
#include "pooler/core/server.h"
#include "pooler/core/shared_limits.h"
#include "pooler/core/stats.h"
#include "pooler/session_state/params.h"
#include "pooler/session_state/set_literal.h"

namespace pgsluice {

class Worker;

class Pool {
 public:
  Pool(Worker& worker, DatabaseEntry db, ServerCredentials credentials, PoolMode mode,
       int pool_size);
  Pool(const Pool&) = delete;
  Pool& operator=(const Pool&) = delete;
  ~Pool();

  [[nodiscard]] const DatabaseEntry& database() const { return db_; }
  // The entry's first host (a multi-host entry's servers each have their own: Server::address).
  [[nodiscard]] const ServerAddress& address() const { return hosts_.at(0); }
  // The entry's hosts and what this share learned of them (SHOW POOLS, /metrics).
  [[nodiscard]] const PoolHosts& hosts() const { return hosts_; }
  [[nodiscard]] ServerCredentials& credentials() { return credentials_; }
  [[nodiscard]] PoolMode mode() const { return mode_; }
  [[nodiscard]] int pool_size() const { return pool_size_; }
  [[nodiscard]] Worker& worker() { return worker_; }
  PoolCounters& counters() { return stats_.totals; }
  // What the servers showed after plain SETs (set_literal.h), for `keep`.
  [[nodiscard]] SetValueCache& set_values() { return set_values_; }
  PoolStats& stats() { return stats_; }
  [[nodiscard]] const PoolStats& stats() const { return stats_; }

  // --- admin console ---
  // PAUSE / SUSPEND: no server is handed out (clients queue) and no server is started; with
  // close_servers (PAUSE), servers are closed as soon as they are released.
  void set_paused(bool paused, bool close_servers);
  [[nodiscard]] bool paused() const { return paused_; }
  // A reload changed the database line or the pool size: applied to new work at once, and to
  // servers with other connection settings at their next release.
  void apply_config(const DatabaseEntry& db, PoolMode mode, int pool_size);
  // RECONNECT: idle servers close now (`reason` in the log), busy ones when they are released.
  void mark_close_needed(std::string_view reason = "reconnect requested");
  // The server TLS settings changed (RELOAD, SET): servers that logged in under the old ones
  // are replaced as after RECONNECT (PgBouncer: "obsolete connection"), and a login that failed
  // under them no longer holds clients back for server_login_retry.
  void on_server_tls_changed();
  // A reload removed the database: the pool drains. Its clients go on being served (new ones
  // are refused by the lookup), idle servers close, busy ones when released with nobody waiting.
  void mark_removed();
  [[nodiscard]] bool removed() const { return removed_; }
  // KILL: every server closes now (their clients with them); queued clients are failed.
  void kill(std::string_view reason);
  // Servers linked or being cleaned (what PAUSE waits for).
  [[nodiscard]] size_t busy_count() const {
    return active_.size() + resetting_.size() + being_canceled_.size() + draining_.size();
  }
  // Servers still to be closed after RECONNECT / RELOAD (what WAIT_CLOSE waits for).
  [[nodiscard]] size_t close_needed_count();
  // When the longest-waiting client started waiting (now_us() clock); 0 when none waits.
  [[nodiscard]] uint64_t oldest_wait_start_us();
  // Every server, by state list (serving_lists).
  template <class Fn>
  void for_each_server(Fn&& fn) {
    for (ServerList* list : serving_lists()) list->for_each(fn);
  }
  // The pool's LISTEN relay connection, when it lives on this worker (listen_relay.h): not
  // among the servers above, since it serves no client and takes no slot of pool_size.
  template <class Fn>
  void for_each_listener(Fn&& fn) {
    listeners_.for_each(fn);
  }
  // Starts the relay's listener connection, logged in as the pool's servers are.
  Server* launch_listener(ListenRelay& relay);

  // --- clients ---
  // A client that passed authentication wants the greeting (ParameterStatus set): it gets it now
  // or as soon as a server has logged in.
  void request_welcome(Client& client);
  // The greeting another worker's share published (SharedWelcomes), taken once, and the clients
  // waiting for it greeted; false while no share has one.
  bool adopt_shared_welcome();
  // A client with a message to run wants a server: linked now, or queued.
  void request_server(Client& client);
  // The pooler's own queries (auth_query lookups, auth_query.h): `ready` gets an idle server for
  // one Server::run_query, before queued clients, or nullptr when no server can log in.
  void request_for_pooler(std::function<void(Server*)> ready);
  // " (the last server login failed: …)" while the pool's last login failed, else empty: what a
  // client whose wait for a server times out is told besides the timeout.
  [[nodiscard]] std::string login_failure_note() const;
  // A queued (or greeting-waiting) client left or timed out.
  void forget_client(Client& client);
  // A client whose statement needs a pin the reserve refuses (Client::wait_for_pin) waits here,
  // and asks for a server again at the pool's next maintenance (retry_pin_waiters).
  void wait_for_pin(Client& client);
  void retry_pin_waiters();

  // --- replication clients (pool_replication.cc) ---
  // A client with replication=true/database passed authentication: a server of its own is
  // started for it when the limits allow (an idle server of the pool is closed to make room,
  // as PgBouncer evicts one), else it waits (query_wait_timeout) until a slot frees.
  void request_replication(Client& client);
  // Its walsender logged in: the client is greeted and the two are relayed to each other.
  void on_replication_login_ok(Server& server);

  // --- servers ---
  void on_server_login_ok(Server& server);
  // `code` is the SQLSTATE of the failure: whether the waiting clients hear it or keep waiting
  // (refuses_waiters).
  void on_server_login_failed(Server& server, std::string_view code, std::string_view message);
  // At the login's ReadyForQuery: whether the server's role fits target_session_attrs (else it
  // is closed, its host skipped for a moment, and the next host tried; pool_hosts.h).
  bool accept_role(Server& server);
  // Closes `server` (true) when the role it reports does not fit target_session_attrs: its host
  // is skipped for a moment and another one is tried; `what` starts the log line and reason.
  bool close_if_wrong_role(Server& server, std::string_view what);
  // server_role_check_interval (pool_roles.cc): the janitor's round starts the role check on
  // the idle servers whose role was last told longer ago than the interval, when
  // target_session_attrs is not `any`. Only this worker's servers: no other worker is stopped.
  void check_idle_roles(uint64_t now_ms);
  // A server became idle (clean, unlinked): it serves the next waiter or stays idle.
  void on_server_idle(Server& server);
  // A server is closing (already off the lists): replace it if clients wait.
  void on_server_closing();
  // A closing server's socket is closed: its PostgreSQL backend no longer counts against
  // max_db_connections / max_user_connections, so pools waiting on those may start one.
  void on_server_destroyed();
  // The one transition function of a server's state: moves it to the list of its new state.
  void move_server(Server& server, Server::State from, Server::State to);

  // Shutdown: closes every server that is not linked; linked ones close with their clients.
  void close_all_servers();
  // Fails clients that waited longer than their query_wait_timeout (Config::
  // query_wait_timeout_for: the user's, the database's, the main section's); called by the
  // worker's janitor.
  void check_timeouts(uint64_t now_ms);
  // The janitor's round (pool_maintenance.cc): timeouts, servers past server_lifetime or
  // server_idle_timeout, server_fast_close, the reserve pool, min_pool_size. `clients`: how many
  // clients are attached to this pool.
  void maintain(uint64_t now_ms, int clients);
  // pool_idle_timeout (pool_maintenance.cc), after maintain(): whether this share may be freed,
  // no share of the pool on any worker having had a client or a server for `timeout_ms` (0: it
  // is only noted whether this one is in use). `clients`: as for maintain().
  bool idle_past(uint64_t now_ms, int clients, uint64_t timeout_ms);
  // Starts a server for the queue when clients wait, no login is in flight and the limits
  // allow; with `evict`, an idle server of another pool of the same database or user may
  // be closed to make room under max_db_connections / max_user_connections.
  void launch_for_waiters(bool evict = true);
  // Another worker starves for a slot this pool's servers hold: the oldest idle server goes
  // to it (moves there, or closes when the other worker wants the slot for another pool) when
  // no client of this worker waits for it. False when none went.
  bool yield_idle_server_to_other_worker();
  // --- one pool per process (pool_workers.cc) ---
  // Worker `to` is about to log in a server for this pool: an idle server nobody waits for
  // here moves there instead. False when there is none to give.
  bool offer_idle_server(int to);
  // The other workers had no idle server to give (ask_other_workers): a login, if still needed.
  void on_no_server_offered();
  // A server another worker's share gave up arrives here, reading `fd`; `answers_ask`: it is
  // the answer to ask_other_workers.
  void adopt_moved_server(Server& server, int fd, bool answers_ask);
  // Another worker passed this worker a slot (shared_limits.h): a server starts on it, or the
  // slot is given back when nobody waits here any more. False when it was given back.
  bool launch_on_handed_slot();
  [[nodiscard]] const LimitSlots& limit_slots() const { return limit_slots_; }

  [[nodiscard]] const ParameterSet* welcome() const {
    return has_welcome_ ? &welcome_params_ : nullptr;
  }
  [[nodiscard]] size_t server_count() const;

 private:
  // A draw that is no secret, only spread: the per-server one of staggered_lifetime_ms(), and
  // where load_balance_hosts = random starts (it used to take the server's id, which is one
  // sequence with the clients' now and would lose an id per server).
  static uint32_t stagger_draw();
  using ServerList = IntrusiveList<Server, &Server::pool_node>;
  ServerList* list_for(Server::State state);
  void launch_server();
  // One more server if the limits allow (pool_limits.h); false when none was started. With
  // `ask_first`, the other workers are asked for an idle server first (one pool per process:
  // a login only when no worker has one to spare).
  bool try_launch(bool evict, bool ask_first = false);
  // One server towards min_pool_size (the janitor), if every worker's servers leave room.
  bool launch_for_min_pool_size(int min_size);
  // Posts the ask to the next worker (Worker::offer_server); false when there is no other.
  bool ask_other_workers();
  // Hands idle `server` to worker `to`, which starves for this pool's slot: true when it went
  // (claimed and moved), false when it stays here (another server already went to `to`).
  // A server that cannot move closes, its slot then following it to `to`.
  bool hand_to_starving_worker(Server& server, int to);
  LaunchInput launch_input();
  // Replication clients waiting for a slot (pool_replication.cc): each gets a server started
  // for it while the limits allow; with `evict`, an idle server is closed to free one.
  void launch_replication_waiters(bool evict);
  void launch_replication_server(Client& client);
  // Closes an idle server (this pool's, else one of another pool of the database or user the
  // verdict names) for a replication client; false when there is none or one is closing.
  bool make_room_for_replication(LaunchVerdict verdict);
  // max_db_connections / max_user_connections: closes the oldest idle server of another pool
  // of the database (or user) the verdict names; false when there is none.
  bool evict_idle_server(LaunchVerdict verdict);
  // At the limit of the database or user, a released server goes to the pool whose client
  // waited longest rather than back here: closed, so that the other pool can start one.
  bool yield_to_other_pool();
  // A released server goes to another worker whose clients starve for its slot when this
  // worker's clients do not need it, or hold more than their share (pool_size / workers):
  // which worker, and whether for this pool (the server moves) or another (it closes).
  SharedLimits::YieldTo yield_to_other_worker();
  // Tells the other workers that this one starves (shared_limits.h).
  void note_starving(LaunchVerdict verdict);
  // Tells the other workers when this share's longest-waiting client started waiting.
  void publish_wait();
  // A server of this pool went: its slots pass to a worker that starves for them (true), or are
  // free (false; workers starving for the database's or user's slots are told).
  bool give_back_slot();
  // Whether max_db_connections or max_user_connections applies to this pool: read at every
  // release of a server (yield_to_other_pool), so kept from the last config rather than looked
  // up in [users] each time. note_limits() reads them (and reserve_pool()) from the config.
  [[nodiscard]] bool limits_shared() const { return limits_shared_; }
  void note_limits();
  // Clients wait here and no server is on its way for them (and the pool may start one).
  bool wants_server();
  // Clients wait and no login is in flight (launch_for_waiters starts one server at a time).
  bool wants_more_servers();
  // More clients (and pooler lookups) wait than the servers being checked will serve.
  bool queue_wants_server();
  // Posts launch_for_waiters to the workers that waited for a login of this pool to end.
  void wake_login_waiters();
  // Runs `fn` on each share of this pool of the workers in `workers` (bit i: worker i), on
  // that worker's thread; a worker without a share of it is skipped.
  void post_to_shares(uint64_t workers, void (*fn)(Pool&));
  // When the longest waiting client started waiting; 1 for a pool waiting for its first server.
  uint64_t queue_key();
  // Of the pools sharing this one's database or user that want a server and would be allowed
  // one (with `freed` servers of this pool gone), the one whose client waited longest.
  Pool* next_in_line(bool exclude_self, int freed);
  // The most recently used idle server ready to be linked, after running server_check_query on
  // those that need it (they come back through on_server_idle); null when none is ready now.
  Server* take_idle_server();
  [[nodiscard]] size_t checks_in_flight();
  // reserve_pool_size of this database and user (a [users] entry's first): asked at every
  // release, so kept from the last config (note_limits).
  [[nodiscard]] int reserve_pool() const { return reserve_pool_; }
  void link(Server& server, Client& client);
  // The host the next server logs in to (PoolHosts::pick, 0 when every host is skipped), after
  // learning which hosts the other workers' shares found failing (pool_failover.cc).
  size_t pick_host(uint64_t now_ms);
  // What the other workers' shares and the other pools learned of the hosts: which failed
  // (this pool's, every share), which role each has (HostRoleBoard, every pool).
  void learn_host_news(uint64_t now_ms);
  void learn_host_roles(uint64_t now_ms);
  void adopt_host_role(size_t i, const HostRoleBoard::Known& known, uint64_t now_ms);
  // Some share of the pool has no usable host (a failover is under way).
  [[nodiscard]] bool in_outage() const;
  // How long a host of the wrong role is skipped: less while no host is usable.
  [[nodiscard]] uint64_t role_recheck_ms() const;
  // A login to `host` starts; when the host was skipped for its role, it is the process's
  // check of that host (HostRoleBoard::begin_check).
  void begin_role_recheck(size_t host, uint64_t now_ms);
  // Every host is skipped: the worker looks again when the first one is due.
  void wake_at_next_usable_host(uint64_t now_ms);
  // Host `server` logged in to failed: skipped here and by every worker's share until `until_ms`.
  void skip_host(const Server& server, uint64_t until_ms);
  // A load-balanced entry's servers spread again over a host that is usable again, at a
  // release (pool_rebalance.cc): true when `server` was closed to make room for a login there.
  bool rebalance_at_release(Server& server, uint64_t now_ms);
  // Host `promoted` is a primary now: the hosts this pool skipped as primaries (for a standby
  // or read-only entry) are worth a login again, the old primary may be back as a standby.
  void recheck_other_primaries(size_t promoted);
  // The host the rebalancing chose for the next login, once (kNone: none, or skipped now).
  size_t take_rebalance_host(uint64_t now_ms);
  // Failover events (pool_failover.cc): logged with their timing.
  void note_login_failure(const Server& server, std::string_view message, uint64_t now_ms);
  // A host failed or answered with the wrong role: the pool may have no usable host left.
  void note_host_trouble(uint64_t now_ms);
  void note_role_told(const Server& server, const ServerRole& role);
  void note_login_ok(const Server& server, uint64_t now_ms);
  // A server of the right role is ready here: the time without a usable host (if any) is over.
  void end_outage(const Server& server, uint64_t now_ms);
  // A server back in the pool: notes when its role was last told; false when its role check
  // failed (it is closed).
  bool take_role_answer(Server& server, uint64_t now_ms);
  void serve_waiters();
  bool login_retry_blocked(uint64_t now_ms) const;
  // No server of the pool is logged in on any worker (logins in flight may be), or those that
  // are were marked to close (RECONNECT) and no login has succeeded since: none of them can
  // serve the waiting clients for long (PgBouncer's pool without welcome_msg_ready).
  [[nodiscard]] bool no_logged_in_server() const;
  // server_login_retry: fails the client (true) while logins keep failing and no server is left.
  bool refuse_while_login_blocked(Client& client);
  // Every client waiting here since failed_ms or earlier, and every pooler task, fails with the
  // login's error.
  void fail_waiters_after_login_failure(std::string_view message, uint64_t failed_ms);
  // Whether a login failure with this SQLSTATE is told to the waiting clients (else they wait
  // for the next attempt).
  static bool refuses_waiters(std::string_view code);
  // check_timeouts: fails the clients of `list` that waited longer than their query_wait_timeout
  // (`with_login_failure`: the note of the pool's last login failure added to the message).
  void fail_waiters_past_timeout(IntrusiveList<Client, &Client::pool_node>& list, uint64_t now_ms,
                                 bool with_login_failure);

  Worker& worker_;
  DatabaseEntry db_;
  LimitSlots limit_slots_;
  PoolHosts hosts_;
  ServerCredentials credentials_;
  PoolMode mode_;
  int pool_size_;
  PoolStats stats_;
  SetValueCache set_values_;
  bool paused_ = false;
  bool servers_obsolete_ = false;   // mark_close_needed ran, and no login succeeded since
  bool close_on_release_ = false;   // PAUSE (not SUSPEND): servers close when released
  bool removed_ = false;            // the database is gone from the configuration: drain
  int closing_open_ = 0;            // closing servers whose socket is not closed yet
  uint64_t published_wait_us_ = 0;  // publish_wait()
  bool asking_ = false;             // ask_other_workers() waits for its answer
  uint64_t login_wake_ = 0;         // workers to tell that a login ended (wake_login_waiters)
  bool login_claimed_ = false;      // try_launch counted the login launch_server starts
  bool limits_shared_ = false;      // limits_shared()
  int reserve_pool_ = 0;            // reserve_pool()
  // Failover events (pool_failover.cc): since when a host has failed or refused without a
  // server of the right role since, and whether every host was skipped meanwhile.
  uint64_t trouble_since_ms_ = 0;
  bool no_usable_host_ = false;
  uint64_t role_news_seen_ = 0;  // HostRoleBoard::news() when learn_host_roles last read it
  // pool_rebalance.cc: when this share last counted its servers per host, and the host its
  // next login goes to (kNone: where load_balance_hosts sends it).
  uint64_t rebalance_checked_ms_ = 0;
  size_t rebalance_to_ = PoolHosts::kNone;
  // pool_idle_timeout: when this share last changed a server's state or was seen in use, and
  // whether it ever started a LISTEN relay listener (whose closing connection still points here
  // while it lingers, without counting among closing_open_: such a share is never freed).
  uint64_t last_active_ms_ = 0;
  bool relay_launched_ = false;

  ParameterSet welcome_params_;
  bool has_welcome_ = false;

  // Servers by state (Server::State names the list): connecting or logging in, idle (used as a
  // stack: the most recently used first), linked to a client, being cleaned before reuse,
  // released but waiting for the cancel requests sent for it to land, reading what was owed to
  // a client that left.
  ServerList login_;
  ServerList idle_;
  ServerList active_;
  ServerList resetting_;
  ServerList being_canceled_;
  ServerList draining_;
  ServerList listeners_;
  // Replication clients' walsenders, logged in (while logging in they are on login_): linked to
  // their client for good, never idle, counted against the pool's limits.
  ServerList replicating_;
  // The lists of the servers that serve the pool's clients (not the LISTEN relay's listener),
  // one per state (list_for): every walk over all of them goes through here, so that a state's
  // list is never left out of one (a shutdown that missed one waited for its servers forever).
  template <class Self>
  static auto serving_lists_of(Self& self) {
    return std::array{&self.login_,          &self.idle_,     &self.active_,     &self.resetting_,
                      &self.being_canceled_, &self.draining_, &self.replicating_};
  }
  std::array<ServerList*, 7> serving_lists() { return serving_lists_of(*this); }
  std::array<const ServerList*, 7> serving_lists() const { return serving_lists_of(*this); }
  // Clients by what they wait for: the greeting (a server's ParameterStatus set), a server.
  using ClientList = IntrusiveList<Client, &Client::pool_node>;
  ClientList welcome_waiting_;
  ClientList waiting_;
  ClientList replication_waiting_;  // replication clients waiting for a slot
  ClientList pin_waiting_;          // wait_for_pin()
  std::deque<std::function<void(Server*)>> pooler_waiting_;  // request_for_pooler()
  void fail_pooler_waiters();
};

}  // namespace pgsluice
