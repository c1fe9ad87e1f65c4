// SHOW CONFIG's rows (key, value, default, changeable), with values printed as PgBouncer prints
// them (durations in seconds, booleans 0/1, lists comma-separated), and which settings the
// admin console's SET may change in a running pooler.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "pooler/config/config.h"

namespace pgsluice {

struct SettingRow {
  std::string key;
  std::string value;
  std::string default_value;
  bool changeable = false;
};

std::vector<SettingRow> describe_settings(const Config& config);
// The settings SET may change: the ones read anew at each use (timeouts, limits, logging, the
// user lists, pool sizes); not the listening sockets, the workers or the log file.
bool is_changeable_setting(std::string_view key);

}  // namespace pgsluice
