// The main-section settings, one row each; see settings_table.h.
#include "pooler/config/settings_table.h"

#include <algorithm>
#include <array>
#include <cstdint>
#include <utility>

#include "pooler/config/value_parsers.h"

namespace pgsluice {

namespace {

// ---- a Settings field bound to the parser and printer of its kind of value --------------------

struct Value {
  std::function<std::string(std::string_view, Settings&)> parse;
  std::function<std::string(const Settings&)> print;
};

template <typename T>
using Field = T Settings::*;

// `parse(text, T&)` and `print(const T&)` applied to the field.
template <typename T, typename Parse, typename Print>
Value typed(Field<T> field, Parse parse, Print print) {
  return {[field, parse](std::string_view v, Settings& s) { return parse(v, s.*field); },
          [field, print](const Settings& s) { return print(s.*field); }};
}

std::string print_text(const std::string& s) {
  return s;
}

template <typename Int>
std::string print_int(Int n) {
  return std::to_string(n);
}

// Taken as written (the file's value is already trimmed; SET's is as given).
Value string_value(Field<std::string> field) {
  return typed(
      field,
      [](std::string_view v, std::string& out) {
        out = std::string(v);
        return std::string();
      },
      print_text);
}

template <typename Int>
Value int_value(Field<Int> field, Int min, Int max) {
  return typed(
      field, [min, max](std::string_view v, Int& out) { return parse_int(v, min, max, out); },
      print_int<Int>);
}

Value bool_value(Field<bool> field) {
  return typed(field, parse_bool, print_bool);
}

Value duration_value(Field<Duration> field) {
  return typed(field, parse_duration, print_seconds);
}

Value list_value(Field<std::vector<std::string>> field) {
  return typed(
      field,
      [](std::string_view v, std::vector<std::string>& out) {
        out = split_list(v);
        return std::string();
      },
      join_list);
}

// An enum printed by its to_string().
template <typename Enum>
Value enum_value(Field<Enum> field, std::string (*parse)(std::string_view, Enum&)) {
  return typed(field, parse, [](Enum e) { return std::string(to_string(e)); });
}

// client_tls_* and server_tls_*: the same six keys for each side; file names and cipher lists
// are trimmed.
Value tls_string(Field<TlsSettings> side, std::string TlsSettings::*field) {
  return {[side, field](std::string_view v, Settings& s) {
            (s.*side).*field = std::string(trim(v));
            return std::string();
          },
          [side, field](const Settings& s) { return (s.*side).*field; }};
}

Value tls_sslmode(Field<TlsSettings> side) {
  return {[side](std::string_view v, Settings& s) { return parse_sslmode(v, (s.*side).sslmode); },
          [side](const Settings& s) { return std::string(to_string((s.*side).sslmode)); }};
}

// Unset until the file sets it: the pool mode's default applies (Config::session_policy_for).
Value session_policy_value(Field<std::optional<SessionPolicy>> field) {
  return typed(
      field,
      [](std::string_view v, std::optional<SessionPolicy>& out) {
        SessionPolicy policy;
        std::string err = parse_session_policy(v, policy);
        if (err.empty()) out = policy;
        return err;
      },
      [](const std::optional<SessionPolicy>& p) {
        return p ? format_session_policy(*p) : std::string();
      });
}

// ---- the rows -----------------------------------------------------------------------------------

constexpr SettingApply kOnline = SettingApply::online;
constexpr SettingApply kReload = SettingApply::reload;
constexpr SettingApply kRestart = SettingApply::restart;
constexpr SettingOrigin kPgBouncer = SettingOrigin::pgbouncer;
constexpr SettingOrigin kOwn = SettingOrigin::pgsluice;
constexpr bool kShown = true;
constexpr bool kHidden = false;  // not in SHOW CONFIG (see SettingDef::in_show_config)

SettingDef row(std::string_view key, Value value, SettingApply apply = kOnline,
               SettingOrigin origin = kPgBouncer, bool shown = kShown) {
  return {key, std::move(value.parse), std::move(value.print), apply, origin, shown};
}

constexpr int kMillion = 1'000'000;
constexpr int kTenMillion = 10'000'000;

// The six TLS settings of one side (`keys`: its ca_file, cert_file, ciphers, key_file,
// protocols, sslmode). TLS contexts are built at start and again at RELOAD (tls_context.h).
void add_tls_rows(std::vector<SettingDef>& rows, Field<TlsSettings> side,
                  const std::array<std::string_view, 6>& keys) {
  const std::array<std::string TlsSettings::*, 5> fields = {
      &TlsSettings::ca_file, &TlsSettings::cert_file, &TlsSettings::ciphers, &TlsSettings::key_file,
      &TlsSettings::protocols};
  for (size_t i = 0; i < fields.size(); ++i) {
    rows.push_back(row(keys[i], tls_string(side, fields[i]), kReload, kPgBouncer, kHidden));
  }
  rows.push_back(row(keys[5], tls_sslmode(side), kReload, kPgBouncer, kHidden));
}

void add_both_sides_tls_rows(std::vector<SettingDef>& rows) {
  using S = Settings;
  rows.push_back(row("client_tls13_ciphers",
                     tls_string(&S::client_tls, &TlsSettings::tls13_ciphers), kReload, kPgBouncer,
                     kHidden));
  rows.push_back(row(
      "client_tls_dheparams",
      {[](std::string_view v, Settings& s) { return parse_dheparams(v, s.client_tls.dheparams); },
       [](const Settings& s) { return s.client_tls.dheparams; }},
      kReload, kPgBouncer, kHidden));
  rows.push_back(row("client_tls_ecdhcurve", tls_string(&S::client_tls, &TlsSettings::ecdhcurve),
                     kReload, kPgBouncer, kHidden));
  rows.push_back(row("server_tls13_ciphers",
                     tls_string(&S::server_tls, &TlsSettings::tls13_ciphers), kReload, kPgBouncer,
                     kHidden));
  add_tls_rows(rows, &S::client_tls,
               {"client_tls_ca_file", "client_tls_cert_file", "client_tls_ciphers",
                "client_tls_key_file", "client_tls_protocols", "client_tls_sslmode"});
  add_tls_rows(rows, &S::server_tls,
               {"server_tls_ca_file", "server_tls_cert_file", "server_tls_ciphers",
                "server_tls_key_file", "server_tls_protocols", "server_tls_sslmode"});
}

// The listening sockets' and the TCP connections' options (PgBouncer's keys and meanings).
void add_socket_rows(std::vector<SettingDef>& rows) {
  using S = Settings;
  rows.push_back(row("listen_backlog", int_value(&S::listen_backlog, 1, 65535), kRestart));
  // Read when a socket is made: a client's at accept, a server's before its connect; the
  // listeners' TCP_DEFER_ACCEPT is set again when the value changes (Worker::apply_config).
  rows.push_back(row("tcp_defer_accept", bool_value(&S::tcp_defer_accept)));
  rows.push_back(row("tcp_keepalive", bool_value(&S::tcp_keepalive)));
  // Linux's bounds (TCP_KEEPIDLE/INTVL 32767 s, TCP_KEEPCNT 127): a value the kernel would refuse
  // is a config error here rather than a failed connection each time.
  rows.push_back(row("tcp_keepcnt", int_value(&S::tcp_keepcnt, 0, 127)));
  rows.push_back(row("tcp_keepidle", int_value(&S::tcp_keepidle, 0, 32767)));
  rows.push_back(row("tcp_keepintvl", int_value(&S::tcp_keepintvl, 0, 32767)));
  rows.push_back(row("tcp_socket_buffer", int_value(&S::tcp_socket_buffer, 0, 1 << 30)));
  rows.push_back(row("tcp_user_timeout", int_value(&S::tcp_user_timeout, 0, 2147483647)));
  rows.push_back(row("unix_socket_group", string_value(&S::unix_socket_group), kRestart));
  rows.push_back(row("unix_socket_mode",
                     typed(&S::unix_socket_mode, parse_file_mode, print_file_mode), kRestart));
}

// What is logged and where (PgBouncer's keys; verbose and verbose_level are with the rest).
void add_logging_rows(std::vector<SettingDef>& rows) {
  using S = Settings;
  rows.insert(rows.end(), {row("log_connections", bool_value(&S::log_connections)),
                           row("log_disconnections", bool_value(&S::log_disconnections)),
                           row("log_pooler_errors", bool_value(&S::log_pooler_errors)),
                           row("log_stats", bool_value(&S::log_stats)),
                           row("logfile", string_value(&S::logfile), kRestart),
                           // Online: the syslog sink changes in place (base/syslog_sink.h).
                           row("syslog", bool_value(&S::syslog)),
                           row("syslog_facility",
                               typed(&S::syslog_facility, parse_syslog_facility, print_text)),
                           row("syslog_ident", string_value(&S::syslog_ident))});
}

// pgsluice's session-state checks (session_policy.h), all its own.
void add_session_state_rows(std::vector<SettingDef>& rows) {
  using S = Settings;
  rows.insert(
      rows.end(),
      {row("session_state_action", session_policy_value(&S::session_state_action), kReload, kOwn,
           kHidden),
       row("session_state_long_hold", duration_value(&S::session_state_long_hold), kOnline, kOwn),
       row("session_state_pin_reserve", int_value(&S::session_state_pin_reserve, 0, 100'000),
           kOnline, kOwn),
       row("session_state_relay_queue",
           int_value(&S::session_state_relay_queue, 16 * 1024, 1024 * 1024 * 1024), kOnline, kOwn),
       row("session_state_verify", enum_value(&S::session_state_verify, parse_session_verify),
           kOnline, kOwn),
       row("session_state_verify_sample",
           int_value(&S::session_state_verify_sample, 1, 1'000'000'000), kOnline, kOwn)});
}

// How long pools and their servers live (docs/operations.md, "Server lifecycle").
void add_lifetime_rows(std::vector<SettingDef>& rows) {
  using S = Settings;
  rows.insert(rows.end(),
              {row("pool_idle_timeout", duration_value(&S::pool_idle_timeout)),  // PgBouncer 1.26
               row("server_idle_timeout", duration_value(&S::server_idle_timeout)),
               row("server_lifetime", duration_value(&S::server_lifetime))});
}

std::vector<SettingDef> make_table() {
  using S = Settings;
  std::vector<SettingDef> rows = {
      row("admin_users", list_value(&S::admin_users)),
      row("application_name_add_host", bool_value(&S::application_name_add_host)),
      row("auth_dbname", string_value(&S::auth_dbname)),
      row("auth_file", string_value(&S::auth_file)),
      // Read at start and RELOAD only (the rules and maps are loaded with the auth_file).
      row("auth_hba_file", string_value(&S::auth_hba_file), kReload),
      row("auth_ident_file", string_value(&S::auth_ident_file), kReload),
      row("auth_query", string_value(&S::auth_query)),
      row("auth_query_cache_ttl", duration_value(&S::auth_query_cache_ttl), kOnline, kOwn),
      row("auth_type", enum_value(&S::auth_type, parse_auth_type)),
      row("auth_user", string_value(&S::auth_user)),
      row("cancel_wait_timeout", duration_value(&S::cancel_wait_timeout)),
      row("client_idle_timeout", duration_value(&S::client_idle_timeout)),
      row("client_login_timeout", duration_value(&S::client_login_timeout)),
      row("default_pool_size", int_value(&S::default_pool_size, 1, kMillion)),
      // Read at each message, but PgBouncer applies it at startup only.
      row("disable_pqexec", bool_value(&S::disable_pqexec), kRestart),
      row("idle_transaction_timeout", duration_value(&S::idle_transaction_timeout)),
      row("ignore_startup_parameters", list_value(&S::ignore_startup_parameters)),
      row("leak_report_file", string_value(&S::leak_report_file), kReload, kOwn),
      row("listen_addr", string_value(&S::listen_addr), kRestart),
      row("listen_port", int_value(&S::listen_port, 1, 65535), kRestart),
      row("login_notify_message", string_value(&S::login_notify_message)),  // at each login
      row("max_client_conn", int_value(&S::max_client_conn, 1, kTenMillion)),
      row("max_db_client_connections", int_value(&S::max_db_client_connections, 0, kTenMillion)),
      row("max_db_connections", int_value(&S::max_db_connections, 0, kMillion)),
      // Read when a client connects.
      row("max_packet_size", int_value<uint32_t>(&S::max_packet_size, 1, UINT32_MAX), kReload),
      // Read when a server connects.
      row("max_prepared_statements", int_value(&S::max_prepared_statements, 0, kMillion), kReload,
          kPgBouncer, kHidden),
      row("max_user_client_connections",
          int_value(&S::max_user_client_connections, 0, kTenMillion)),
      row("max_user_connections", int_value(&S::max_user_connections, 0, kMillion)),
      row("metrics_addr", string_value(&S::metrics_addr), kRestart, kOwn),
      row("metrics_port", int_value(&S::metrics_port, 0, 65535), kRestart, kOwn),
      row("min_pool_size", int_value(&S::min_pool_size, 0, kMillion)),
      // Read when a client logs in (its cancel key) and at each cancel request.
      row("peer_id", int_value(&S::peer_id, 0, 65535)),
      row("pidfile", string_value(&S::pidfile), kRestart),
      row("pool_mode", enum_value(&S::pool_mode, parse_pool_mode)),
      row("query_timeout", duration_value(&S::query_timeout)),
      row("query_wait_notify", duration_value(&S::query_wait_notify)),
      row("query_wait_timeout", duration_value(&S::query_wait_timeout)),
      row("reserve_pool_size", int_value(&S::reserve_pool_size, 0, kMillion)),
      row("reserve_pool_timeout", duration_value(&S::reserve_pool_timeout)),
      row("scram_iterations", int_value(&S::scram_iterations, 1, kTenMillion * 100)),
      row("scram_max_iterations", int_value(&S::scram_max_iterations, 1, kTenMillion * 100),
          kReload, kOwn),
      row("server_check_delay", duration_value(&S::server_check_delay)),
      row("server_check_query", string_value(&S::server_check_query)),
      row("server_connect_timeout", duration_value(&S::server_connect_timeout)),
      row("server_fast_close", bool_value(&S::server_fast_close)),
      row("server_login_retry", duration_value(&S::server_login_retry)),
      // Read when a server connects.
      row("server_max_protocol_version",
          typed(&S::server_max_protocol_minor, parse_protocol_version, print_protocol_version),
          kOnline, kOwn),
      row("server_reset_query", string_value(&S::server_reset_query)),
      row("server_round_robin", bool_value(&S::server_round_robin)),
      row("server_role_check_interval", duration_value(&S::server_role_check_interval), kOnline,
          kOwn),
      row("server_reset_query_always", bool_value(&S::server_reset_query_always)),
      row("server_tls_sslnegotiation",
          typed(&S::server_tls_direct, parse_ssl_negotiation,
                [](bool direct) { return std::string(direct ? "direct" : "postgres"); }),
          kReload, kOwn),
      // SIGINT / SHUTDOWN WAIT_FOR_SERVERS' bound; PgBouncer waits for ever.
      row("shutdown_timeout", duration_value(&S::shutdown_timeout), kOnline, kOwn),
      row("so_reuseport", bool_value(&S::so_reuseport), kRestart),
      // Each worker opens its ring when it starts.
      row("io_uring", bool_value(&S::io_uring), kRestart, kOwn),
      row("spread_clients_above", int_value(&S::spread_clients_above, 0, 1000000), kOnline, kOwn),
      row("stats_period", duration_value(&S::stats_period)),
      row("stats_users", list_value(&S::stats_users)),
      // Applies at startup in PgBouncer; pgsluice needs nothing of it (config.h).
      row("track_extra_parameters", list_value(&S::track_extra_parameters), kRestart),
      row("transaction_timeout", duration_value(&S::transaction_timeout)),
      row("unix_socket_dir", string_value(&S::unix_socket_dir), kRestart),
      row("user", string_value(&S::user), kRestart),
      // Unset until the file or SET gives it: printed as PgBouncer's default, 0.
      row("verbose", typed(&S::verbose, parse_verbose_count, print_verbose_count)),
      row("verbose_level", typed(&S::verbose_level, parse_verbose_level, print_text), kOnline,
          kOwn),
      row("workers", typed(&S::workers, parse_workers, print_int<int>), kRestart, kOwn),
  };
  add_socket_rows(rows);
  add_logging_rows(rows);
  add_both_sides_tls_rows(rows);
  add_session_state_rows(rows);
  add_lifetime_rows(rows);
  // find_setting searches the keys in order.
  std::sort(rows.begin(), rows.end(),
            [](const SettingDef& a, const SettingDef& b) { return a.key < b.key; });
  return rows;
}

// PgBouncer 1.25's main-section keys that pgsluice does not implement yet, sorted.
constexpr std::string_view kPgBouncerOnlyKeys[] = {
    "auth_ldap_options", "autodb_idle_timeout",   "conffile",     "dns_max_ttl",
    "dns_nxdomain_ttl",  "dns_zone_check_period", "job_name",     "pkt_buf",
    "resolv_conf",       "sbuf_loopcnt",          "service_name", "suspend_timeout",
};

}  // namespace

std::span<const SettingDef> setting_table() {
  static const std::vector<SettingDef> table = make_table();
  return table;
}

const SettingDef* find_setting(std::string_view key) {
  const std::span<const SettingDef> table = setting_table();
  auto it = std::lower_bound(table.begin(), table.end(), key,
                             [](const SettingDef& d, std::string_view k) { return d.key < k; });
  return it != table.end() && it->key == key ? &*it : nullptr;
}

std::span<const std::string_view> pgbouncer_only_keys() {
  return kPgBouncerOnlyKeys;
}

bool is_pgbouncer_only_key(std::string_view key) {
  return std::binary_search(std::begin(kPgBouncerOnlyKeys), std::end(kPgBouncerOnlyKeys), key);
}

std::vector<SettingRow> describe_settings(const Config& config) {
  const Settings defaults;
  std::vector<SettingRow> rows;
  for (const SettingDef& d : setting_table()) {
    if (!d.in_show_config) continue;
    rows.push_back({std::string(d.key), d.print(config.settings), d.print(defaults),
                    is_changeable_setting(d.key)});
  }
  return rows;
}

bool is_changeable_setting(std::string_view key) {
  const SettingDef* d = find_setting(key);
  if (d == nullptr) return false;
  return d->apply == SettingApply::online ||
         (d->apply == SettingApply::reload && key != "auth_hba_file" && key != "auth_ident_file");
}

bool is_tls_setting(std::string_view key) {
  return key.starts_with("client_tls") || key.starts_with("server_tls");
}

std::string restart_settings_warning(const Settings& running, const Settings& loaded) {
  std::vector<std::string_view> changed;
  for (const SettingDef& d : setting_table()) {
    if (d.apply == SettingApply::restart && d.print(running) != d.print(loaded)) {
      changed.push_back(d.key);
    }
  }
  if (changed.empty()) return {};
  std::string names;
  for (size_t i = 0; i < changed.size(); ++i) {
    if (i > 0) names += i + 1 == changed.size() ? " and " : ", ";
    names += changed[i];
  }
  return names + (changed.size() == 1 ? " takes" : " take") + " effect at the next start";
}

}  // namespace pgsluice
