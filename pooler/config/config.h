// The configuration: a pgbouncer.ini-compatible file ([databases], [users], [peers], and the main
// section [pgsluice] or [pgbouncer]) parsed by inih into one validated, immutable snapshot. An
// error names the file, the line and the key; a PgBouncer key pgsluice does not implement yet is a
// warning.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "pooler/config/session_policy.h"

namespace pgsluice {
// Half the CPUs the process may use (usable_cpus: affinity and cgroup quota), at least 1 and at
// most 64 (SharedLimits keeps a bit per worker).
int default_workers();
}  // namespace pgsluice

namespace pgsluice {

// statement: a server goes back to the pool after every statement (ReadyForQuery 'I'); a
// transaction block is refused, as in PgBouncer.
enum class PoolMode { session, transaction, statement };
// Whether servers go back to the pool while their client stays (transaction and statement
// mode): what a session leaves on a server then reaches other clients.
constexpr bool shares_servers(PoolMode mode) {
  return mode != PoolMode::session;
}
// hba: each connection's method comes from auth_hba_file (auth_hba.h).
enum class AuthType { trust, plain, md5, scram_sha_256, cert, hba };
// libpq's sslmode values, as PgBouncer's client_tls_sslmode and server_tls_sslmode take them.
enum class SslMode { disable, allow, prefer, require, verify_ca, verify_full };
// libpq's target_session_attrs (14+), checked at every server login (core/host_roles.h).
enum class TargetSessionAttrs { any, read_write, read_only, primary, standby, prefer_standby };
// How a multi-host [databases] entry spreads new servers: PgBouncer's round-robin (its
// default), libpq's random, or disable (the first usable host, in order).
enum class LoadBalanceHosts { round_robin, random, disable };

std::string_view to_string(PoolMode mode);
std::string_view to_string(TargetSessionAttrs attrs);
std::string_view to_string(LoadBalanceHosts mode);
std::string_view to_string(AuthType type);
std::string_view to_string(SslMode mode);

// One [databases] line: `name = host=… port=… dbname=… user=… password=… pool_size=…
// pool_mode=…`. Unset optional keys fall back to the main section.
struct DatabaseEntry {
  std::string name;  // the name clients connect to ("*" for the fallback entry)
  std::string
      host;  // empty: the Unix socket in unix_socket_dir of the server ("/var/run/postgresql")
  int port = 5432;
  // libpq's multi-host form: host=h1,h2,h3 (TCP names, addresses or socket directories) with
  // port=p1,p2,p3 or one port for all; `ports` holds the list when it has more than one.
  std::vector<int> ports;
  TargetSessionAttrs target_session_attrs = TargetSessionAttrs::any;
  LoadBalanceHosts load_balance_hosts = LoadBalanceHosts::round_robin;
  std::string dbname;  // empty: same as name (or the client's database for "*")
  std::string user;    // empty: the client's user
  std::string password;
  std::optional<int> pool_size;
  // Pool limits and lifecycle (pool_limits.h); unset: the main section's value.
  std::optional<int> min_pool_size;
  std::optional<int> reserve_pool;
  std::optional<int> max_db_connections;
  std::optional<std::chrono::milliseconds> server_lifetime;
  std::optional<int> max_db_client_connections;  // client_limits.h; unset: the main section's
  std::optional<PoolMode> pool_mode;
  // PgBouncer 1.26's per-database query_wait_timeout (0 disables); unset (or -1): the [users]
  // line's, else the main section's. See Config::query_wait_timeout_for.
  std::optional<std::chrono::milliseconds> query_wait_timeout;
  std::string client_encoding;
  std::string datestyle;
  std::string timezone;
  std::string application_name;
  std::string connect_query;
  // auth_query lookups for clients of this database (auth_query.h); empty: the main section's.
  std::string auth_user;
  std::string auth_query;
  std::string auth_dbname;
  std::optional<SessionPolicy> session_state_action;
  int line = 0;  // where it was defined, for messages
};

// One [users] line: `name = pool_mode=…`.
struct UserEntry {
  std::string name;
  std::optional<PoolMode> pool_mode;
  std::optional<SessionPolicy> session_state_action;
  std::optional<int> max_user_connections;  // unset: the main section's
  // PgBouncer 1.25's [users] pool_size / reserve_pool_size: when set they win over the
  // database's (pool_pool_size, pool_res_pool_size) for every pool whose server user this is.
  std::optional<int> pool_size;
  std::optional<int> reserve_pool_size;
  // Client timeouts and limit of this user's clients (client_timeouts.h, client_limits.h);
  // unset: the main section's.
  std::optional<std::chrono::milliseconds> client_idle_timeout;
  std::optional<std::chrono::milliseconds> query_timeout;
  std::optional<std::chrono::milliseconds> idle_transaction_timeout;
  std::optional<std::chrono::milliseconds> transaction_timeout;
  // PgBouncer 1.26's: wins over the database's and the main section's (0 disables).
  std::optional<std::chrono::milliseconds> query_wait_timeout;
  std::optional<int> max_user_client_connections;
  int line = 0;
};

// One [peers] line: `peer_id = host=… port=… pool_size=…`, another process of the peer group that
// cancel requests carrying its peer_id are forwarded to (core/peer_forwarder.h).
struct PeerEntry {
  int id = 0;        // 1..65535, the peer's own peer_id
  std::string host;  // an IP address or a host name, or a Unix socket directory ('/…')
  int port = 6432;   // PgBouncer's default for peers
  std::optional<int> pool_size;  // cancels in flight to it at once; unset: default_pool_size
  int line = 0;
};

using Duration = std::chrono::milliseconds;

// TLS towards clients (client_tls_*: pgsluice is the TLS server) or towards PostgreSQL
// (server_tls_*: pgsluice is the TLS client). The files are read when the SSL_CTX is built
// (tls_context.h), not here.
struct TlsSettings {
  SslMode sslmode = SslMode::disable;
  std::string key_file;
  std::string cert_file;
  std::string ca_file;
  std::string protocols = "secure";  // PgBouncer's: secure, all, legacy, or tlsv1.2,tlsv1.3
  std::string ciphers = "fast";      // PgBouncer's names, or an OpenSSL cipher list
  // *_tls13_ciphers: the TLS 1.3 suites, an OpenSSL list (TLS_AES_256_GCM_SHA384:…); empty:
  // OpenSSL's default ones (PgBouncer's code does that, whatever its docs say of *_tls_ciphers).
  std::string tls13_ciphers;
  // client_tls_ecdhcurve (the accept side only): the groups of the key exchange, an OpenSSL list
  // (prime256v1, secp384r1, X25519, P-256:X25519, …); auto or none: OpenSSL's default ones, as
  // PgBouncer's auto and none come to with OpenSSL 3.
  std::string ecdhcurve = "auto";
  // client_tls_dheparams (the accept side only): auto offers the DHE key exchange of TLS 1.2
  // with OpenSSL's parameters (2048 bits and up), none does not.
  std::string dheparams = "auto";

  friend bool operator==(const TlsSettings&, const TlsSettings&) = default;
};

struct Settings {
  // Comma-separated IP addresses and host names, resolved at startup (every address a name has);
  // "*" = every IPv4 and IPv6 address.
  std::string listen_addr = "127.0.0.1";
  int listen_port = 6432;
  std::string unix_socket_dir;    // empty: no Unix socket
  int unix_socket_mode = 0777;    // the socket file's mode
  std::string unix_socket_group;  // the socket file's group (name or gid); empty: unchanged
  // listen(2)'s backlog (PgBouncer: 128; pgsluice's 4096 keeps a burst of 1,000 logins queued).
  int listen_backlog = 4096;
  // TCP_DEFER_ACCEPT on the TCP listeners: a connection is accepted once its first bytes came.
  bool tcp_defer_accept = true;
  // Client and server TCP sockets (PgBouncer's keys; 0: the kernel's default): SO_KEEPALIVE, its
  // idle time, interval (seconds) and probe count, TCP_USER_TIMEOUT (ms), SO_SNDBUF/SO_RCVBUF.
  bool tcp_keepalive = true;
  int tcp_keepidle = 0;
  int tcp_keepintvl = 0;
  int tcp_keepcnt = 0;
  int tcp_user_timeout = 0;
  int tcp_socket_buffer = 0;
  AuthType auth_type = AuthType::md5;
  std::string auth_file;
  std::string auth_hba_file;    // pg_hba.conf format, read under auth_type = hba (auth_hba.h)
  std::string auth_ident_file;  // pg_ident.conf format: the maps of map= hba rules (ident.h)
  // A user without an auth_file entry: its secret is looked up on the server with auth_query,
  // logged in as auth_user (whose password is in auth_file), in the client's database or in
  // auth_dbname's; results are kept auth_query_cache_ttl (0: looked up at every login).
  std::string auth_user;
  std::string auth_query =
      "SELECT rolname, CASE WHEN rolvaliduntil < now() THEN NULL ELSE rolpassword END FROM "
      "pg_authid WHERE rolname=$1 AND rolcanlogin";
  std::string auth_dbname;
  Duration auth_query_cache_ttl = std::chrono::seconds(60);
  PoolMode pool_mode = PoolMode::session;
  int default_pool_size = 20;
  int max_client_conn = 100;
  std::string server_reset_query = "DISCARD ALL";
  Duration query_wait_timeout = std::chrono::seconds(120);  // 0 disables
  // A client queued this long for a server is told so, once per wait (PgBouncer's NOTICE);
  // 0 disables.
  Duration query_wait_notify = std::chrono::seconds(5);
  Duration server_connect_timeout = std::chrono::seconds(15);
  Duration server_login_retry = std::chrono::seconds(15);
  // The newest protocol minor version asked of servers (pgsluice's key, libpq 18's
  // max_protocol_version): 2 logs in with 3.2 (PostgreSQL 18's longer cancel keys; older servers
  // answer NegotiateProtocolVersion and speak 3.0), 0 with 3.0 for servers or poolers that cannot
  // negotiate.
  int server_max_protocol_minor = 2;
  // server_tls_sslnegotiation (pgsluice's key, libpq 17's sslnegotiation): false "postgres" asks
  // with an SSLRequest first; true "direct" starts the TLS handshake at once (ALPN
  // "postgresql"), which PostgreSQL 17+ accepts and saves a round trip per server login. Needs
  // server_tls_sslmode require or stronger, as libpq.
  bool server_tls_direct = false;
  Duration client_login_timeout = std::chrono::seconds(60);
  // Pool limits and server lifecycle (PgBouncer's names, defaults and meanings;
  // docs/operations.md).
  int min_pool_size = 0;
  int reserve_pool_size = 0;
  Duration reserve_pool_timeout = std::chrono::seconds(5);  // 0: the reserve is never used
  int max_db_connections = 0;                               // 0: unlimited
  int max_user_connections = 0;                             // 0: unlimited
  Duration server_lifetime = std::chrono::seconds(3600);  // staggered per server, see pool_limits.h
  Duration server_idle_timeout = std::chrono::seconds(600);  // 0 disables
  // PgBouncer 1.26's (#1491): a pool with no client and no server on any worker for this long
  // is freed, with its statistics (so it is off by default). 0 disables.
  Duration pool_idle_timeout{0};
  // PgBouncer 1.25's default, `<empty>`: the check is an empty query (the cheapest round trip;
  // PostgreSQL answers EmptyQueryResponse). An empty value turns checks off.
  std::string server_check_query = "<empty>";
  Duration server_check_delay = std::chrono::seconds(30);
  // How often the idle servers of a pool whose target_session_attrs is not `any` are asked their
  // role (pgsluice's own key; pool_maintenance.cc): a promotion or a demotion closes them
  // without waiting for traffic. 0: only at login and at release.
  Duration server_role_check_interval = std::chrono::seconds(5);
  bool server_reset_query_always = false;
  // Idle servers are used in turn (a queue) instead of most recently used first (a stack), so
  // that a round-robin DNS name or load balancer behind one database gets an even load
  // (PgBouncer's).
  bool server_round_robin = false;
  bool server_fast_close = false;
  // Client timeouts (client_timeouts.h), PgBouncer's names and meanings; 0 disables.
  Duration client_idle_timeout{0};
  Duration query_timeout{0};
  Duration idle_transaction_timeout{0};
  Duration transaction_timeout{0};
  Duration cancel_wait_timeout = std::chrono::seconds(10);
  // SIGINT / SHUTDOWN WAIT_FOR_SERVERS: how long running transactions may take to finish
  // before pgsluice exits anyway (pgsluice's own key; PgBouncer waits forever). 0: no bound.
  Duration shutdown_timeout = std::chrono::seconds(30);
  int max_db_client_connections = 0;    // per database, 0: no limit
  int max_user_client_connections = 0;  // per user, 0: no limit
  bool so_reuseport = false;            // SO_REUSEPORT on the TCP listeners
  // This process's id in its peer group (PgBouncer's; 0: peering off): cancel keys carry it, and
  // a cancel request with another peer's id goes to that [peers] entry (core/cancel_key.h).
  int peer_id = 0;
  std::vector<std::string> ignore_startup_parameters;
  // PgBouncer's list of parameters it keeps for each client besides its five. pgsluice keeps
  // every startup parameter and every parameter the server reports for each client already
  // (session_state/params.h): the list changes nothing, it is taken so that a PgBouncer file
  // starts without a warning, and shown by SHOW CONFIG.
  std::vector<std::string> track_extra_parameters = {"IntervalStyle"};
  bool application_name_add_host = false;
  uint32_t max_packet_size = 2147483647;
  // The largest SCRAM iteration count used (a server's, a verifier's): protocol/scram.h.
  int scram_max_iterations = 10'000'000;
  // The iteration count of the SCRAM verifiers pgsluice makes itself (PgBouncer's): for a
  // plain-text auth_file password, and the made-up one of a user without a secret, whose count
  // must not tell it apart.
  int scram_iterations = 4096;
  // PgBouncer's: the simple Query protocol is refused (FATAL 08P01 "PQexec disallowed", the
  // client closed), so that a client can send one statement per message only.
  bool disable_pqexec = false;
  // PgBouncer 1.26's: a NOTICE with this text in every client's greeting, so that people see
  // they went through the pooler (core/login_notice.h). Empty: none.
  std::string login_notify_message;
  bool log_connections = true;
  bool log_disconnections = true;
  bool log_pooler_errors = true;
  std::string logfile;  // empty: stderr
  // The log to syslog too (PgBouncer's keys and defaults, but the ident is this program's name):
  // lines of level info and above, under the ident and facility (auth, authpriv, daemon, user,
  // local0 to local7).
  bool syslog = false;
  std::string syslog_ident = "pgsluice";
  std::string syslog_facility = "daemon";
  std::string pidfile;
  // PgBouncer's: started as root, become this user once listening (ops/switch_user.h).
  std::string user;
  std::vector<std::string> admin_users;
  std::vector<std::string> stats_users;
  // Worker threads (pgsluice's key): default_workers() unless set; `auto` or 0 mean the same.
  int workers = default_workers();
  // Placement (pgsluice's key): while the process has at most this many clients, a new client
  // goes to the first worker; beyond, to the worker with the fewest. 0 (the default) spreads
  // from the first client; a few clients on one thread keep the pooler on one core. Measured:
  // docs/design.md, "Worker threads".
  int spread_clients_above = 0;
  // pgsluice's key: a loop turn's sends go to the kernel in one io_uring submission where the
  // kernel allows it (net/send_ring.h); off, or where it does not, one send() each.
  bool io_uring = true;
  // Protocol-level prepared statements kept per server in transaction mode; 0 turns the
  // rewriting off (and lets "prepared statement does not exist" through, as PgBouncer < 1.21).
  int max_prepared_statements = 200;
  std::string verbose_level = "info";  // trace, debug, info, warn, error
  // PgBouncer's verbose, a count of -v: each one a level more than verbose_level (1: debug, 2:
  // trace). Unset: the command line's -v count; set (the file, SET), it replaces that count.
  std::optional<int> verbose;
  Duration stats_period = std::chrono::seconds(60);  // SHOW STATS averages (PgBouncer's)
  bool log_stats = true;  // the averages logged every stats_period (PgBouncer's line)
  std::string metrics_addr = "127.0.0.1";  // the Prometheus endpoint
  int metrics_port = 0;                    // 0: no /metrics endpoint
  TlsSettings client_tls;                  // client_tls_*: default disable
  TlsSettings server_tls{.sslmode = SslMode::prefer,
                         .key_file = {},
                         .cert_file = {},
                         .ca_file = {},
                         .protocols = "secure",
                         .ciphers = "fast",
                         .tls13_ciphers = {},
                         .ecdhcurve = "auto",
                         .dheparams = "auto"};  // server_tls_*: PgBouncer's default
  // Unset: SessionPolicy::transaction_default() in transaction mode, off in session mode (where
  // nothing leaks between clients).
  std::optional<SessionPolicy> session_state_action;
  // Servers of a pool the pin action may not take: a pin that would leave fewer unpinned
  // servers than this is refused (0A000), so other clients are always served.
  int session_state_pin_reserve = 1;
  // The relay action for LISTEN: the bytes of notifications that may wait for one client (held
  // while it is in a transaction, or written and not yet read); beyond it the client is closed
  // with 54000, so that one client that does not read costs bounded memory and slows nobody.
  int session_state_relay_queue = 8 * 1024 * 1024;
  // Compare tracked with real session state after a release (session_verify.h); `sample`
  // checks one release in session_state_verify_sample.
  SessionVerifyMode session_state_verify = SessionVerifyMode::off;
  int session_state_verify_sample = 100;
  // A client idle in a transaction on its server longer than this is a `long_hold` finding.
  Duration session_state_long_hold = std::chrono::seconds(10);  // 0 disables
  std::string leak_report_file;  // the JSON leak report, written at shutdown and by LEAK REPORT
};

struct Config {
  std::string path;  // the file it was read from
  Settings settings;
  std::map<std::string, DatabaseEntry> databases;  // without the fallback
  std::optional<DatabaseEntry> fallback_database;  // the "*" entry
  std::map<std::string, UserEntry> users;
  std::map<int, PeerEntry> peers;     // by peer id
  std::vector<std::string> warnings;  // "file:line: key 'x' is a PgBouncer setting …"

  // The entry for a database a client asks for: its own line, or the fallback made concrete.
  [[nodiscard]] std::optional<DatabaseEntry> find_database(const std::string& name) const;
  [[nodiscard]] PoolMode pool_mode_for(const DatabaseEntry& db, const std::string& user) const;
  [[nodiscard]] int pool_size_for(const DatabaseEntry& db) const;
  // A peer's pool_size, else default_pool_size (as PgBouncer).
  [[nodiscard]] int pool_size_for(const PeerEntry& peer) const;
  // A pool's: the server user's [users] pool_size / reserve_pool_size first, as PgBouncer.
  [[nodiscard]] int pool_size_for(const DatabaseEntry& db, const std::string& user) const;
  [[nodiscard]] int reserve_pool_for(const DatabaseEntry& db, const std::string& user) const;
  // Per-database values over the main section's (0 limits: unlimited).
  [[nodiscard]] int min_pool_size_for(const DatabaseEntry& db) const;
  [[nodiscard]] int reserve_pool_for(const DatabaseEntry& db) const;
  [[nodiscard]] int max_db_connections_for(const DatabaseEntry& db) const {
    return db.max_db_connections.value_or(settings.max_db_connections);
  }
  // Inline: asked at every release of a server (Pool::on_server_idle).
  [[nodiscard]] Duration server_lifetime_for(const DatabaseEntry& db) const {
    return db.server_lifetime.value_or(settings.server_lifetime);
  }
  // The [users] entry's max_user_connections, else the main section's (0: unlimited).
  [[nodiscard]] int max_user_connections_for(const std::string& user) const;
  // max_db_client_connections / max_user_client_connections of a database or user: its own
  // value when above 0, else the main section's (PgBouncer's database_max_client_connections
  // and user_client_max_connections); 0: no limit.
  [[nodiscard]] int max_db_client_connections_for(const std::string& db) const;
  [[nodiscard]] int max_user_client_connections_for(const std::string& user) const;
  // How long a client of `db` logged in as `user` may wait for a server (0: without a limit):
  // the [users] line's query_wait_timeout, else the [databases] line's, else the main
  // section's, in PgBouncer's order (its janitor.c).
  [[nodiscard]] Duration query_wait_timeout_for(const DatabaseEntry& db,
                                                const std::string& user) const;
  // The most specific session_state_action: the user's, the database's, the main section's,
  // else the pool mode's default.
  [[nodiscard]] SessionPolicy session_policy_for(const DatabaseEntry& db, const std::string& user,
                                                 PoolMode mode) const;
};

struct ConfigError {
  std::string file;
  int line = 0;  // 0: not about one line (a missing file)
  std::string key;
  std::string message;
  [[nodiscard]] std::string to_string() const;  // "file:line: key: message"
};

struct ConfigLoadResult {
  std::shared_ptr<const Config> config;  // null when errors is not empty
  std::vector<ConfigError> errors;
};

ConfigLoadResult load_config_file(const std::string& path);
// Parses `text` as if it were the file `name` (tests, and an inline config).
ConfigLoadResult load_config_string(const std::string& text, const std::string& name);

// One main-section `key = value`, parsed and checked as in the file (the admin console's SET).
// Returns an error message, empty on success; "unknown setting" for a key that is not one.
std::string apply_setting(Settings& settings, std::string_view key, std::string_view value);

// Whether servers logged in under `was` would log in differently under `now` (server_tls_*,
// server_tls_sslnegotiation): not when TLS towards the servers is off in both (PgBouncer's rule).
bool server_tls_changed(const Settings& was, const Settings& now);

}  // namespace pgsluice
