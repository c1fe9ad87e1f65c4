// The auth_ident_file parser and lookup; see ident.h.
#include "pooler/auth/ident.h"

#include "pooler/auth/conf_fields.h"
#include "pooler/base/read_file.h"

namespace pgsluice {

bool IdentMaps::permits(const std::string& map, std::string_view system_user,
                        std::string_view user) const {
  auto it = maps_.find(map);
  if (it == maps_.end()) return false;
  for (const IdentMapping& m : it->second) {
    if (m.system_user == system_user && (m.any_user || m.user == user)) return true;
  }
  return false;
}

IdentLoadResult parse_ident_text(const std::string& text, const std::string& name) {
  IdentLoadResult result;
  std::map<std::string, std::vector<IdentMapping>> maps;
  for (const ConfLine& line : conf_logical_lines(text)) {
    auto error = [&](const std::string& message) {
      result.errors.push_back(name + ":" + std::to_string(line.line) + ": " + message);
    };
    std::vector<ConfField> fields;
    std::string err;
    if (!conf_split_fields(line.text, fields, err)) {
      error(err);
      continue;
    }
    if (fields.empty()) continue;
    if (fields.size() != 3) {
      error("expected MAPNAME SYSTEM-USERNAME PG-USERNAME");
      continue;
    }
    bool lists = false;
    for (const ConfField& f : fields) lists |= f.size() != 1;
    if (lists) {
      error("a field of an ident map line cannot be a list");
      continue;
    }
    IdentMapping m;
    m.system_user = fields[1][0].text;
    if (!fields[1][0].quoted && m.system_user.starts_with('/')) {
      error("regular expressions are not supported in SYSTEM-USERNAME (as in PgBouncer)");
      continue;
    }
    const ConfToken& pg = fields[2][0];
    if (!pg.quoted && pg.text == "all") {
      m.any_user = true;
    } else if (!pg.quoted && (pg.text.starts_with('+') || pg.text.starts_with('/'))) {
      error("group membership and regular expressions are not supported in PG-USERNAME");
      continue;
    } else {
      m.user = pg.text;
    }
    maps[fields[0][0].text].push_back(std::move(m));
  }
  if (result.errors.empty()) result.maps = std::make_shared<const IdentMaps>(std::move(maps));
  return result;
}

IdentLoadResult load_ident_file(const std::string& path) {
  std::string text, err;
  if (!read_whole_file(path, text, err)) {
    IdentLoadResult result;
    result.errors.push_back(path + ": " + err);
    return result;
  }
  return parse_ident_text(text, path);
}

}  // namespace pgsluice
