// The client's side of protocol-level prepared statements in transaction mode: its statement
// names map to pooler-wide statements (prepared_statements.h); Parse, Bind, Describe and Close
// of named statements are rewritten or answered here, and the server queues which replies the
// client gets (pending_replies.h). Unnamed statements and portals pass through untouched. Also
// the statements the session-state checks refused (write_refusal, bind_refused_statement).
#include <spdlog/spdlog.h>

#include <algorithm>

#include "pgsluice/protocol/deallocate.h"
#include "pgsluice/protocol/frontend.h"
#include "pgsluice/protocol/message_types.h"
#include "pgsluice/protocol/sql_lexer.h"
#include "pgsluice/protocol/writer.h"
#include "pooler/base/sqlstate.h"
#include "pooler/core/client.h"
#include "pooler/core/pool.h"
#include "pooler/core/server.h"
#include "pooler/core/session_checks.h"
#include "pooler/core/worker.h"

namespace pgsluice {

namespace pp = pgsluice::protocol;
namespace fe = pgsluice::protocol::frontend;

void Client::forget_statement(const std::string& name, uint64_t id) {
  auto it = prepared_.by_name.find(name);
  if (it == prepared_.by_name.end() || it->second->id != id) return;
  drop_unrun_statement(name);
  if (prepared_.unrun.size() >= ClientPreparedStatements::kUnrunKept) {
    prepared_.unrun.erase(prepared_.unrun.begin());
  }
  prepared_.unrun.emplace_back(name, it->second.ref());
  prepared_.by_name.erase(it);
}

std::unordered_map<std::string, ClientStatement>::iterator Client::find_statement(
    std::string_view name) {
  auto it = prepared_.by_name.find(std::string(name));
  if (it != prepared_.by_name.end() || prepared_.unrun.empty()) return it;
  auto unrun = std::find_if(prepared_.unrun.begin(), prepared_.unrun.end(),
                            [&](const auto& entry) { return entry.first == name; });
  if (unrun == prepared_.unrun.end()) return prepared_.by_name.end();
  spdlog::debug("{} statement '{}' was not prepared (an error in its batch): prepared now",
                who_.log_id, name);
  it = prepared_.by_name.emplace(unrun->first, ClientStatement(unrun->second)).first;
  prepared_.unrun.erase(unrun);
  return it;
}

void Client::drop_unrun_statement(std::string_view name) {
  std::erase_if(prepared_.unrun, [&](const auto& entry) { return entry.first == name; });
}

void Client::forget_all_statements() {
  prepared_.by_name.clear();
  prepared_.unrun.clear();
  prepared_.sql.clear();
}

void Client::note_stale_plan_seen(const PreparedStatement& stmt) {
  for (auto& [name, use] : prepared_.by_name) {
    // A name told a shape is judged by it at its next Bind (route_told_bind): the copy a
    // server prepares again describes the new shape, and a name told the old one is refused.
    if (use->id == stmt.id && use.told_shape == nullptr) use.saw_current();
  }
}

void Client::note_told_shape(std::string_view name, const PreparedStatement& stmt,
                             std::shared_ptr<const std::string> shape) {
  auto it = find_statement(name);
  if (it == prepared_.by_name.end() || it->second->id != stmt.id) return;
  ClientStatement& use = it->second;
  // Described again with another shape: PostgreSQL would have refused the Describe (0A000);
  // the statement is stale for this client from now on.
  if (use.told_shape != nullptr && *use.told_shape != *shape) use.shape_changed = true;
  use.told_shape = std::move(shape);
}

// Whether the client's messages after a Bind of `portal`, as far as they have arrived, describe
// that portal before executing it (libpq, psycopg, pgbench do; asyncpg and pgjdbc rely on the
// row description they cached). Drivers write a batch at once: what has not arrived yet counts
// as no Describe, which gives PostgreSQL's own answer.
static bool batch_describes_portal(std::string_view rest, std::string_view portal) {
  while (rest.size() >= 5) {
    char type = rest[0];
    uint32_t length = 0;
    for (int i = 1; i <= 4; ++i) length = (length << 8) | static_cast<unsigned char>(rest[i]);
    if (length < 4 || rest.size() - 1 < length) return false;
    std::string_view body = rest.substr(5, length - 4);
    if (type == fe::kDescribe && !body.empty() &&
        body[0] == static_cast<char>(pp::DescribeTarget::portal)) {
      std::string_view name = body.substr(1);
      name = name.substr(0, name.find('\0'));
      if (name == portal) return true;
    }
    if (type == fe::kExecute || type == fe::kSync || type == fe::kQuery || type == fe::kBind) {
      return false;
    }
    rest.remove_prefix(1 + length);
  }
  return false;
}

void Client::refuse_until_sync(std::string code, std::string message, std::string hint) {
  PendingReply reply{.kind = PendingKind::made_error};
  pp::write_error_response(
      reply.answer,
      pp::ErrorNotice{.severity = "ERROR", .code = code, .message = message, .hint = hint});
  server_->expect(std::move(reply));
  // PostgreSQL skips everything up to the Sync after an error: the messages that follow are
  // not sent, and the Sync brings the ReadyForQuery.
  discard_until_sync_ = true;
}

// The SQL prepared statements `stmt` EXECUTEs (SQL PREPARE kept) go on the server first.
static void ensure_sql_dependencies(Server& server, const PreparedStatement& stmt,
                                    std::string& out) {
  for (const SqlStatementRef& dependency : stmt.sql_dependencies) {
    if (!server.sql_statements().has(dependency->id())) {
      server.prepare_sql_statement(dependency, out);
    }
  }
}

// Makes sure the linked server has `stmt`, preparing it there (hidden from the client) if not.
static void ensure_on_server(Server& server, const PreparedStatement& stmt, std::string& out) {
  ensure_sql_dependencies(server, stmt, out);
  if (server.has_statement(stmt)) {
    server.touch_statement(stmt.id);
    return;
  }
  server.prepare_statement(stmt, /*hidden=*/true, {}, out);
}

Client::Routed Client::route_parse(const pp::Message& message, std::string& out) {
  Server& server = *server_;
  auto parse = pp::parse_parse(message.body);
  if (!parse) return Routed::as_is;
  if (parse.value.statement.empty()) {
    // The client's unnamed statement, kept (client_unnamed_statement.cc). PostgreSQL drops its
    // unnamed statement before it reads the Parse: the client's earlier one is gone whatever
    // becomes of this one (an error or a skip: Server::skip_pending_to_sync).
    UnnamedStatement& unnamed = prepared_.unnamed;
    unnamed.serial = ++unnamed.parses;
    server.note_unnamed_statement(id_, unnamed.serial);
    if (std::optional<Routed> routed = route_sql_parse(parse.value, out)) {
      keep_renamed_unnamed_parse(parse.value);
      return *routed;
    }
    // psycopg sends DEALLOCATE ALL through the extended protocol after a ROLLBACK: it drops
    // the pooler's statements on the server too.
    pp::DeallocateCommand command = pp::parse_deallocate_command(parse.value.query);
    if (command.kind == pp::DeallocateCommand::Kind::deallocate_all ||
        command.kind == pp::DeallocateCommand::Kind::discard_all) {
      forget_all_statements();
      server.statements_may_be_gone();
    }
    // Forwarded as it is, its reply queued as any forwarded Parse's.
    unnamed.parse.assign(message.wire);
    if (!unnamed.sql_dependencies.empty()) unnamed.sql_dependencies.clear();
    return Routed::as_is;
  }
  std::string name(parse.value.statement);
  drop_unrun_statement(name);
  ++pool_->counters().client_parse_count;
  auto existing = prepared_.by_name.find(name);
  if (existing != prepared_.by_name.end()) {
    // PgBouncer's line for it (the client's bug, worth seeing in the log).
    spdlog::warn("{} prepared statement '{}' was already prepared", who_.log_id, name);
    // PostgreSQL's 42P05 fails the transaction (status 'E' in a block, and the COMMIT that
    // follows rolls back): a refusal made up here could not do that. The server gets the
    // client's Parse under the name of the statement the client's name maps to, which it
    // has (prepared first if not); its 42P05 goes to the client under the client's name,
    // and any error PostgreSQL checks first (syntax, an aborted transaction) as it is.
    PreparedStatementRef held = existing->second.ref();
    ensure_on_server(server, *held, out);
    size_t mark = out.size();
    pp::write_parse(out, held->server_name, parse.value.query, parse.value.parameter_types);
    server.expect_sent(PendingReply{.kind = PendingKind::parse_duplicate, .client_name = name}, out,
                       mark);
    // The server skips the rest of the batch after the error: so does the pooler, which
    // must not act on Close or Parse messages PostgreSQL would not have run.
    discard_until_sync_ = true;
    return Routed::written;
  }
  // A text that EXECUTEs the client's SQL prepared statements names the pooler's (one client's).
  std::optional<SqlQueryPlan> renamed = plan_named_sql(parse.value.query);
  PreparedStatementRef stmt = worker_.prepared_registry().get_or_create(
      renamed ? std::string_view(renamed->sent_sql) : parse.value.query,
      parse.value.parameter_types,
      renamed ? std::move(renamed->prepares) : std::vector<SqlStatementRef>{});
  ensure_sql_dependencies(server, *stmt, out);
  prepared_.by_name.emplace(name, ClientStatement(stmt));
  ++stmt->stats->client_parses;
  if (server.has_statement(*stmt)) {
    // Prepared on this server already (by this client earlier, or by another): the client
    // gets its ParseComplete without the server parsing anything.
    server.touch_statement(stmt->id);
    server.expect(PendingReply{
        .kind = PendingKind::made_parse_complete, .statement_id = stmt->id, .client_name = name});
    return Routed::answered;
  }
  server.prepare_statement(*stmt, /*hidden=*/false, name, out);
  return Routed::written;
}

bool Client::bind_needs_checks(const PreparedStatement& stmt) {
  int8_t known = stmt.bind_checks.load(std::memory_order_relaxed);
  if (known < 0) {
    known = 0;
    // The prefilter first, as at a Parse: most statements never reach the classifier.
    if (pp::may_change_session_state(stmt.query)) {
      const pp::Classification& verdict = worker_.classifier().classify(stmt.query);
      known = !verdict.findings.empty() || verdict.cleanup.any() || verdict.calls_opaque_function()
                  ? 1
                  : 0;
    }
    stmt.bind_checks.store(known, std::memory_order_relaxed);
  }
  return known == 1;
}

std::optional<Client::Routed> Client::route_told_bind(ClientStatement& use, std::string_view name,
                                                      std::string& out) {
  Server& server = *server_;
  bool changed = use.shape_changed;
  if (!changed) {
    const std::shared_ptr<const std::string>* shape = server.statement_shape(*use);
    if (shape != nullptr) {
      changed = shape->get() != use.told_shape.get() && **shape != *use.told_shape;
      use.shape_changed = changed;
    } else if (server.may_check_shape()) {
      // The server's copy has not described itself (prepared here for another client, or just
      // now): it does before this Bind runs. A copy it already has is prepared again first: a
      // Describe of a stale copy would fail (0A000) where the client's own statement would not.
      ensure_sql_dependencies(server, *use, out);
      server.prepare_statement_again(*use, out);
      server.check_statement_shape(use.ref(), out);
      --pool_->counters().bind_count;  // counted when it is read again
      return Routed::held;
    }
    // Else in the middle of a batch: the copy is not checked (docs/design.md).
  }
  if (!changed || !server.may_refuse_stale_bind()) return std::nullopt;
  ++use->stats->stale_refusals;
  spdlog::debug("{} Bind of {} ({}) refused: the shape it was told changed", who_.log_id, name,
                use->server_name);
  server.refuse_stale_bind(use.ref(), out);
  // The server skips the rest of the batch after the error: so does the pooler.
  discard_until_sync_ = true;
  return Routed::written;
}

Client::Routed Client::route_bind(const pp::Message& message, std::string& out) {
  Server& server = *server_;
  auto bind = pp::parse_bind(message.body);
  if (!bind) return Routed::as_is;
  // As PgBouncer, Binds of named statements only: the unnamed one is not in the registry, but
  // the client's own, parsed again where the server lacks it (client_unnamed_statement.cc).
  if (bind.value.statement.empty()) {
    if (!server.has_unnamed_statement(id_, prepared_.unnamed.serial)) {
      prepare_unnamed_statement(out);
    }
    return Routed::as_is;
  }
  ++pool_->counters().bind_count;
  auto it = find_statement(bind.value.statement);
  // Unknown to the pooler: the server answers with PostgreSQL's own error (26000).
  if (it == prepared_.by_name.end()) return Routed::as_is;
  ClientStatement& use = it->second;
  if (use.told_shape != nullptr) {
    if (std::optional<Routed> routed = route_told_bind(use, it->first, out)) return *routed;
  } else if (use.stale()) {
    // Another client's stale plan (0A000) made the statement be prepared again with a new
    // row description since this client last saw it. Without a Describe of the portal it
    // would read rows of the new shape with its cached description; PostgreSQL gives it
    // 0A000 at Bind (failing the transaction), after which drivers prepare again.
    bool described = batch_describes_portal(channel_.input().unread(), bind.value.portal);
    if (!described && server.may_refuse_stale_bind()) {
      // The client's next attempt (after preparing again) works: its seen generation is
      // updated when the error reaches it (Client::note_stale_plan_seen).
      ++use->stats->stale_refusals;
      spdlog::debug("{} Bind of {} ({}) refused: the statement's result type changed", who_.log_id,
                    it->first, use->server_name);
      server.refuse_stale_bind(use.ref(), out);
      // The server skips the rest of the batch after the error: so does the pooler, which
      // must not act on Close or Parse messages PostgreSQL would not have run.
      discard_until_sync_ = true;
      return Routed::written;
    }
    if (described) use.saw_current();
  }
  // A SET, set_config or advisory lock the statement runs is kept, cleaned or pinned at every
  // execution, not only in the transaction of its Parse (asyncpg and pgjdbc bind a cached
  // `SELECT set_config('app.tenant', $1, false)` on whichever server the client has now).
  if (session_checks_ && bind_needs_checks(*use)) {
    std::string text, hint;
    if (check_bound_statement(worker_, *this, server, session_policy_, use->query, text, hint) ==
        SessionCheckResult::refused) {
      refuse_until_sync(std::string(sqlstate::kFeatureNotSupported), std::move(text),
                        std::move(hint));
      return Routed::answered;
    }
  }
  ensure_on_server(server, *use, out);
  ++use->stats->binds;
  size_t mark = out.size();
  pp::write_bind_renamed(out, bind.value.portal, use->server_name, bind.value.after_statement);
  // Not told yet: the Describe of the portal that follows (libpq's way) tells it.
  const bool told = use.told_shape != nullptr;
  server.expect_rewritten(PendingKind::bind, use.ref(), std::string_view(out).substr(mark),
                          told ? std::string() : it->first, told);
  return Routed::written;
}

Client::Routed Client::route_describe(const pp::Message& message, std::string& out) {
  Server& server = *server_;
  auto describe = pp::parse_describe(message.body);
  if (!describe || describe.value.target() != pp::DescribeTarget::statement) return Routed::as_is;
  if (describe.value.name.empty()) {
    if (!server.has_unnamed_statement(id_, prepared_.unnamed.serial)) {
      prepare_unnamed_statement(out);
    }
    return Routed::as_is;
  }
  auto it = find_statement(describe.value.name);
  if (it == prepared_.by_name.end()) return Routed::as_is;
  ensure_on_server(server, *it->second, out);
  it->second.saw_current();  // the description the client gets is this generation's
  size_t mark = out.size();
  pp::write_describe(out, pp::DescribeTarget::statement, it->second->server_name);
  // A client told the shape before gets PostgreSQL's 0A000 if the statement went stale.
  server.expect_rewritten(PendingKind::describe, it->second.ref(),
                          std::string_view(out).substr(mark), it->first,
                          it->second.told_shape != nullptr);
  return Routed::written;
}

Client::Routed Client::route_close(const pp::Message& message) {
  Server& server = *server_;
  auto close = pp::parse_close(message.body);
  if (!close || close.value.target() != pp::DescribeTarget::statement) return Routed::as_is;
  if (close.value.name.empty()) {
    // PostgreSQL drops the unnamed statement (whoever's the server has).
    forget_unnamed_statement();
    server.note_unnamed_statement(0, 0);
    return Routed::as_is;
  }
  // The statement stays on the servers for other clients; only this client's name goes.
  prepared_.by_name.erase(std::string(close.value.name));
  drop_unrun_statement(close.value.name);
  server.expect(PendingReply{.kind = PendingKind::made_close_complete});
  return Routed::answered;
}

Client::Routed Client::route_query(const pp::Message& message, std::string& out) {
  Server& server = *server_;
  auto query = pp::parse_query(message.body);
  if (!query) return Routed::as_is;
  pp::DeallocateCommand command = pp::parse_deallocate_command(query.value.sql);
  // DEALLOCATE of a protocol-level statement's name is answered below; anything else that names
  // SQL prepared statements is renamed when SQL PREPARE is kept.
  const bool protocol_name = command.kind == pp::DeallocateCommand::Kind::deallocate_name &&
                             prepared_.by_name.contains(command.name) &&
                             !prepared_.sql.contains(command.name);
  // route_sql_query has nothing to do for most Queries: no PREPARE of a Parse is left to drop,
  // and the session checks' prefilter (memoized for this text) saw no SQL prepared statement.
  const bool may_name_sql_statements =
      prepared_.unexecuted_sql_parse != nullptr ||
      (session_checks_ && prefilter_.may_change_session_state(query.value.sql));
  if (!protocol_name && may_name_sql_statements) {
    if (std::optional<Routed> routed = route_sql_query(query.value.sql, out)) return *routed;
  }
  switch (command.kind) {
    case pp::DeallocateCommand::Kind::none:
      return Routed::as_is;
    case pp::DeallocateCommand::Kind::deallocate_name:
      drop_unrun_statement(command.name);
      if (prepared_.by_name.erase(command.name) == 0) return Routed::as_is;  // an SQL PREPARE's
      // Answered here, still a Query: the unnamed statement goes (as a Query sent does, in
      // Server::note_client_message).
      forget_unnamed_statement();
      {
        PendingReply reply{.kind = PendingKind::made_command_done};
        pp::write_command_complete(reply.answer, "DEALLOCATE");
        server.expect(std::move(reply));
      }
      return Routed::answered;
    case pp::DeallocateCommand::Kind::deallocate_all:
    case pp::DeallocateCommand::Kind::discard_all:
      // Runs on the server (it has other effects), and ends the pooler's statements there
      // (unless an error inside a transaction block makes the server refuse it).
      forget_all_statements();
      server.statements_may_be_gone();
      return Routed::as_is;
  }
  return Routed::as_is;
}

Client::Routed Client::route_statement_message(const pp::Message& message, std::string& out) {
  switch (message.type) {
    case fe::kExecute:
    case fe::kSync:
      return route_execute_or_sync(message, out);
    case fe::kParse:
      return route_parse(message, out);
    case fe::kBind:
      return route_bind(message, out);
    case fe::kDescribe:
      return route_describe(message, out);
    case fe::kClose:
      return route_close(message);
    case fe::kQuery:
      return route_query(message, out);
    default:
      return Routed::as_is;
  }
}

// --- refusals of the session-state checks without statement rewriting ---

void Client::write_refusal(const pp::Message& message, std::string_view text, std::string_view hint,
                           std::string& out) {
  std::string statement = rejection_statement(text, hint);
  if (message.type == fe::kQuery) {
    pp::write_query(out, statement);
    return;
  }
  auto parse = pp::parse_parse(message.body);
  std::string_view name = parse ? parse.value.statement : std::string_view();
  pp::write_parse(out, name, statement, {});
  if (!server_->rewrites_statements() &&
      std::find(prepared_.refused.begin(), prepared_.refused.end(), name) ==
          prepared_.refused.end()) {
    prepared_.refused.emplace_back(name);
  }
}

bool Client::bind_refused_statement(const pp::Message& message, std::string& out) {
  auto forget = [this](std::string_view name) {
    std::erase_if(prepared_.refused, [&](const std::string& n) { return n == name; });
  };
  if (message.type == fe::kParse) {
    // A statement that passed the checks takes the name again.
    if (auto p = pp::parse_parse(message.body)) forget(p.value.statement);
    return false;
  }
  if (message.type == fe::kClose) {
    auto c = pp::parse_close(message.body);
    if (c && c.value.target() == pp::DescribeTarget::statement) forget(c.value.name);
    return false;
  }
  auto bind = pp::parse_bind(message.body);
  if (!bind || std::find(prepared_.refused.begin(), prepared_.refused.end(),
                         bind.value.statement) == prepared_.refused.end()) {
    return false;
  }
  // No parameter format, no parameter, no result format.
  static constexpr char kNothing[6] = {0, 0, 0, 0, 0, 0};
  pp::write_bind_renamed(out, bind.value.portal, bind.value.statement,
                         std::string_view(kNothing, sizeof(kNothing)));
  return true;
}

}  // namespace pgsluice
