// Where a SQL prepared statement's name is written in PREPARE, EXECUTE and DEALLOCATE: the parse
// tree says which name a statement uses, but not where it is (PostgreSQL 15's ExecuteStmt and
// DeallocateStmt have no location); the tokenizer finds the token that spells it.
#include <optional>
#include <string>

#include "ascii.h"
#include "pgsluice/protocol/session_state.h"
#include "pgsluice/protocol/sql_lexer.h"

namespace pgsluice::protocol {
namespace {

// PostgreSQL's NAMEDATALEN - 1: longer identifiers are cut (with a NOTICE), at a character
// boundary.
constexpr size_t kMaxIdentifierBytes = 63;

std::string truncated(std::string name) {
  if (name.size() <= kMaxIdentifierBytes) return name;
  size_t cut = kMaxIdentifierBytes;
  while (cut > 0 && (static_cast<unsigned char>(name[cut]) & 0xC0) == 0x80) --cut;
  name.resize(cut);
  return name;
}

// The identifier a token spells, as PostgreSQL keys it: an unquoted word folded to lower case
// (ASCII only, as for UTF-8 databases), a quoted one as written with "" read as ". None for
// U&"…" (its escapes are not decoded here) and for tokens that are not identifiers.
std::optional<std::string> identifier_value(const SqlToken& token) {
  if (token.kind == SqlTokenKind::word) {
    std::string out(token.text);
    for (char& c : out) c = ascii::lower(c);
    return truncated(std::move(out));
  }
  if (token.kind != SqlTokenKind::quoted_identifier || token.text.size() < 2 ||
      token.text.front() != '"' || token.text.back() != '"') {
    return std::nullopt;
  }
  std::string out;
  const std::string_view inner = token.text.substr(1, token.text.size() - 2);
  for (size_t i = 0; i < inner.size(); ++i) {
    out.push_back(inner[i]);
    if (inner[i] == '"') ++i;  // "" is one quote
  }
  return truncated(std::move(out));
}

bool introduces_name(const SqlToken& token) {
  return token.kind == SqlTokenKind::word &&
         (iequals_keyword(token.text, "prepare") || iequals_keyword(token.text, "execute") ||
          iequals_keyword(token.text, "deallocate"));
}

}  // namespace

StatementSpan locate_prepared_name(std::string_view text, StatementSpan statement,
                                   std::string_view name) {
  if (statement.offset > text.size()) return {};
  const std::string_view sql = text.substr(statement.offset, statement.length);
  SqlTokenizer tokenizer(sql);
  SqlToken previous;
  SqlToken token;
  bool have_previous = false;
  // The first token after PREPARE, EXECUTE or DEALLOCATE [PREPARE] that spells the name: the
  // statement's own keyword comes first (EXPLAIN EXECUTE, CREATE TABLE … AS EXECUTE: the
  // EXECUTE), so a column or alias of that name later on is never taken for it.
  while (tokenizer.next(token)) {
    if (have_previous && introduces_name(previous)) {
      std::optional<std::string> value = identifier_value(token);
      if (value && *value == name)
        return StatementSpan{statement.offset + token.offset, token.text.size()};
    }
    previous = token;
    have_previous = true;
  }
  return {};
}

}  // namespace pgsluice::protocol
