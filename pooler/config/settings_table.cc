// SHOW CONFIG rows and SET's changeable settings; see settings_table.h.
#include "pooler/config/settings_table.h"

#include <functional>

#include "pooler/config/value_parsers.h"

namespace pgsluice {

namespace {

struct Entry {
  const char* key;
  bool changeable;
  std::function<std::string(const Settings&)> print;
};

const std::vector<Entry>& entries() {
  static const std::vector<Entry> table = {
      {"admin_users", true, [](const Settings& s) { return join_list(s.admin_users); }},
      {"application_name_add_host", true,
       [](const Settings& s) { return print_bool(s.application_name_add_host); }},
      {"auth_dbname", true, [](const Settings& s) { return s.auth_dbname; }},
      {"auth_file", true, [](const Settings& s) { return s.auth_file; }},
      // Read at start and RELOAD only (the rules are loaded with the auth_file).
      {"auth_hba_file", false, [](const Settings& s) { return s.auth_hba_file; }},
      {"auth_query", true, [](const Settings& s) { return s.auth_query; }},
      {"auth_query_cache_ttl", true,
       [](const Settings& s) { return print_seconds(s.auth_query_cache_ttl); }},
      {"auth_type", true, [](const Settings& s) { return std::string(to_string(s.auth_type)); }},
      {"auth_user", true, [](const Settings& s) { return s.auth_user; }},
      {"cancel_wait_timeout", true,
       [](const Settings& s) { return print_seconds(s.cancel_wait_timeout); }},
      {"client_idle_timeout", true,
       [](const Settings& s) { return print_seconds(s.client_idle_timeout); }},
      {"client_login_timeout", true,
       [](const Settings& s) { return print_seconds(s.client_login_timeout); }},
      {"default_pool_size", true,
       [](const Settings& s) { return std::to_string(s.default_pool_size); }},
      {"idle_transaction_timeout", true,
       [](const Settings& s) { return print_seconds(s.idle_transaction_timeout); }},
      {"ignore_startup_parameters", true,
       [](const Settings& s) { return join_list(s.ignore_startup_parameters); }},
      {"leak_report_file", false, [](const Settings& s) { return s.leak_report_file; }},
      {"listen_addr", false, [](const Settings& s) { return s.listen_addr; }},
      {"listen_port", false, [](const Settings& s) { return std::to_string(s.listen_port); }},
      {"log_connections", true, [](const Settings& s) { return print_bool(s.log_connections); }},
      {"log_disconnections", true,
       [](const Settings& s) { return print_bool(s.log_disconnections); }},
      {"log_pooler_errors", true,
       [](const Settings& s) { return print_bool(s.log_pooler_errors); }},
      {"logfile", false, [](const Settings& s) { return s.logfile; }},
      {"max_client_conn", true,
       [](const Settings& s) { return std::to_string(s.max_client_conn); }},
      {"max_db_client_connections", true,
       [](const Settings& s) { return std::to_string(s.max_db_client_connections); }},
      {"max_db_connections", true,
       [](const Settings& s) { return std::to_string(s.max_db_connections); }},
      {"max_packet_size", false,
       [](const Settings& s) { return std::to_string(s.max_packet_size); }},
      {"max_user_client_connections", true,
       [](const Settings& s) { return std::to_string(s.max_user_client_connections); }},
      {"max_user_connections", true,
       [](const Settings& s) { return std::to_string(s.max_user_connections); }},
      {"metrics_addr", false, [](const Settings& s) { return s.metrics_addr; }},
      {"metrics_port", false, [](const Settings& s) { return std::to_string(s.metrics_port); }},
      {"min_pool_size", true, [](const Settings& s) { return std::to_string(s.min_pool_size); }},
      {"pidfile", false, [](const Settings& s) { return s.pidfile; }},
      {"pool_mode", true, [](const Settings& s) { return std::string(to_string(s.pool_mode)); }},
      {"query_timeout", true, [](const Settings& s) { return print_seconds(s.query_timeout); }},
      {"query_wait_timeout", true,
       [](const Settings& s) { return print_seconds(s.query_wait_timeout); }},
      {"reserve_pool_size", true,
       [](const Settings& s) { return std::to_string(s.reserve_pool_size); }},
      {"reserve_pool_timeout", true,
       [](const Settings& s) { return print_seconds(s.reserve_pool_timeout); }},
      {"server_check_delay", true,
       [](const Settings& s) { return print_seconds(s.server_check_delay); }},
      {"server_check_query", true, [](const Settings& s) { return s.server_check_query; }},
      {"server_connect_timeout", true,
       [](const Settings& s) { return print_seconds(s.server_connect_timeout); }},
      {"server_fast_close", true,
       [](const Settings& s) { return print_bool(s.server_fast_close); }},
      {"server_idle_timeout", true,
       [](const Settings& s) { return print_seconds(s.server_idle_timeout); }},
      {"server_lifetime", true, [](const Settings& s) { return print_seconds(s.server_lifetime); }},
      {"server_login_retry", true,
       [](const Settings& s) { return print_seconds(s.server_login_retry); }},
      {"server_reset_query", true, [](const Settings& s) { return s.server_reset_query; }},
      {"server_reset_query_always", true,
       [](const Settings& s) { return print_bool(s.server_reset_query_always); }},
      {"session_state_long_hold", true,
       [](const Settings& s) { return print_seconds(s.session_state_long_hold); }},
      {"session_state_verify", true,
       [](const Settings& s) { return std::string(to_string(s.session_state_verify)); }},
      {"session_state_verify_sample", true,
       [](const Settings& s) { return std::to_string(s.session_state_verify_sample); }},
      {"shutdown_timeout", true,
       [](const Settings& s) { return print_seconds(s.shutdown_timeout); }},
      {"so_reuseport", false, [](const Settings& s) { return print_bool(s.so_reuseport); }},
      {"stats_period", true, [](const Settings& s) { return print_seconds(s.stats_period); }},
      {"stats_users", true, [](const Settings& s) { return join_list(s.stats_users); }},
      {"transaction_timeout", true,
       [](const Settings& s) { return print_seconds(s.transaction_timeout); }},
      {"unix_socket_dir", false, [](const Settings& s) { return s.unix_socket_dir; }},
      {"verbose_level", true, [](const Settings& s) { return s.verbose_level; }},
      {"workers", false, [](const Settings& s) { return std::to_string(s.workers); }},
  };
  return table;
}

}  // namespace

std::vector<SettingRow> describe_settings(const Config& config) {
  const Settings defaults;
  std::vector<SettingRow> rows;
  rows.reserve(entries().size());
  for (const Entry& e : entries()) {
    rows.push_back({e.key, e.print(config.settings), e.print(defaults), e.changeable});
  }
  return rows;
}

bool is_changeable_setting(std::string_view key) {
  for (const Entry& e : entries()) {
    if (key == e.key) return e.changeable;
  }
  return false;
}

}  // namespace pgsluice
