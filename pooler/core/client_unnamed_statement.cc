// The client's unnamed statement in transaction mode. PostgreSQL keeps a session's unnamed
// statement until its next unnamed Parse, a Query or a Close of it, across transactions: psql's
// \gdesc (and pgx's describe-exec mode) parse it in one exchange and describe or bind it in the
// next, which may run on another server, or on one where another client's unnamed statement
// took its place. So the client's last unnamed Parse is kept (UnnamedStatement), each server
// knows whose unnamed statement it has (ServerStatements::unnamed), and a Describe or Bind of
// the unnamed statement on a server that lacks the client's gets a hidden Parse of it first, as
// a named statement is prepared where it is used. A Parse, Bind and Execute in one exchange (what
// most drivers send per query) finds its statement where it was parsed: no message is added, and
// the Parse is copied once (Client::route_parse).
#include "pgsluice/protocol/frontend.h"
#include "pgsluice/protocol/writer.h"
#include "pooler/core/client.h"
#include "pooler/core/server.h"

namespace pgsluice {

namespace pp = pgsluice::protocol;

void Client::keep_renamed_unnamed_parse(const pp::Parse& parse) {
  UnnamedStatement& unnamed = prepared_.unnamed;
  // It names the client's SQL prepared statements: kept renamed, with those it EXECUTEs, when
  // that is all it does; a PREPARE or DEALLOCATE in it lives where it was parsed.
  unnamed.parse.clear();
  unnamed.sql_dependencies.clear();
  if (std::optional<SqlQueryPlan> renamed = plan_named_sql(parse.query)) {
    pp::write_parse(unnamed.parse, "", renamed->sent_sql, parse.parameter_types);
    unnamed.sql_dependencies = std::move(renamed->prepares);
  }
}

void Client::prepare_unnamed_statement(std::string& out) {
  Server& server = *server_;
  const UnnamedStatement& unnamed = prepared_.unnamed;
  size_t mark = out.size();
  if (unnamed.serial == 0 || unnamed.parse.empty()) {
    // None (never parsed, or ended by a Query or a Close), or one that lives where it was
    // parsed: the server's own (another client's, the pooler's) goes, so that PostgreSQL
    // answers the client's Describe or Bind with its 26000.
    pp::write_close(out, pp::DescribeTarget::statement, "");
    server.expect_sent(PendingReply{.kind = PendingKind::close_hidden}, out, mark);
    server.note_unnamed_statement(0, 0);
    return;
  }
  for (const SqlStatementRef& dependency : unnamed.sql_dependencies) {
    if (!server.sql_statements().has(dependency->id())) {
      server.prepare_sql_statement(dependency, out);
    }
  }
  mark = out.size();
  out.append(unnamed.parse);
  server.expect_sent(PendingReply{.kind = PendingKind::parse_hidden}, out, mark);
  server.note_unnamed_statement(id_, unnamed.serial);
}

void Client::drop_unnamed_statement() {
  UnnamedStatement& unnamed = prepared_.unnamed;
  unnamed.serial = 0;
  unnamed.parse.clear();
  unnamed.sql_dependencies.clear();
}

}  // namespace pgsluice
