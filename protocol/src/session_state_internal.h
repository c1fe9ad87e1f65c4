// Internal interface between the parts of the session-state classifier: the libpg_query tree walk
// (session_state_tree.cc), the lexer fallback (session_state_lexer.cc) and the public entry points
// (session_state.cc).
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "pgsluice/protocol/session_state.h"

namespace pgsluice::protocol::session_state_detail {

// Where findings go and how they are labelled.
struct Scope {
  // Added to libpg_query's stmt_location: the offset of the parsed text in the original input.
  size_t base_offset = 0;
  // Set for SQL inside a DO block: every finding points at the DO statement itself.
  std::optional<StatementSpan> fixed_span;
  // Nesting of DO blocks and EXECUTE strings, bounded so that a DO that EXECUTEs a DO … ends.
  int depth = 0;
  // The SQL is stored for later, not run now (the body of PREPARE): its findings are possible.
  bool deferred = false;
};

inline constexpr int kMaxNesting = 8;

// Parses `sql` with libpg_query and adds the verdict on each of its statements to `out`.
// False, with `out` untouched, when libpg_query cannot parse it.
bool classify_parsed(std::string_view sql, const Scope& scope, Classification& out);

// The lexer's keyword verdict on `sql` (one or more statements that libpg_query could not parse):
// findings marked lexer_only with certainty possible, all pointing at `span`.
void classify_by_lexer(std::string_view sql, StatementSpan span, Classification& out);

// A dollar-quoted literal of `body`, with a tag that does not occur in it.
std::string dollar_quote(std::string_view body);

// The PL/pgSQL body of `wrapper` (a CREATE FUNCTION or CREATE PROCEDURE statement), each of its
// findings pointing at `span`. False, with `out` untouched, when the body does not compile.
bool classify_plpgsql_function(const std::string& wrapper, StatementSpan span, Classification& out);

// `span` of `text` without leading and trailing whitespace.
StatementSpan trim_span(std::string_view text, StatementSpan span);

// ASCII lowercase copy.
std::string to_lower(std::string_view text);

}  // namespace pgsluice::protocol::session_state_detail
