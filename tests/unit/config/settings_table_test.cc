// The settings table: one sorted row per main-section key, parsers and printers that agree, SET
// limited to the online keys, and conf/pgsluice.ini documenting exactly the table's keys (plus
// PgBouncer's keys that are accepted with a warning).
#include "pooler/config/settings_table.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <set>
#include <string>

#include "pooler/base/text.h"

namespace pgsluice {
namespace {

TEST(SettingsTable, SortedAndUnique) {
  const auto table = setting_table();
  ASSERT_FALSE(table.empty());
  for (size_t i = 1; i < table.size(); ++i) EXPECT_LT(table[i - 1].key, table[i].key);
  // find_setting and is_pgbouncer_only_key are binary searches.
  const auto only = pgbouncer_only_keys();
  for (size_t i = 1; i < only.size(); ++i) EXPECT_LT(only[i - 1], only[i]);
  for (const SettingDef& d : table) {
    EXPECT_EQ(find_setting(d.key), &d) << d.key;
    EXPECT_EQ(d.key, ascii_lower(d.key));
    EXPECT_FALSE(is_pgbouncer_only_key(d.key)) << d.key << " is implemented";
  }
  for (std::string_view k : only) EXPECT_TRUE(is_pgbouncer_only_key(k)) << k;
  EXPECT_EQ(find_setting("Listen_Port"), nullptr);  // callers fold the case
  EXPECT_EQ(find_setting("nonsense"), nullptr);
}

TEST(SettingsTable, PrintedDefaultsParseBack) {
  for (const SettingDef& d : setting_table()) {
    if (d.key == "session_state_action") continue;  // unset by default: nothing to parse back
    const Settings defaults;
    const std::string text = d.print(defaults);
    Settings parsed;
    parsed.admin_users = {"someone"};  // a list is replaced, not appended to
    EXPECT_EQ(d.parse(text, parsed), "") << d.key << " = " << text;
    EXPECT_EQ(d.print(parsed), text) << d.key;
  }
}

TEST(SettingsTable, ParseChangesOnlyItsOwnField) {
  const SettingDef* port = find_setting("listen_port");
  ASSERT_NE(port, nullptr);
  Settings s;
  EXPECT_EQ(port->parse("7000", s), "");
  EXPECT_EQ(s.listen_port, 7000);
  EXPECT_EQ(port->print(s), "7000");
  EXPECT_EQ(port->parse("0", s), "invalid value '0': expected an integer between 1 and 65535");
  EXPECT_EQ(s.listen_port, 7000);
  const SettingDef* server_ca = find_setting("server_tls_ca_file");
  ASSERT_NE(server_ca, nullptr);
  EXPECT_EQ(server_ca->parse(" /etc/ca.crt ", s), "");
  EXPECT_EQ(s.server_tls.ca_file, "/etc/ca.crt");
  EXPECT_EQ(s.client_tls.ca_file, "");
}

TEST(SettingsTable, AllButRestartKeysAndTheHbaAndIdentFilesAreChangeable) {
  for (const SettingDef& d : setting_table()) {
    // The hba and ident files are read with the auth_file, by RELOAD.
    const bool settable =
        d.apply != SettingApply::restart && d.key != "auth_hba_file" && d.key != "auth_ident_file";
    EXPECT_EQ(is_changeable_setting(d.key), settable) << d.key;
  }
  // PgBouncer's SET changes these; its own tests switch TLS on and off so.
  EXPECT_TRUE(is_changeable_setting("client_tls_sslmode"));
  EXPECT_TRUE(is_changeable_setting("server_tls_ca_file"));
  EXPECT_TRUE(is_changeable_setting("max_prepared_statements"));
  EXPECT_TRUE(is_tls_setting("client_tls_key_file"));
  EXPECT_FALSE(is_tls_setting("max_prepared_statements"));
  const std::set<std::string_view> restart = {"disable_pqexec",
                                              "io_uring",
                                              "listen_addr",
                                              "listen_backlog",
                                              "listen_port",
                                              "logfile",
                                              "metrics_addr",
                                              "metrics_port",
                                              "pidfile",
                                              "so_reuseport",
                                              "track_extra_parameters",
                                              "unix_socket_dir",
                                              "unix_socket_group",
                                              "unix_socket_mode",
                                              "user",
                                              "workers"};
  for (const SettingDef& d : setting_table()) {
    EXPECT_EQ(restart.contains(d.key), d.apply == SettingApply::restart) << d.key;
  }
}

TEST(SettingsTable, RestartWarningNamesTheChangedRestartSettings) {
  const Settings running;
  Settings loaded;
  EXPECT_EQ(restart_settings_warning(running, loaded), "");
  loaded.default_pool_size = 5;       // online: applied by RELOAD, no warning
  loaded.auth_hba_file = "hba.conf";  // reload: the same
  EXPECT_EQ(restart_settings_warning(running, loaded), "");
  loaded.listen_port = 7000;
  EXPECT_EQ(restart_settings_warning(running, loaded),
            "listen_port takes effect at the next start");
  loaded.listen_addr = "*";
  loaded.workers = running.workers + 1;
  EXPECT_EQ(restart_settings_warning(running, loaded),
            "listen_addr, listen_port and workers take effect at the next start");
}

TEST(SettingsTable, ShowConfigListsTheShownRows) {
  const Config config;
  const std::vector<SettingRow> rows = describe_settings(config);
  std::set<std::string> listed;
  for (const SettingRow& r : rows) listed.insert(r.key);
  for (const SettingDef& d : setting_table()) {
    EXPECT_EQ(listed.contains(std::string(d.key)), d.in_show_config) << d.key;
  }
  // 57 as before the table (#16; TLS and three more are not listed), scram_max_iterations,
  // session_state_pin_reserve, server_max_protocol_version, server_tls_sslnegotiation,
  // peer_id, server_role_check_interval and session_state_relay_queue; the ten socket settings
  // (listen_backlog, tcp_*, unix_socket_group/mode); PgBouncer's scram_iterations,
  // disable_pqexec, query_wait_notify, server_round_robin, log_stats, track_extra_parameters,
  // verbose, syslog, syslog_facility, syslog_ident, user; auth_ident_file; spread_clients_above;
  // io_uring; PgBouncer 1.26's login_notify_message and pool_idle_timeout.
  EXPECT_EQ(rows.size(), 90u);
}

// The main section's keys in conf/pgsluice.ini: `key = value` lines, and `;key = value` for the
// ones shown commented out. Prose comments start with ";;".
std::set<std::string> documented_keys() {
  std::ifstream in(std::string(PGSLUICE_SOURCE_DIR) + "/conf/pgsluice.ini");
  EXPECT_TRUE(in.good()) << "cannot read conf/pgsluice.ini";
  std::set<std::string> keys;
  bool main_section = false;
  for (std::string line; std::getline(in, line);) {
    std::string_view l = trim(line);
    if (l.starts_with("[")) {
      main_section = l == "[pgsluice]" || l == "[pgbouncer]";
      continue;
    }
    if (!main_section) continue;
    if (l.starts_with(";") && !l.starts_with(";;")) l.remove_prefix(1);
    const size_t eq = l.find('=');
    if (eq == std::string_view::npos) continue;
    const std::string_view key = trim(l.substr(0, eq));
    const bool is_key = !key.empty() && std::all_of(key.begin(), key.end(), [](char c) {
      return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_';
    });
    if (is_key) keys.emplace(key);
  }
  return keys;
}

TEST(SettingsTable, ExampleConfigDocumentsEveryKey) {
  const std::set<std::string> documented = documented_keys();
  ASSERT_FALSE(documented.empty());
  for (const SettingDef& d : setting_table()) {
    EXPECT_TRUE(documented.contains(std::string(d.key)))
        << d.key << " is not documented in conf/pgsluice.ini";
  }
  for (const std::string& key : documented) {
    EXPECT_TRUE(find_setting(key) != nullptr || is_pgbouncer_only_key(key))
        << "conf/pgsluice.ini documents " << key << ", which is not a setting";
  }
}

}  // namespace
}  // namespace pgsluice
