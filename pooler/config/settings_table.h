// The main-section settings, one row each (settings_table.cc): key, how the value is parsed into
// its Settings field and printed back, when a new value takes effect, and whether PgBouncer has
// the key. Parsing the file, the admin console's SET and SHOW CONFIG, RELOAD's warning about
// settings that wait for a restart, and the check that conf/pgsluice.ini documents every key all
// come from the rows; the typed values and their defaults stay in struct Settings (config.h).
#pragma once

#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "pooler/config/config.h"

namespace pgsluice {

// When a new value takes effect in a running pooler.
enum class SettingApply {
  online,   // read anew at each use: SET may change it, RELOAD applies it
  reload,   // RELOAD applies it (files read again, new clients and servers); SET applies it
            // as RELOAD would (is_changeable_setting), but for auth_hba_file and
            // auth_ident_file
  restart,  // used once at startup: RELOAD warns that it waits for the next start
};

enum class SettingOrigin {
  pgbouncer,  // PgBouncer's key, with its name, default and meaning
  pgsluice,   // pgsluice's own
};

struct SettingDef {
  std::string_view key;  // lower case
  // Parses `value` into its field; returns an error message, empty on success, and leaves the
  // field unchanged on error.
  std::function<std::string(std::string_view value, Settings& into)> parse;
  std::function<std::string(const Settings& from)> print;  // as PgBouncer's SHOW CONFIG prints it
  SettingApply apply = SettingApply::online;
  SettingOrigin origin = SettingOrigin::pgbouncer;
  // False for the keys SHOW CONFIG has not listed so far (TLS, max_prepared_statements,
  // session_state_action): listing them is a visible change, left for its own commit.
  bool in_show_config = true;
};

// Every main-section setting, sorted by key.
std::span<const SettingDef> setting_table();
// The row of `key` (lower case), or null when it is not a setting.
const SettingDef* find_setting(std::string_view key);
// PgBouncer keys pgsluice does not implement yet: accepted with a warning, so that an existing
// pgbouncer.ini starts unchanged.
std::span<const std::string_view> pgbouncer_only_keys();
bool is_pgbouncer_only_key(std::string_view key);

// SHOW CONFIG's rows (key, value, default, changeable), sorted by key.
struct SettingRow {
  std::string key;
  std::string value;
  std::string default_value;
  bool changeable = false;
};
std::vector<SettingRow> describe_settings(const Config& config);
// The settings SET may change, as PgBouncer's SET does: the online ones, and the reload ones but
// auth_hba_file and auth_ident_file (read with the auth_file, which RELOAD does and SET does
// not).
bool is_changeable_setting(std::string_view key);
// The TLS settings of either side: SET builds the TLS contexts anew, as RELOAD does.
bool is_tls_setting(std::string_view key);
// RELOAD's warning for the restart-only settings whose value `loaded` changes, naming them:
// "listen_addr and listen_port take effect at the next start"; empty when none changed.
std::string restart_settings_warning(const Settings& running, const Settings& loaded);

}  // namespace pgsluice
