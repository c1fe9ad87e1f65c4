// SQL PREPARE kept, the client's side (pooler/session_state/sql_prepared.h): a Query that names
// SQL prepared statements goes to the server with the pooler's names, and PREPAREs of what the
// server lacks inserted; the replies' side is in server_statements.cc.
#include <spdlog/spdlog.h>

#include "pgsluice/protocol/frontend.h"
#include "pgsluice/protocol/message_types.h"
#include "pgsluice/protocol/session_state.h"
#include "pgsluice/protocol/writer.h"
#include "pooler/base/log_level.h"
#include "pooler/core/client.h"
#include "pooler/core/server.h"
#include "pooler/core/worker.h"

namespace pgsluice {

namespace pp = pgsluice::protocol;

bool Client::keeps_sql_prepare() const {
  return session_checks_ &&
         session_policy_.action_for(pp::SessionStateKind::prepare) == SessionAction::keep;
}

std::optional<SqlQueryPlan> Client::plan_sql(std::string_view sql, SqlPlanMode mode) {
  // Asked by the session-state check already for this message (PrefilterMemo).
  if (!keeps_sql_prepare() || !prefilter_.may_change_session_state(sql)) return std::nullopt;
  // The verdict the session-state check just cached for this text.
  const pp::Classification& verdict = worker_.classifier().classify(sql);
  // Statement indexes count what libpg_query read: a piece it could not read (newer syntax)
  // would shift them. Such a text goes as it is (its PREPARE pinned the client: session_checks).
  if (verdict.source != pp::VerdictSource::parser || verdict.prepared_names.empty()) {
    return std::nullopt;
  }
  Server& server = *server_;
  std::optional<SqlQueryPlan> plan =
      plan_sql_query(sql, verdict.prepared_names, prepared_.sql, server.sql_statements(), mode);
  if (!plan) return std::nullopt;
  for (const SqlEffect& effect : plan->effects) {
    if (effect.kind != SqlEffect::Kind::deallocate_all) continue;
    // DEALLOCATE ALL and DISCARD ALL end the protocol-level statements too.
    prepared_.unrun.clear();
    prepared_.by_name.clear();
    server.statements_may_be_gone();
    break;
  }
  if (log_enabled(spdlog::level::debug)) {
    spdlog::debug("{} SQL prepared statements renamed: {}", who_.log_id, plan->sent_sql);
  }
  return plan;
}

std::optional<Client::Routed> Client::route_sql_query(std::string_view sql, std::string& out) {
  // A Query ends the unnamed statement: a Parse's PREPARE never executed did not happen.
  drop_unexecuted_sql_parse();
  std::optional<SqlQueryPlan> plan = plan_sql(sql, SqlPlanMode::query);
  if (!plan) return std::nullopt;
  const size_t mark = out.size();
  pp::write_query(out, plan->sent_sql);
  server_->expect_sent(PendingReply{.kind = PendingKind::query,
                                    .sql = std::make_shared<SqlQueryPlan>(std::move(*plan))},
                       out, mark);
  return Routed::written;
}

std::optional<Client::Routed> Client::route_sql_parse(const pp::Parse& parse, std::string& out) {
  drop_unexecuted_sql_parse();
  std::optional<SqlQueryPlan> plan = plan_sql(parse.query, SqlPlanMode::parse);
  if (!plan) return std::nullopt;
  Server& server = *server_;
  for (const SqlStatementRef& stmt : plan->prepares) server.prepare_sql_statement(stmt, out);
  auto shared = std::make_shared<SqlQueryPlan>(std::move(*plan));
  const size_t mark = out.size();
  pp::write_parse(out, "", shared->sent_sql, parse.parameter_types);
  server.expect_sent(PendingReply{.kind = PendingKind::parse, .sql = shared}, out, mark);
  // What it does takes hold at the Execute of its portal (attached there), not at the Parse.
  prepared_.unexecuted_sql_parse = std::move(shared);
  return Routed::written;
}

Client::Routed Client::route_execute_or_sync(const pp::Message& message, std::string& out) {
  if (prepared_.unexecuted_sql_parse == nullptr) return Routed::as_is;
  if (message.type == pp::frontend::kSync) {
    // A Parse that was never executed (Parse, Describe, Sync) changed nothing on the server.
    drop_unexecuted_sql_parse();
    return Routed::as_is;
  }
  // The first Execute after the renamed Parse: its CommandComplete says the statement ran, its
  // error (or the server skipping it) that it did not.
  const size_t mark = out.size();
  out.append(message.wire);
  server_->expect_sent(
      PendingReply{.kind = PendingKind::execute, .sql = std::move(prepared_.unexecuted_sql_parse)},
      out, mark);
  prepared_.unexecuted_sql_parse.reset();
  return Routed::written;
}

std::optional<SqlQueryPlan> Client::plan_named_sql(std::string_view query) {
  if (!keeps_sql_prepare() || !prefilter_.may_change_session_state(query)) return std::nullopt;
  const pp::Classification& verdict = worker_.classifier().classify(query);
  if (verdict.source != pp::VerdictSource::parser || verdict.prepared_names.empty()) {
    return std::nullopt;
  }
  for (const pp::PreparedNameUse& use : verdict.prepared_names) {
    if (use.op != pp::PreparedNameUse::Op::execute) return std::nullopt;
  }
  // Planned against an empty set: every statement it uses is listed in `prepares`, and no
  // server's belief changes (ensure_sql_dependencies prepares them where needed).
  ServerSqlStatements none;
  return plan_sql_query(query, verdict.prepared_names, prepared_.sql, none, SqlPlanMode::parse);
}

void Client::drop_unexecuted_sql_parse() {
  if (prepared_.unexecuted_sql_parse == nullptr) return;
  if (server_ != nullptr)
    prepared_.unexecuted_sql_parse->undo(&prepared_.sql, server_->sql_statements());
  prepared_.unexecuted_sql_parse.reset();
}

}  // namespace pgsluice
