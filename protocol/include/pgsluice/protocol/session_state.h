// The session-state classifier: which statements of a SQL string leave state in a PostgreSQL
// session (a plain SET, a session advisory lock, a LISTEN, a SQL PREPARE, a WITH HOLD cursor, a
// temp table, a SET ROLE, a LOAD), which clean it (DISCARD, RESET ALL, UNLISTEN *, …), and which
// call code the pooler cannot see. Two stages: the lexer prefilter (sql_lexer.h) answers for
// typical application SQL in a few dozen nanoseconds; libpg_query parses what it flags. Verdicts
// are cached per statement text by SessionStateClassifier. Pure code: no IO, no exceptions.
#pragma once

#include <cstddef>
#include <cstdint>
#include <list>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace pgsluice::protocol {

// The kinds, spelled as in session_state_action (`listen:pin`, `advisory_lock:reject`).
enum class SessionStateKind {
  set,            // SET/RESET of a setting (detail: its name, "all" for RESET ALL)
  set_config,     // set_config(name, value, false) (detail: the name when it is a constant)
  role,           // SET ROLE, SET SESSION AUTHORIZATION (detail: "role"/"session_authorization")
  advisory_lock,  // pg_advisory_lock & co. (detail: the function name)
  listen,         // LISTEN/UNLISTEN (detail: the channel, "*" for UNLISTEN *)
  prepare,        // SQL PREPARE/EXECUTE/DEALLOCATE (detail: the statement name, "all")
  hold_cursor,    // DECLARE … WITH HOLD, CLOSE (detail: the cursor name, "all")
  temp_object,    // CREATE TEMP TABLE/VIEW/SEQUENCE, SELECT INTO TEMP, pg_temp.x (detail: name)
  load,           // LOAD (detail: the library)
  seed,           // setseed(): the session's random sequence from then on (detail: "setseed")
  // currval()/lastval() in a statement that did not advance a sequence before it (an INSERT,
  // COPY FROM, MERGE, nextval, setval earlier in the same input): the value is this session's
  // last nextval, which through a pool is another client's, or an error (detail: the function)
  currval,
};

enum class Certainty {
  definite,  // the statement does it whenever it succeeds
  possible,  // it may: a non-constant argument, or a verdict the parser could not confirm
};

enum class SessionStateEffect {
  acquire,  // creates or changes state: SET x, pg_advisory_lock, LISTEN a, PREPARE p, …
  release,  // removes it again: RESET x, pg_advisory_unlock, UNLISTEN a, DEALLOCATE p, CLOSE c
  use,      // depends on state an earlier statement left: EXECUTE p
};

// Where a statement lies in the classified input, in bytes.
struct StatementSpan {
  size_t offset = 0;
  size_t length = 0;
};

struct SessionStateFinding {
  SessionStateKind kind = SessionStateKind::set;
  Certainty certainty = Certainty::definite;
  SessionStateEffect effect = SessionStateEffect::acquire;
  std::string detail;
  // The top-level statement of the input that does it (for a DO block: the whole DO statement).
  StatementSpan span;
  // The parser could not read the statement (newer syntax, or an unterminated literal): this is
  // the lexer's keyword guess, always `possible`.
  bool lexer_only = false;
};

// A call the pooler cannot see into: a function that is not a known-safe builtin, a procedure
// (CALL), a DO block in another language or that does not parse, dynamic SQL in a DO block
// (EXECUTE of a non-constant string). Why not a finding of some kind with certainty `possible`:
// nothing says which kind it would be, and a `set` guess would be reset, rejected or counted
// under the wrong name. The pooler reports these as "possible" without a kind, and
// session_state_verify confirms or clears them.
struct OpaqueCall {
  std::string name;  // "myschema.f", "f", "CALL p", "DO (language plperl)", "DO: EXECUTE …"
  StatementSpan span;
  bool lexer_only = false;
};

// Statements that clean state, as the pooler's reset would. DISCARD ALL implies all the others.
struct SessionCleanup {
  bool discard_all = false;
  bool discard_temp = false;
  bool discard_plans = false;
  bool discard_sequences = false;
  bool reset_all = false;  // note: leaves role and session_authorization (GUC_NO_RESET_ALL)
  bool unlisten_all = false;
  bool advisory_unlock_all = false;  // SELECT pg_advisory_unlock_all()
  bool deallocate_all = false;
  bool close_all = false;

  bool any() const;
  // Whether these statements remove every state of `kind` (LOAD is never undone).
  bool clears(SessionStateKind kind) const;
};

// A top-level statement that names a SQL prepared statement, or ends them all: what the pooler
// renames when it keeps SQL PREPARE for a client across servers (pooler/session_state/
// sql_prepared.h). EXPLAIN EXECUTE and CREATE TABLE … AS EXECUTE are executes. Statements inside
// a DO block or a function are not here: their text is not the client's to rename.
struct PreparedNameUse {
  enum class Op : uint8_t { prepare, execute, deallocate, deallocate_all, discard_all };
  Op op = Op::execute;
  size_t statement = 0;  // which top-level statement of the input, from 0
  StatementSpan statement_span;
  // The statement's name as PostgreSQL keys it (folded to lower case unless quoted, cut to 63
  // bytes); empty for deallocate_all and discard_all.
  std::string name;
  // The name's token in the input (quotes included); length 0 when it was not found there (a
  // U&"…" name): such a statement cannot be renamed.
  StatementSpan name_span;
};

// Where `name` (as PostgreSQL keys it) is written in `statement` of `text`: the token after
// PREPARE, EXECUTE or DEALLOCATE [PREPARE] whose value is that name. Length 0 when none is.
StatementSpan locate_prepared_name(std::string_view text, StatementSpan statement,
                                   std::string_view name);

enum class VerdictSource {
  prefilter,       // the lexer found nothing to parse: no findings
  parser,          // libpg_query read every statement
  lexer_fallback,  // at least one statement did not parse; its findings are lexer_only
};

struct Classification {
  VerdictSource source = VerdictSource::prefilter;
  std::vector<SessionStateFinding> findings;
  std::vector<OpaqueCall> opaque_calls;
  SessionCleanup cleanup;
  // The top-level statements libpg_query read (0 from the prefilter; pieces the lexer read are
  // not counted): one tells that an error the server gives is about the statement that holds
  // every finding and call.
  size_t statements = 0;
  // PREPARE, EXECUTE, DEALLOCATE and DISCARD ALL among the top-level statements, in order.
  std::vector<PreparedNameUse> prepared_names;

  // Nothing found: no finding, no opaque call, no cleaning statement.
  bool empty() const { return findings.empty() && opaque_calls.empty() && !cleanup.any(); }
  bool calls_opaque_function() const { return !opaque_calls.empty(); }
  bool has_definite() const;
};

std::string_view to_string(SessionStateKind kind);
std::string_view to_string(Certainty certainty);
std::string_view to_string(SessionStateEffect effect);
std::string_view to_string(VerdictSource source);

// A compact one-line verdict for logs and golden tests. Entries are separated by ", ":
//   kind:detail      a definite acquire       (set:search_path)
//   -kind:detail     a release                (-advisory_lock:pg_advisory_unlock)
//   ~kind:detail     a use                    (~prepare:p)
//   ?…               a possible one           (?set_config:, ?-listen:a)
//   …@lexer          a lexer-only one         (?set:foo@lexer)
//   opaque:name      an opaque call           (opaque:myschema.f)
//   clean:what       a cleaning statement     (clean:discard_all)
// and "" when nothing was found.
std::string describe(const Classification& classification);

enum class Prefilter {
  use,   // return at once when may_change_session_state() is false (the normal way)
  skip,  // parse anyway (tests use it to check that the prefilter never hides a finding)
};

// The exact verdict on every statement of `sql` (a Query message's string, or a Parse message's
// statement). Never throws; an input libpg_query cannot parse is split with its scanner, and
// each piece that still does not parse gets the lexer's verdict (lexer_only, possible).
Classification classify_sql(std::string_view sql, Prefilter prefilter = Prefilter::use);

// A user function's definition as pg_proc gives it: the language's name (pg_language.lanname),
// pg_get_function_arguments and pg_get_function_result (empty for a procedure), and prosrc.
struct FunctionDefinition {
  std::string_view language;
  std::string_view arguments;
  std::string_view result;
  std::string_view body;
};

// The verdict on what a call of that function does, every finding and call of its body pointing
// at the whole body: a SQL body is classified as SQL, a PL/pgSQL body as a DO block's is (with
// the function's own parameters declared, so that assignments to them compile). Any other
// language, an empty SQL body (BEGIN ATOMIC: PostgreSQL keeps its tree, not its text) or a
// PL/pgSQL body that does not compile is an opaque call named "function (…)".
Classification classify_function_body(const FunctionDefinition& function);

// A statement's identity for reports: constants replaced by $n (pg_query_normalize) and
// libpg_query's fingerprint, which is equal for statements that differ only in constants.
// When libpg_query cannot parse the text: the lexer replaces literals and numbers, folds
// whitespace and keyword case, and `value` is a 64-bit FNV-1a hash of that text.
struct StatementFingerprint {
  uint64_t value = 0;
  std::string normalized;
  bool from_parser = false;
};
StatementFingerprint fingerprint_sql(std::string_view sql);

// The verdict cache of one pooler thread (not thread-safe; libpg_query's memory is per thread
// too). Statements the prefilter clears take no entry. Entries are keyed by a 64-bit hash of
// the text and compared by full text, so a collision costs a re-parse, never a wrong verdict;
// the least recently used entry goes first when `capacity` is reached.
class SessionStateClassifier {
 public:
  static constexpr size_t kDefaultCapacity = 4096;

  explicit SessionStateClassifier(size_t capacity = kDefaultCapacity);

  // The verdict on `sql`. The reference stays valid until the next call of classify().
  const Classification& classify(std::string_view sql);

  size_t size() const { return entries_.size(); }
  size_t capacity() const { return capacity_; }
  uint64_t hits() const { return hits_; }
  uint64_t misses() const { return misses_; }  // parses
  uint64_t prefiltered() const { return prefiltered_; }
  void clear();

 private:
  struct Entry {
    uint64_t hash = 0;
    std::string sql;
    Classification verdict;
  };

  size_t capacity_;
  std::list<Entry> entries_;  // most recently used first
  // Why one slot per hash: two texts with equal hashes replace each other, which keeps the
  // index a plain map and the cache bounded; such collisions are vanishingly rare.
  std::unordered_map<uint64_t, std::list<Entry>::iterator> index_;
  uint64_t hits_ = 0;
  uint64_t misses_ = 0;
  uint64_t prefiltered_ = 0;
};

}  // namespace pgsluice::protocol
