// The client's side of protocol-level prepared statements in transaction mode: its statement
// names map to pooler-wide statements (prepared_statements.h); Parse, Bind, Describe and Close
// of named statements are rewritten or answered here, and the server queues which replies the
// client gets (pending_replies.h). Unnamed statements and portals pass through untouched.
#include <spdlog/spdlog.h>

#include "pgsluice/protocol/frontend.h"
#include "pgsluice/protocol/message_types.h"
#include "pgsluice/protocol/writer.h"
#include "pooler/client.h"
#include "pooler/pool.h"
#include "pooler/server.h"
#include "pooler/worker.h"

namespace pgsluice {

namespace pp = pgsluice::protocol;
namespace fe = pgsluice::protocol::frontend;

void Client::forget_statement(const std::string& name, uint64_t id) {
  auto it = statements_.find(name);
  if (it != statements_.end() && it->second->id == id) statements_.erase(it);
}

void Client::refuse_until_sync(std::string code, std::string message, std::string hint) {
  server_->expect(PendingReply{PendingKind::made_error, 0, std::move(message), std::move(code),
                               std::move(hint)});
  // PostgreSQL skips everything up to the Sync after an error: the messages that follow are
  // not sent, and the Sync brings the ReadyForQuery.
  discard_until_sync_ = true;
}

// Makes sure the linked server has `stmt`, preparing it there (hidden from the client) if not.
static void ensure_on_server(Server& server, const PreparedStatement& stmt, std::string& out) {
  if (server.has_statement(stmt.id)) {
    server.touch_statement(stmt.id);
    return;
  }
  server.prepare_statement(stmt, /*hidden=*/true, {}, out);
}

Client::Routed Client::route_statement_message(const pp::Message& message, std::string& out) {
  Server& server = *server_;
  switch (message.type) {
    case fe::kParse: {
      auto parse = pp::parse_parse(message.body);
      if (!parse || parse.value.statement.empty()) return Routed::as_is;
      std::string name(parse.value.statement);
      ++pool_->counters().client_parse_count;
      if (statements_.count(name) != 0) {
        refuse_until_sync("42P05", fmt::format("prepared statement \"{}\" already exists", name),
                          {});
        return Routed::answered;
      }
      PreparedStatementRef stmt =
          worker_.prepared_registry().get_or_create(parse.value.query, parse.value.parameter_types);
      statements_.emplace(name, stmt);
      if (server.has_statement(stmt->id)) {
        // Prepared on this server already (by this client earlier, or by another): the client
        // gets its ParseComplete without the server parsing anything.
        server.touch_statement(stmt->id);
        server.expect(PendingReply{PendingKind::made_parse_complete, stmt->id, name, {}, {}});
        return Routed::answered;
      }
      server.prepare_statement(*stmt, /*hidden=*/false, name, out);
      return Routed::written;
    }
    case fe::kBind: {
      auto bind = pp::parse_bind(message.body);
      if (!bind) return Routed::as_is;
      ++pool_->counters().bind_count;
      if (bind.value.statement.empty()) return Routed::as_is;
      auto it = statements_.find(std::string(bind.value.statement));
      // Unknown to the pooler: the server answers with PostgreSQL's own error (26000).
      if (it == statements_.end()) return Routed::as_is;
      ensure_on_server(server, *it->second, out);
      pp::write_bind_renamed(out, bind.value.portal, it->second->server_name,
                             bind.value.after_statement);
      server.expect(PendingReply{PendingKind::bind, 0, {}, {}, {}});
      return Routed::written;
    }
    case fe::kDescribe: {
      auto describe = pp::parse_describe(message.body);
      if (!describe || describe.value.kind != 'S' || describe.value.name.empty()) {
        return Routed::as_is;
      }
      auto it = statements_.find(std::string(describe.value.name));
      if (it == statements_.end()) return Routed::as_is;
      ensure_on_server(server, *it->second, out);
      pp::write_describe(out, 'S', it->second->server_name);
      server.expect(PendingReply{PendingKind::describe, 0, {}, {}, {}});
      return Routed::written;
    }
    case fe::kClose: {
      auto close = pp::parse_close(message.body);
      if (!close || close.value.kind != 'S' || close.value.name.empty()) return Routed::as_is;
      // The statement stays on the servers for other clients; only this client's name goes.
      statements_.erase(std::string(close.value.name));
      server.expect(PendingReply{PendingKind::made_close_complete, 0, {}, {}, {}});
      return Routed::answered;
    }
    case fe::kQuery: {
      auto query = pp::parse_query(message.body);
      if (!query) return Routed::as_is;
      DeallocateCommand command = parse_deallocate_command(query.value.sql);
      switch (command.kind) {
        case DeallocateCommand::Kind::none:
          return Routed::as_is;
        case DeallocateCommand::Kind::deallocate_name:
          if (statements_.erase(command.name) == 0) return Routed::as_is;  // an SQL PREPARE's
          server.expect(PendingReply{PendingKind::made_command_done, 0, "DEALLOCATE", {}, {}});
          return Routed::answered;
        case DeallocateCommand::Kind::deallocate_all:
        case DeallocateCommand::Kind::discard_all:
          // Runs on the server (it has other effects), and ends the pooler's statements there.
          statements_.clear();
          server.forget_statements();
          return Routed::as_is;
      }
      return Routed::as_is;
    }
    default:
      return Routed::as_is;
  }
}

}  // namespace pgsluice
