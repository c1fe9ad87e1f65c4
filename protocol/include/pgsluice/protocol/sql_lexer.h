// A small SQL tokenizer in PostgreSQL's lexical rules, and the session-state prefilter built on it:
// the cheap first stage of the session-state checks, which answers "this SQL cannot change the
// session" for typical application statements without allocating and without libpg_query.
#pragma once

#include <cstddef>
#include <string_view>

namespace pgsluice::protocol {

enum class SqlTokenKind {
  word,               // keyword or unquoted identifier (may contain '$' and non-ASCII bytes)
  quoted_identifier,  // "..." or U&"..."
  string_literal,     // '...', E'...', B'...', X'...', N'...', U&'...'
  dollar_string,      // $tag$...$tag$
  number,
  parameter,  // $1
  punct,      // any other single byte: ( ) , ; . = + ...
};

struct SqlToken {
  SqlTokenKind kind = SqlTokenKind::punct;
  std::string_view text;  // the whole token, quotes included
  size_t offset = 0;      // of text in the input
};

// Splits SQL into tokens, skipping whitespace, -- comments and nested /* */ comments. An
// unterminated string, identifier or comment runs to the end of the input (PostgreSQL refuses
// such a string as a whole, so nothing in it can be executed).
// Why standard_conforming_strings is assumed on: with it off (not the default since 9.1), a
// backslash escapes a quote inside '...' too; this tokenizer then ends such a string early.
class SqlTokenizer {
 public:
  explicit SqlTokenizer(std::string_view sql) : sql_(sql) {}

  // The next token into `out`; false at the end of the input.
  bool next(SqlToken& out);
  size_t position() const { return pos_; }

 private:
  void skip_space_and_comments();
  size_t scan_quoted(size_t from, char quote, bool backslash_escapes) const;

  std::string_view sql_;
  size_t pos_ = 0;
};

// The prefilter. False means: no statement of `sql` can leave state in the session (as far as the
// SQL text shows). True means: parse it (classify_sql) for the exact verdict. It flags
//   - a statement that starts with SET, RESET, LISTEN, UNLISTEN, PREPARE, EXECUTE, DEALLOCATE,
//     DECLARE, CLOSE, LOAD, DISCARD or DO;
//   - EXECUTE anywhere (EXPLAIN EXECUTE, CREATE TABLE … AS EXECUTE);
//   - TEMP/TEMPORARY after CREATE, GLOBAL, LOCAL, REPLACE or INTO, and a pg_temp* name anywhere;
//   - a call of a function that is not a known-safe builtin (set_config, pg_advisory_lock and the
//     other built-ins that leave session state are not on that list, so they are flagged as
//     calls; so are schema-qualified calls other than pg_catalog's).
// ROLE, SESSION and AUTHORIZATION need no rule of their own: they change the session only after a
// leading SET/RESET. Keywords inside strings, comments, dollar quotes and quoted identifiers never
// count. Never allocates.
//
// Most application statements are answered by a quick pass over the bytes (prefilter_quick_scan.cc)
// that never says "cannot change" where the token pass would say "may"; the rest by the token pass.
bool may_change_session_state(std::string_view sql);

// The prefilter's token pass alone. may_change_session_state gives the same answers: its quick
// pass clears only statements this clears too. Public for the tests and the fuzz target, which
// check that.
bool may_change_session_state_by_tokens(std::string_view sql);

// The quick pass alone: true when the bytes show that no statement can change the session, false
// when it hands the statement to the token pass. Public for the tests, which check what it clears
// on its own (a statement it hands over costs the token pass's several thousand instructions).
bool quick_pass_clears(std::string_view sql);

// Whether a statement that starts with this word is about session state by its first word: SET,
// RESET, LISTEN, UNLISTEN, PREPARE, EXECUTE, DEALLOCATE, DECLARE, CLOSE, LOAD, DISCARD, DO.
bool is_session_leading_word(std::string_view word);

// Whether `lowercase_name` (an unqualified or pg_catalog function name) is a builtin known not to
// touch session state: PostgreSQL 15's pg_catalog functions by their catalog properties and a
// reviewed list (pg_catalog_functions.inc, scripts/pg-catalog-functions), and uuid_generate_v4.
bool is_known_safe_builtin(std::string_view lowercase_name);

// Whether a '(' after this lowercase keyword or type name opens no function call: IN (…),
// VALUES (…), ON CONFLICT (…), varchar(255), COALESCE(…), …
bool is_paren_keyword(std::string_view lowercase_word);
// Whether `name (` after this lowercase keyword is a name with a column list: INTO t (a, b),
// CREATE TABLE t (…), WITH cte (a) AS, AS x (a, b), …
bool is_column_list_intro(std::string_view lowercase_word);

// ASCII case-insensitive comparison of a word with a lowercase keyword.
bool iequals_keyword(std::string_view word, std::string_view lowercase_keyword);

}  // namespace pgsluice::protocol
