// The admin console's command grammar, as PgBouncer's: `WORD [WORD] [;]` (a word is a name of
// letters, digits and '_' or a "double-quoted" name) and `SET key = value` / `SET key TO value`
// (the value a word, a number or a 'single-quoted' string). Words compare case-insensitively;
// a quoted name keeps its case. Pure text in, a command out: unit-tested on its own.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace pgsluice {

struct AdminCommand {
  std::string verb;  // upper case: SHOW, PAUSE, SET, KILL_CLIENT, …
  std::string arg;   // SHOW's subject upper-cased; a database name as written (unquoted); or empty
  bool has_arg = false;
  std::string set_key;  // SET only: the key, lower case
  std::string set_value;
};

struct AdminParseResult {
  std::optional<AdminCommand> command;  // nullopt: a syntax error (or empty)
  bool empty = false;                   // only whitespace and ';'
};

AdminParseResult parse_admin_command(std::string_view sql);

}  // namespace pgsluice
