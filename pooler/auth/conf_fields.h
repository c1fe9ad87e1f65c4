// The lexical layer shared by auth_hba_file and auth_ident_file (PostgreSQL's pg_hba.conf and
// pg_ident.conf formats): logical lines (a trailing backslash continues one) and the
// blank-separated fields of a line, each a comma-separated list of tokens.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace pgsluice {

struct ConfToken {
  std::string text;
  bool quoted = false;  // a quoted name loses any keyword meaning ("all" is a user named all)
};
using ConfField = std::vector<ConfToken>;  // one blank-separated field: a comma-separated list

struct ConfLine {
  int line = 0;  // the number of its first physical line
  std::string text;
};

// The logical lines of a file's text, blank ones included.
std::vector<ConfLine> conf_logical_lines(const std::string& text);

// Splits one logical line into fields of comma-separated tokens, as PostgreSQL's tokenizer:
// blanks separate fields, a comma joins the next token (after blanks) to the same field,
// double quotes keep anything (a doubled quote is one quote; "" is an empty name), `#`
// outside quotes ends the line. Blanks before a comma do not end the list either, as in
// PgBouncer's tokenizer (`a , b` is one field). False with `error` set on a malformed line.
bool conf_split_fields(std::string_view line, std::vector<ConfField>& fields, std::string& error);

}  // namespace pgsluice
