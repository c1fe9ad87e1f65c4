// auth_ident_file: PostgreSQL's pg_ident.conf format, as PgBouncer 1.25 reads it, for the
// auth_hba_file rules with `map=NAME` (peer and cert). Each line is
// `MAPNAME SYSTEM-USERNAME PG-USERNAME`: the OS user (peer) or the certificate's CN (cert)
// SYSTEM-USERNAME may log in as PG-USERNAME, or as any user when PG-USERNAME is the keyword
// `all`. Quoting, comments and continuation lines as in pg_hba.conf (conf_fields.h).
//
// Not PostgreSQL's regular expressions (a SYSTEM-USERNAME starting with `/`): PgBouncer compares
// such a name literally; pgsluice refuses the file instead, since a line meant as a pattern
// would silently never match. Any error makes the whole file invalid, as for auth_hba_file.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace pgsluice {

struct IdentMapping {
  std::string system_user;
  bool any_user = false;  // PG-USERNAME `all`
  std::string user;
};

class IdentMaps {
 public:
  explicit IdentMaps(std::map<std::string, std::vector<IdentMapping>> maps)
      : maps_(std::move(maps)) {}
  [[nodiscard]] bool has(const std::string& map) const { return maps_.contains(map); }
  // Whether `map` lets `system_user` log in as `user`.
  [[nodiscard]] bool permits(const std::string& map, std::string_view system_user,
                             std::string_view user) const;

 private:
  std::map<std::string, std::vector<IdentMapping>> maps_;
};

struct IdentLoadResult {
  std::shared_ptr<const IdentMaps> maps;  // null when errors is not empty
  std::vector<std::string> errors;        // "file:line: message"
};

IdentLoadResult parse_ident_text(const std::string& text, const std::string& name);
IdentLoadResult load_ident_file(const std::string& path);

}  // namespace pgsluice
