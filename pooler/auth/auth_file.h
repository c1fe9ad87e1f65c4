// The auth_file: PgBouncer's userlist.txt format, one `"user" "secret"` per line, where the secret
// is a plain password, an "md5…" hash or a "SCRAM-SHA-256$…" verifier; a double quote inside a
// quoted string is written twice; lines starting with ';' or '#' and blank lines are ignored.
#pragma once

#include <map>
#include <string>
#include <vector>

namespace pgsluice {

struct AuthFileResult {
  std::map<std::string, std::string> secrets;  // user → secret
  std::vector<std::string> errors;             // "file:line: message"
};

AuthFileResult parse_auth_file_text(const std::string& text, const std::string& name);
AuthFileResult load_auth_file(const std::string& path);

}  // namespace pgsluice
