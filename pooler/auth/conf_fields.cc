// The pg_hba.conf / pg_ident.conf tokenizer; see conf_fields.h.
#include "pooler/auth/conf_fields.h"

namespace pgsluice {

namespace {

bool is_blank(char c) {
  return c == ' ' || c == '\t' || c == '\r' || c == '\f' || c == '\v';
}

}  // namespace

std::vector<ConfLine> conf_logical_lines(const std::string& text) {
  std::vector<ConfLine> out;
  size_t pos = 0;
  int lineno = 0;
  while (pos < text.size()) {
    // A trailing backslash joins the next physical line; the record keeps its first line's
    // number.
    ConfLine logical;
    logical.line = lineno + 1;
    for (;;) {
      size_t end = text.find('\n', pos);
      if (end == std::string::npos) end = text.size();
      std::string_view physical(text.data() + pos, end - pos);
      pos = end + 1;
      ++lineno;
      while (!physical.empty() && physical.back() == '\r') physical.remove_suffix(1);
      if (!physical.empty() && physical.back() == '\\' && pos < text.size()) {
        physical.remove_suffix(1);
        logical.text.append(physical);
        continue;
      }
      if (!physical.empty() && physical.back() == '\\') physical.remove_suffix(1);
      logical.text.append(physical);
      break;
    }
    out.push_back(std::move(logical));
  }
  return out;
}

bool conf_split_fields(std::string_view line, std::vector<ConfField>& fields, std::string& error) {
  size_t i = 0;
  const size_t n = line.size();
  auto skip_blanks = [&] {
    while (i < n && is_blank(line[i])) ++i;
  };
  for (;;) {
    skip_blanks();
    if (i >= n || line[i] == '#') return true;
    ConfField field;
    for (;;) {
      ConfToken token;
      bool in_quote = false;
      while (i < n) {
        const char c = line[i];
        if (in_quote) {
          if (c == '"' && i + 1 < n && line[i + 1] == '"') {
            token.text += '"';
            i += 2;
          } else if (c == '"') {
            in_quote = false;
            ++i;
          } else {
            token.text += c;
            ++i;
          }
          continue;
        }
        if (is_blank(c) || c == ',' || c == '#') break;
        if (c == '"') {
          in_quote = true;
          token.quoted = true;
        } else {
          token.text += c;
        }
        ++i;
      }
      if (in_quote) {
        error = "unterminated quoted string";
        return false;
      }
      // "" is a name (one nobody has), as in PostgreSQL and PgBouncer.
      if (token.text.empty() && !token.quoted) {
        error = "empty name in a comma-separated list";
        return false;
      }
      field.push_back(std::move(token));
      // A comma continues the list, blanks before it too: PgBouncer reads `a , b` and `a ,b` as
      // one list (PostgreSQL's tokenizer would start a new field at the blank).
      size_t next = i;
      while (next < n && is_blank(line[next])) ++next;
      if (next < n && line[next] == ',') {
        i = next + 1;
        skip_blanks();
        if (i >= n || line[i] == '#') {
          error = "a list ends with ','";
          return false;
        }
        continue;
      }
      break;
    }
    fields.push_back(std::move(field));
  }
}

}  // namespace pgsluice
