// The prepared statements a client has under its own names while the pooler rewrites them
// (client_statements.cc, client_sql_prepare.cc): protocol-level ones by name, the names whose
// Parse did not run, its SQL prepared statements (SQL PREPARE kept), and the statements whose
// Bind is refused after their result type changed.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "pooler/core/prepared_statements.h"
#include "pooler/session_state/sql_prepared.h"

namespace pgsluice {

// The client's unnamed statement (client_unnamed_statement.cc). PostgreSQL keeps it until the
// next unnamed Parse, a Query or a Close of it, across transactions: a Describe or Bind of it
// may come in a later transaction, on another server.
struct UnnamedStatement {
  uint64_t serial = 0;  // the Parse that made it (ServerStatements::unnamed); 0: none
  uint64_t parses = 0;  // the client's unnamed Parses so far: the next one's serial follows
  // The Parse as sent, parsed again (hidden) on a server that lacks the statement; empty when it
  // cannot be (a PREPARE or DEALLOCATE in it, SQL PREPARE kept): it lives where it was parsed.
  std::string parse;
  std::vector<SqlStatementRef> sql_dependencies;  // SQL prepared statements it EXECUTEs
};

struct ClientPreparedStatements {
  std::unordered_map<std::string, ClientStatement> by_name;
  // Names whose Parse did not run (Client::forget_statement), with their statement. PostgreSQL
  // would answer a later Bind or Describe of one with 26000; PgBouncer keeps the name and
  // prepares the statement where it runs, which psycopg 3.1 relies on (it reuses the names of a
  // pipeline that failed). Kept as PgBouncer: only a Bind or Describe of such a name, which
  // would fail otherwise, sees it; a new Parse of the name is PostgreSQL's. The oldest go first
  // past kUnrunKept, so that failing Parses cannot pile up.
  // A vector, not a deque: libstdc++'s deque allocates its map and a first block (0.5 kB) when
  // constructed, which every idle client paid for a list that is nearly always empty (issue 17).
  // Erasing at the front of at most 64 entries, once per failed batch, costs nothing that shows.
  std::vector<std::pair<std::string, PreparedStatementRef>> unrun;
  static constexpr size_t kUnrunKept = 64;
  ClientSqlStatements sql;
  // A renamed unnamed Parse whose Execute has not come yet (Client::route_execute_or_sync).
  std::shared_ptr<SqlQueryPlan> unexecuted_sql_parse;
  UnnamedStatement unnamed;
  std::vector<std::string> refused;  // see Client::bind_refused_statement()
};

}  // namespace pgsluice
