// The `keep` action for SQL PREPARE (transaction mode): a client's `PREPARE p AS …` runs on its
// server under a name of the pooler's, unique in the process (`pgsluice_s<n>`), and every
// `EXECUTE p`, `EXPLAIN EXECUTE p`, `CREATE TABLE … AS EXECUTE p` and `DEALLOCATE p` of a Query is
// renamed to it. A server that lacks the statement gets its PREPARE inserted in the same Query,
// just before the statement that needs it; that CommandComplete is the pooler's and is swallowed.
//
// Why names per PREPARE and not shared by text as protocol-level statements are: the client's
// PREPARE must run on the server, which alone says whether it is valid (a syntax error, a missing
// table, an aborted transaction, 42P05 for a live name) — a name another client already made
// there would make it fail. Why the Query carries the PREPARE instead of a query of the pooler's
// own: its error then comes in the one place PostgreSQL would give one (the client's Query), in
// the state the transaction is in.
//
// What the pooler believes is changed when the Query is sent (a pipelined next Query must see
// it) and undone for the statements an ErrorResponse says did not run: PostgreSQL answers each
// statement of a Query with one CommandComplete and stops at the first error. Prepared statements
// are not transactional in PostgreSQL (a PREPARE in a block that rolls back stays), so a ROLLBACK
// undoes nothing here either.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "pgsluice/protocol/session_state.h"

namespace pgsluice {

// One statement a client prepared with SQL PREPARE.
class SqlStatement {
 public:
  // `definition`: the PREPARE's text after the client's name (" (int) AS SELECT $1");
  // `definition_position`: the characters before it in the client's text (the whole Query or
  // Parse the PREPARE came in).
  explicit SqlStatement(std::string definition, size_t definition_position = 0);
  ~SqlStatement();  // counted: servers drop the statements nobody holds (take_dead)
  SqlStatement(const SqlStatement&) = delete;
  SqlStatement& operator=(const SqlStatement&) = delete;

  [[nodiscard]] uint64_t id() const { return id_; }
  [[nodiscard]] const std::string& server_name() const { return server_name_; }
  [[nodiscard]] const std::string& definition() const { return definition_; }
  // PostgreSQL counts the position of an error in the statement's query from the start of the
  // text its PREPARE came in, also when the error comes at an EXECUTE (the query analysed again
  // after a schema change): what the client gets for an error in the definition.
  [[nodiscard]] size_t definition_position() const { return definition_position_; }
  // The PREPARE the pooler sends on its own (a hidden Parse) and the characters before the
  // definition in it.
  [[nodiscard]] std::string prepare_text() const;
  [[nodiscard]] size_t prepare_text_position() const;

 private:
  uint64_t id_;
  std::string server_name_;  // "pgsluice_s<id>", unquoted: lower case
  std::string definition_;
  size_t definition_position_;
};

using SqlStatementRef = std::shared_ptr<const SqlStatement>;
// A client's SQL prepared statements by its names (as PostgreSQL keys them).
using ClientSqlStatements = std::unordered_map<std::string, SqlStatementRef>;

// Whether a prepared statement name is spelled like one of the pooler's SQL names
// ("pgsluice_s<n>"; the pin check and session_state_verify leave those out of their counts).
bool is_pooler_sql_name(std::string_view name);

// The SQL prepared statements one server has. Entries do not keep a statement alive: when the
// last client name of it goes, the server's copy is dead and deallocated at its next release.
class ServerSqlStatements {
 public:
  struct Entry {
    std::weak_ptr<const SqlStatement> statement;
    std::string server_name;
    // The characters before the definition in the text that prepared it on this server (the
    // Query or Parse as sent): PostgreSQL's error positions in the definition count from there.
    size_t definition_position = 0;
  };
  using Entries = std::unordered_map<uint64_t, Entry>;

  [[nodiscard]] bool has(uint64_t id) const { return entries_.contains(id); }
  // `definition_position`: Entry::definition_position.
  void add(const SqlStatementRef& statement, size_t definition_position);
  // Entry::definition_position of a statement it has.
  [[nodiscard]] std::optional<size_t> definition_position(uint64_t id) const;
  void remove(uint64_t id) { entries_.erase(id); }
  void clear() { entries_.clear(); }
  [[nodiscard]] size_t size() const { return entries_.size(); }
  // Everything, removed (a DEALLOCATE ALL about to run); `restore` puts it back.
  Entries take_all() { return std::exchange(entries_, {}); }
  void restore(Entries entries);
  // A statement may have died since the last take_dead (one atomic load, and none for a server
  // that keeps no SQL statement: every release asks).
  [[nodiscard]] bool may_have_dead() const { return !entries_.empty() && deaths_since_seen(); }
  // The server names of the statements no client holds any more, removed from the set: the
  // caller deallocates them.
  std::vector<std::string> take_dead();

 private:
  [[nodiscard]] bool deaths_since_seen() const;
  Entries entries_;
  uint64_t deaths_seen_ = 0;
};

// One thing a renamed Query does to the pooler's belief, at its statement (counted in the Query
// as sent, the inserted PREPAREs included).
struct SqlEffect {
  enum class Kind : uint8_t {
    ensure,          // a PREPARE the pooler inserted: the server lacked the statement
    prepare,         // the client's PREPARE of a new name
    deallocate,      // the client's DEALLOCATE of a name it has
    deallocate_all,  // DEALLOCATE ALL or DISCARD ALL: every statement of the server goes
  };
  Kind kind = Kind::ensure;
  size_t statement = 0;
  SqlStatementRef sql_statement{};  // ensure, prepare, deallocate
  std::string client_name{};        // prepare, deallocate
  // deallocate_all: what the client and the server had, put back when it did not run.
  std::vector<std::pair<std::string, SqlStatementRef>> client_had{};
  ServerSqlStatements::Entries server_had{};
  size_t server_position = 0;  // deallocate: the server's Entry::definition_position
};

// A span of the Query as sent that differs from the client's (a name, an inserted PREPARE):
// error positions are moved back with it.
struct SqlEdit {
  size_t sent_offset = 0;
  size_t sent_length = 0;
  size_t client_offset = 0;
  size_t client_length = 0;
  // An inserted PREPARE: its statement (held by the plan's effects).
  const SqlStatement* inserted = nullptr;
};

// A statement of the Query as sent that executes a SQL prepared statement (EXECUTE, EXPLAIN
// EXECUTE, CREATE TABLE … AS EXECUTE): an error at it may point into its own text or, when the
// server analysed the definition again, into the text that prepared it there.
struct SqlExecution {
  size_t statement = 0;  // counted in the Query as sent
  SqlStatementRef sql_statement{};
  size_t sent_offset = 0;  // the statement's bytes in the Query as sent
  size_t sent_length = 0;
};

// The reply side of one renamed Query or Parse (kept with its pending replies).
class SqlQueryPlan {
 public:
  std::vector<SqlEffect> effects;
  // SqlPlanMode::parse: the statements the server lacks, prepared before the Parse (hidden).
  std::vector<SqlStatementRef> prepares;
  std::vector<SqlEdit> edits;
  std::vector<SqlExecution> executions;
  // Server name → client name, for the messages of errors ("prepared statement "p" …").
  std::vector<std::pair<std::string, std::string>> names;
  std::string client_sql;  // the Query as the client wrote it (error positions)
  std::string sent_sql;

  // A CommandComplete of the Query: true when it answers an inserted PREPARE (not the client's).
  bool on_command_complete();
  // An ErrorResponse: the statements from the failed one on did not run; what was believed of
  // them is undone, last first (once). `client` is null when the client is gone.
  void on_error(ClientSqlStatements* client, ServerSqlStatements& server);
  // A Parse's statement will not be executed (the next Parse, a Sync first): all of it undone.
  void undo(ClientSqlStatements* client, ServerSqlStatements& server) {
    completed_ = 0;
    on_error(client, server);
  }
  // The ErrorResponse body the client gets: the pooler's names replaced by the client's in the
  // message, detail and hint, the position (`server` has the statements) moved back into the
  // client's text (client_position). Nullopt: as is.
  [[nodiscard]] std::optional<std::string> client_error(std::string_view body,
                                                        const ServerSqlStatements& server) const;
  // An error position of the Query as sent, as PostgreSQL would have given it to the client:
  // in an inserted PREPARE's definition, or in a definition analysed again at the failing
  // statement's EXECUTE, counted from the start of the client's PREPARE text (the position
  // PostgreSQL gives when it analyses a statement again); in the client's own text, moved back
  // through the edits. Nullopt: in the pooler's own text, there is none.
  [[nodiscard]] std::optional<size_t> client_position(size_t position,
                                                      const ServerSqlStatements& server) const;

 private:
  size_t completed_ = 0;
  bool undone_ = false;
};

enum class SqlPlanMode {
  query,  // a Query: PREPAREs of what the server lacks are inserted into the text
  parse,  // a Parse (one statement): they are listed in `prepares`, for hidden messages before it
};

// Whether plan_sql_query can rename every statement of `verdict` that names a SQL prepared
// statement (libpg_query read the whole text, every name was found in it).
bool sql_prepare_renamable(const protocol::Classification& verdict);

// Renames the SQL prepared statements `uses` names in `sql` (a Query's text, whose classifier
// verdict gave `uses`) and inserts a PREPARE before each statement whose statement `server` lacks.
// Changes `client` and `server` as if every statement ran. Nullopt, nothing changed: nothing to
// rename, or a name that cannot be (not found in the text): the Query goes as it is.
std::optional<SqlQueryPlan> plan_sql_query(std::string_view sql,
                                           const std::vector<protocol::PreparedNameUse>& uses,
                                           ClientSqlStatements& client, ServerSqlStatements& server,
                                           SqlPlanMode mode = SqlPlanMode::query);

// A 1-based character position of `sent` (an ErrorResponse's 'P') moved back into `client`
// through `edits`; inside an edit it points at the edit's start. UTF-8 characters.
size_t map_error_position(size_t position, std::string_view sent, std::string_view client,
                          const std::vector<SqlEdit>& edits);

// The ErrorResponse body the client gets for an error of the PREPARE the pooler sent alone
// (SqlStatement::prepare_text, before a client's Parse): its position moved into the client's
// PREPARE text, as PostgreSQL gives it for the EXECUTE. Nullopt: as is.
std::optional<std::string> hidden_prepare_error(std::string_view body, const SqlStatement& stmt);

}  // namespace pgsluice
