#include "pgsluice/protocol/function_ddl.h"

#include <string>

#include "ascii.h"
#include "pgsluice/protocol/sql_lexer.h"

namespace pgsluice::protocol {

bool function_ddl(std::string_view sql) {
  using ascii::lower;
  size_t i = 0;
  while (i < sql.size() && (sql[i] == ' ' || sql[i] == '\t' || sql[i] == '\n' || sql[i] == '\r')) {
    ++i;
  }
  const char first = lower(i < sql.size() ? sql[i] : '\0');
  if (first != 'c' && first != 'a' && first != 'd') return false;  // the common case
  // The first word, compared in place: a DELETE or a COMMIT is not copied (this runs for every
  // statement the session checks see).
  size_t end = i;
  while (end < sql.size() && lower(sql[end]) >= 'a' && lower(sql[end]) <= 'z') ++end;
  const std::string_view verb = sql.substr(i, end - i);
  if (!iequals_keyword(verb, "create") && !iequals_keyword(verb, "alter") &&
      !iequals_keyword(verb, "drop")) {
    return false;
  }
  std::string text(sql.substr(end));
  for (char& c : text) c = lower(c);
  for (std::string_view word :
       {"function", "procedure", "routine", "schema", "extension", "language"}) {
    if (text.find(word) != std::string::npos) return true;
  }
  return false;
}

}  // namespace pgsluice::protocol
