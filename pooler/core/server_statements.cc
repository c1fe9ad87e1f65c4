// The server's side of the statement rewriter (members of Server, kept apart from server.cc):
// the replies each rewritten request expects, those the pooler makes up or swallows, the skip to
// Sync after an error, the shape checks, and the retry of a batch after a stale plan.
#include <spdlog/spdlog.h>

#include <optional>

#include "pgsluice/protocol/backend.h"
#include "pgsluice/protocol/message_types.h"
#include "pgsluice/protocol/writer.h"
#include "pooler/base/sqlstate.h"
#include "pooler/core/client.h"
#include "pooler/core/pool.h"
#include "pooler/core/server.h"
#include "pooler/core/worker.h"

namespace pgsluice {

// ------------------------------------------------------------------------------------------------
// The server's side of protocol-level prepared statements (members of Server, kept apart from
// server.cc): the replies each rewritten request expects (pending_replies.h), the ones the
// pooler makes up or swallows, and the skip to Sync after an error, as PostgreSQL skips.

namespace pp = pgsluice::protocol;
namespace be = pgsluice::protocol::backend;
using protocol::DescribeTarget;

namespace {
// An ErrorResponse message around `body`.
std::string error_wire(std::string_view body) {
  std::string wire(1, be::kErrorResponse);
  const auto length = static_cast<uint32_t>(body.size() + 4);
  for (int shift = 24; shift >= 0; shift -= 8) {
    wire.push_back(static_cast<char>((length >> shift) & 0xff));
  }
  wire.append(body);
  return wire;
}
}  // namespace
// --- protocol-level prepared statements ---

void Server::expect(PendingReply reply) {
  if (rewrite_.skipping_to_sync && is_made_up(reply.kind)) {
    // PostgreSQL skips everything up to the Sync after an error, so it would not have
    // answered this request either; a statement "parsed" here does not exist for the client.
    if (reply.kind == PendingKind::made_parse_complete && client_ != nullptr) {
      client_->forget_statement(reply.client_name, reply.statement_id);
    }
    return;
  }
  rewrite_.pending.push_back(std::move(reply));
  if (rewrite_.pending.size() == 1 && is_made_up(rewrite_.pending.front().kind) &&
      !rewrite_.retry.holding_error && rewrite_.plain_queries_ahead == 0) {
    send_made_up_replies();
  }
}

void Server::prepare_statement(const PreparedStatement& stmt, bool hidden, std::string client_name,
                               std::string& out) {
  std::vector<std::string> to_close;
  pool_->counters().prepared_evictions +=
      rewrite_.cache->add(stmt.id, stmt.server_name, stmt.generation, to_close, stmt.stats);
  for (std::string& name : to_close) {
    // Closing costs nothing visible: the CloseComplete is swallowed. The client messages it
    // travels with carry the Sync that makes the server answer.
    size_t mark = out.size();
    pp::write_close(out, DescribeTarget::statement, name);
    rewrite_.pending.push_back(
        PendingReply{.kind = PendingKind::close_hidden, .server_name = std::move(name)});
    keep_request(out, mark);
  }
  size_t mark = out.size();
  pp::write_parse(out, stmt.server_name, stmt.query, stmt.parameter_types);
  rewrite_.pending.push_back(
      PendingReply{.kind = hidden ? PendingKind::parse_hidden : PendingKind::parse,
                   .statement_id = stmt.id,
                   .client_name = std::move(client_name)});
  keep_request(out, mark);
  ++pool_->counters().server_parse_count;
  ++stmt.stats->server_parses;
}

void Server::prepare_statement_again(const PreparedStatement& stmt, std::string& out) {
  // An older generation in the cache makes add() close the copy before the Parse.
  if (rewrite_.cache->has(stmt.id, stmt.generation))
    rewrite_.cache->set_generation(stmt.id, ~uint64_t{0});
  prepare_statement(stmt, /*hidden=*/true, {}, out);
}

void Server::prepare_sql_statement(const SqlStatementRef& stmt, std::string& out) {
  // Believed from now on; forgotten if it fails or is skipped.
  rewrite_.sql.add(stmt, stmt->prepare_text_position());
  // The unnamed statement and portal: the client's Parse that follows replaces both (a client's
  // Bind of its unnamed statement parses it again first: client_unnamed_statement.cc).
  rewrite_.unnamed = {};
  size_t mark = out.size();
  pp::write_parse(out, "", stmt->prepare_text(), {});
  expect_sent(PendingReply{.kind = PendingKind::parse_hidden}, out, mark);
  mark = out.size();
  static constexpr char kNothing[6] = {0, 0, 0, 0, 0, 0};  // no formats, parameters, results
  pp::write_bind_renamed(out, "", "", std::string_view(kNothing, sizeof(kNothing)));
  expect_sent(PendingReply{.kind = PendingKind::bind_hidden}, out, mark);
  mark = out.size();
  pp::write_execute(out, "", 0);
  expect_sent(PendingReply{.kind = PendingKind::execute_hidden, .sql_prepared = stmt}, out, mark);
}

void Server::forget_statements() {
  if (rewrite_.cache != nullptr) rewrite_.cache->clear();
  if (rewrite_.cache_off != nullptr) rewrite_.cache_off->clear();
  rewrite_.sql.clear();
  rewrite_.unnamed = {};
}

// As PgBouncer reads max_prepared_statements at each use, a SET on the console applies to the
// servers in use, at their next client: a lower value evicts at the next Parse (not at once),
// 0 passes the client's names through from then on, and a server opened at 0 rewrites once the
// value is raised (else a name it passed through could meet another client's Parse of the same
// name: 42P05). Only between requests: the reply queue is kept only while rewriting.
void Server::apply_statement_settings() {
  if (!rewrite_.pending.empty()) return;
  const int max = worker_->settings().max_prepared_statements;
  if (!shares_servers(pool_->mode()) || max <= 0) {
    if (rewrite_.cache != nullptr) rewrite_.cache_off = std::move(rewrite_.cache);
    rewrite_.unnamed = {};  // the clients' Parses go untracked
    return;
  }
  if (rewrite_.cache == nullptr && rewrite_.cache_off != nullptr) {
    // Clients' own names went through meanwhile, and a DISCARD ALL may have run: what the
    // cache holds is closed before the next Parse and prepared again where used.
    rewrite_.cache = std::move(rewrite_.cache_off);
    rewrite_.cache->close_all_later();
  } else if (rewrite_.cache == nullptr) {
    rewrite_.cache = std::make_unique<ServerStatementCache>(static_cast<size_t>(max));
  }
  rewrite_.cache->set_capacity(static_cast<size_t>(max));
}

void Server::statements_may_be_gone() {
  rewrite_.cache->close_all_later();
  if (rewrite_.sql.size() == 0) return;
  // Whether it ran is not followed here: a PREPARE of a name the server still has would fail,
  // an EXECUTE of one it lost too. The release's DEALLOCATE ALL makes the belief true again.
  rewrite_.sql.clear();
  pp::SessionStateFinding all;
  all.kind = pp::SessionStateKind::prepare;
  all.detail = "all";
  session_.dirty.add(all);
}

void Server::send_made_up_replies() {
  // Queries ahead of them are answered first (their last ReadyForQuery comes back here).
  if (client_ == nullptr || rewrite_.retry.holding_error || rewrite_.plain_queries_ahead > 0)
    return;
  std::string& out = client_->channel().output();
  while (!rewrite_.pending.empty() && is_made_up(rewrite_.pending.front().kind)) {
    PendingReply reply = std::move(rewrite_.pending.front());
    rewrite_.pending.pop_front();
    switch (reply.kind) {
      case PendingKind::made_parse_complete:
        pp::write_parse_complete(out);
        break;
      case PendingKind::made_close_complete:
        pp::write_close_complete(out);
        break;
      case PendingKind::made_error:
        out.append(reply.answer);
        break;
      case PendingKind::made_command_done:
        out.append(reply.answer);
        pp::write_ready_for_query(out, replies_.transaction_status());
        break;
      case PendingKind::parse:
      case PendingKind::parse_hidden:
      case PendingKind::parse_duplicate:
      case PendingKind::close_hidden:
      case PendingKind::bind_hidden:
      case PendingKind::execute_hidden:
      case PendingKind::bind:
      case PendingKind::bind_refused:
      case PendingKind::describe:
      case PendingKind::describe_hidden:
      case PendingKind::execute:
      case PendingKind::close:
      case PendingKind::sync:
      case PendingKind::query:
        break;
    }
  }
}

void Server::skip_pending_to_sync() {
  while (!rewrite_.pending.empty() && rewrite_.pending.front().kind != PendingKind::sync &&
         rewrite_.pending.front().kind != PendingKind::query) {
    PendingReply reply = std::move(rewrite_.pending.front());
    rewrite_.pending.pop_front();
    if (reply.kind == PendingKind::close_hidden) {
      // The server skipped the Close: the statement is still there, out of the cache (not the
      // unnamed one closed before a client's 26000: that one is not known anyway).
      if (!reply.server_name.empty()) rewrite_.cache->mark_to_close(std::move(reply.server_name));
      continue;
    }
    // An unnamed Parse that failed (the statement is dropped first) or was skipped (the one
    // before stays): unless a later one is on its way, the server has none of a client's, and
    // the client none it knows (client_unnamed_statement.cc).
    if (is_unnamed_parse(reply) && !unnamed_parse_pending(rewrite_.pending)) {
      rewrite_.unnamed = {};
      if (client_ != nullptr && reply.kind == PendingKind::parse)
        client_->forget_unnamed_statement();
    }
    // SQL PREPARE kept: a PREPARE of the pooler's, or the client's Execute of a renamed
    // statement, that did not run.
    if (reply.sql_prepared != nullptr) rewrite_.sql.remove(reply.sql_prepared->id());
    if (reply.kind == PendingKind::execute && reply.sql != nullptr) {
      reply.sql->on_error(client_ != nullptr ? &client_->sql_statements() : nullptr, rewrite_.sql);
    }
    if (reply.kind == PendingKind::parse || reply.kind == PendingKind::parse_hidden ||
        reply.kind == PendingKind::made_parse_complete) {
      // PostgreSQL skipped that Parse: the statement does not exist there, and a client Parse
      // that "failed" must not leave its name taken.
      if (reply.kind != PendingKind::made_parse_complete)
        rewrite_.cache->remove(reply.statement_id);
      if (reply.kind != PendingKind::parse_hidden && client_ != nullptr &&
          !reply.client_name.empty()) {
        client_->forget_statement(reply.client_name, reply.statement_id);
      }
    }
  }
}

Server::Match Server::match_error(const pp::Message& message, PendingReply& front) {
  if (front.kind != PendingKind::query) {
    // A renamed Parse's or Execute's error names the client's statement (it is popped below).
    if (front.sql != nullptr) {
      if (std::optional<std::string> body = front.sql->client_error(message.body, rewrite_.sql)) {
        rewrite_.retry.held_error = error_wire(*body);
      }
    } else if (front.kind == PendingKind::execute_hidden && front.sql_prepared != nullptr) {
      // The pooler's PREPARE before a client's Parse: its position is in the client's PREPARE.
      if (auto body = hidden_prepare_error(message.body, *front.sql_prepared)) {
        rewrite_.retry.held_error = error_wire(*body);
      }
    }
    if (front.kind == PendingKind::parse_duplicate) {
      std::string client_name = front.client_name;
      hold_duplicate_error(message, client_name);
    } else if (front.kind == PendingKind::bind_refused) {
      rewrite_.retry.held_error = std::move(front.answer);
      // Only now (not when an earlier error made the server skip it) the client has it.
      if (client_ != nullptr) client_->note_stale_plan_seen(*front.statement);
    } else if (front.statement != nullptr && hold_for_retry(message)) {
      return Match::swallow;
    }
    // Until the Sync, the server ignores what the client sends (and sends nothing back).
    skip_pending_to_sync();
    rewrite_.skipping_to_sync = true;
    if (!rewrite_.retry.held_error.empty()) {
      session_.kept.forget_literals();  // as inspect_reply does for the errors it passes
      return Match::held_error_instead;
    }
  } else if (front.sql != nullptr) {
    front.sql->on_error(client_ != nullptr ? &client_->sql_statements() : nullptr, rewrite_.sql);
  }
  rewrite_.retry.batch_reached_client = true;
  return Match::forward;
}

bool Server::rename_sql_error(const pp::Message& error) {
  if (rewrite_.cache == nullptr || rewrite_.pending.empty() || rewrite_.plain_queries_ahead > 0)
    return false;
  const PendingReply& front = rewrite_.pending.front();
  if (front.kind != PendingKind::query || front.sql == nullptr) return false;
  std::optional<std::string> body = front.sql->client_error(error.body, rewrite_.sql);
  if (!body) return false;
  held_messages_.replacement = error_wire(*body);
  return true;
}

Server::Match Server::match_sql_command_complete(PendingReply& front) {
  if (front.kind == PendingKind::execute_hidden) {
    rewrite_.pending.pop_front();
    return Match::swallow;  // the pooler's PREPARE before a client's Parse
  }
  // A Query's: the PREPAREs the pooler inserted are swallowed, the rest are the client's.
  return front.sql->on_command_complete() ? Match::swallow : Match::forward;
}

void Server::pass_statement_to_portal_describe(PendingReply& bind) {
  if (rewrite_.pending.size() < 2) return;
  PendingReply& next = rewrite_.pending[1];
  if (next.kind != PendingKind::describe || next.statement != nullptr) return;
  next.statement = bind.statement;
  next.client_name = std::move(bind.client_name);
}

bool Server::statement_parameters(const pp::Message& message) const {
  if (message.type != be::kParameterDescription || rewrite_.pending.empty()) return false;
  const PendingReply& front = rewrite_.pending.front();
  return front.kind == PendingKind::describe && front.statement != nullptr;
}

Server::Match Server::match_description(const pp::Message& message, PendingReply& front) {
  const bool hidden = front.kind == PendingKind::describe_hidden;
  if (front.kind != PendingKind::describe && !hidden) {
    return front.kind == PendingKind::query && message.type == be::kRowDescription
               ? Match::forward
               : Match::out_of_step;
  }
  if (message.type == be::kParameterDescription) {
    // Sent again after a stale plan (hold_for_retry): the client has it from the first time.
    if (hidden || (front.retried && front.statement != nullptr)) return Match::swallow;
    return Match::forward;
  }
  // A Describe of a rewritten statement, or of the portal of its Bind: its shape is noted.
  if (front.statement != nullptr) note_statement_shape(front, message);
  rewrite_.pending.pop_front();
  return hidden ? Match::swallow : Match::forward;
}

Server::Match Server::match_pending(const pp::Message& message) {
  switch (message.type) {
    case be::kParameterStatus:
    case be::kNoticeResponse:
    case be::kNotificationResponse:
      return Match::forward;  // may come at any time
    default:
      break;
  }
  if (rewrite_.retry.holding_error) return on_ready_after_held_error(message);
  // Whether a stale plan may be retried: ParseComplete and hidden CloseComplete only say that
  // statements exist, which a retry does not change.
  if (message.type != be::kParseComplete && message.type != be::kCloseComplete &&
      message.type != be::kErrorResponse && message.type != be::kReadyForQuery &&
      !statement_parameters(message)) {
    rewrite_.retry.batch_reached_client = true;
  }
  if (rewrite_.pending.empty()) {
    // A FATAL the server sends on its own (terminated, shutting down) belongs to no request;
    // the client should see PostgreSQL's reason before the connection goes.
    return message.type == be::kErrorResponse ? Match::forward : Match::out_of_step;
  }
  PendingReply& front = rewrite_.pending.front();
  auto pop = [this] { rewrite_.pending.pop_front(); };
  switch (message.type) {
    case be::kParseComplete:
      if (front.kind == PendingKind::parse) {
        pop();
        return Match::forward;
      }
      if (front.kind == PendingKind::parse_hidden) {
        pop();
        return Match::swallow;
      }
      return Match::out_of_step;
    case be::kBindComplete:
      if (front.kind == PendingKind::bind_hidden) {
        pop();
        return Match::swallow;
      }
      if (front.kind != PendingKind::bind) return Match::out_of_step;
      if (!front.client_name.empty()) pass_statement_to_portal_describe(front);
      pop();
      return Match::forward;
    case be::kCloseComplete:
      if (front.kind == PendingKind::close) {
        pop();
        return Match::forward;
      }
      if (front.kind == PendingKind::close_hidden) {
        pop();
        return Match::swallow;
      }
      return Match::out_of_step;
    case be::kParameterDescription:
    case be::kRowDescription:
    case be::kNoData:
      return match_description(message, front);
    case be::kCommandComplete:
      if (front.kind == PendingKind::execute_hidden ||
          (front.kind == PendingKind::query && front.sql != nullptr)) {
        return match_sql_command_complete(front);
      }
      [[fallthrough]];
    case be::kEmptyQueryResponse:
    case be::kPortalSuspended:
      if (front.kind == PendingKind::execute) {
        pop();
        return Match::forward;
      }
      return front.kind == PendingKind::query ? Match::forward : Match::out_of_step;
    case be::kErrorResponse:
      return match_error(message, front);
    case be::kReadyForQuery:
      if (rewrite_.skipping_to_sync) {
        // Requests that arrived after the error were skipped by the server too.
        skip_pending_to_sync();
        rewrite_.skipping_to_sync = false;
        if (rewrite_.pending.empty()) return Match::out_of_step;
      }
      if (rewrite_.pending.front().kind != PendingKind::sync &&
          rewrite_.pending.front().kind != PendingKind::query) {
        return Match::out_of_step;
      }
      pop();
      rewrite_.retry.batch_reached_client = false;
      if (rewrite_.pending.empty()) rewrite_.retry.keep_wire = false;
      return Match::forward;
    default:
      // DataRow, COPY messages, FunctionCallResponse: inside the current request.
      return Match::forward;
  }
}

// ------------------------------------------------------------------------------------------------
// Stale plans of rewritten prepared statements, and a client's duplicate statement name.
//
// After a schema change (ALTER TABLE t ADD COLUMN), PostgreSQL refuses to run a prepared
// `SELECT * FROM t` whose result type changed: "cached plan must not change result type"
// (0A000, raised by RevalidateCachedQuery at Bind). A driver connected to PostgreSQL fixes that
// by preparing again; through a pooler the statement lives on every server under the pooler's
// name, so PgBouncer's users keep failing until RECONNECT. Here the statement's generation is
// bumped (every server prepares it again at its next use) and, when nothing of the batch has
// reached the client and no transaction block was open, the batch is sent again on the same
// server after a hidden Close + Parse, so the client sees the result it asked for. The requests
// of a batch are kept (PendingReply::wire) from a rewritten Bind on until the queue empties.

namespace pp = pgsluice::protocol;
namespace be = pgsluice::protocol::backend;
using protocol::DescribeTarget;
using protocol::TransactionStatus;

void Server::expect_rewritten(PendingKind kind, const PreparedStatementRef& stmt,
                              std::string_view wire, std::string client_name, bool shape_told) {
  rewrite_.retry.keep_wire = true;
  PendingReply reply{.kind = kind,
                     .statement_id = stmt->id,
                     .client_name = std::move(client_name),
                     .statement = stmt,
                     .shape_told = shape_told};
  reply.wire.assign(wire);
  reply.replayable = true;
  rewrite_.pending.push_back(std::move(reply));
}

// --- the shape a client was told (ClientStatement::told_shape) ---
//
// A statement prepared on a server after a schema change describes a new shape there, and no
// server reports a stale plan for it: without a look, a client that was told the old shape
// would get rows of the new one (pgx: "bind message has 2 result formats but query has 3
// columns"; PHP PDO reads past its columns). So a server's copy of a statement has its shape
// noted whenever it is described, and before a told client's Bind runs on a copy whose shape is
// not known, the pooler describes it first.

bool Server::may_check_shape() const {
  return owes_client_nothing() && !rewrite_.skipping_to_sync && !rewrite_.retry.holding_error &&
         replies_.internal_ready_owed() == 0 &&
         replies_.transaction_status() != TransactionStatus::failed;
}

void Server::check_statement_shape(const PreparedStatementRef& stmt, std::string& out) {
  pp::write_describe(out, DescribeTarget::statement, stmt->server_name);
  rewrite_.pending.push_back(PendingReply{
      .kind = PendingKind::describe_hidden, .statement_id = stmt->id, .statement = stmt});
  // The server answers a Flush with what it has: the client's Sync is not sent yet.
  pp::write_flush(out);
  rewrite_.shape_check = stmt;
}

void Server::note_statement_shape(const PendingReply& describe, const pp::Message& message) {
  std::shared_ptr<const std::string> shape =
      describe.statement->intern_shape(pgsluice::statement_shape(message.type, message.body));
  rewrite_.cache->set_shape(describe.statement->id, shape);
  if (describe.kind == PendingKind::describe && client_ != nullptr &&
      !describe.client_name.empty()) {
    client_->note_told_shape(describe.client_name, *describe.statement, std::move(shape));
  }
}

void Server::finish_shape_check_if_answered() {
  if (rewrite_.shape_check == nullptr) return;
  const PendingReplies& pending = rewrite_.pending;
  for (size_t i = 0; i < pending.size(); ++i) {
    if (pending[i].kind == PendingKind::describe_hidden) return;
  }
  rewrite_.shape_check = nullptr;
  if (client_ != nullptr && client_->input_held_for_read_back()) {
    client_->resume_input_after_read_back();
  }
}

void Server::expect_sent(PendingReply reply, const std::string& out, size_t mark) {
  rewrite_.pending.push_back(std::move(reply));
  keep_request(out, mark);
}

void Server::keep_request(const std::string& out, size_t mark) {
  if (!rewrite_.retry.keep_wire || rewrite_.pending.empty()) return;
  rewrite_.pending.back().wire.assign(out, mark, std::string::npos);
  rewrite_.pending.back().replayable = true;
}

bool Server::hold_for_retry(const pp::Message& message) {
  PendingReply& front = rewrite_.pending.front();
  auto error = pp::parse_error_fields(message.body);
  if (!error || error.value.code != sqlstate::kFeatureNotSupported) return false;
  // The routine names the stale-plan check whatever lc_messages says; a server that does not
  // send it is trusted on the SQLSTATE alone (a second 0A000 after the retry goes through).
  std::string_view routine = error.value.field('R');
  if (!routine.empty() && routine != "RevalidateCachedQuery") return false;
  const PreparedStatement& stmt = *front.statement;
  // Stale for the generation this server prepared: every server prepares it again at its next
  // use. (A server that already has a newer generation does not bump it again, nor does a
  // second server reporting the same change.) The error is kept for the clients that still hold
  // the old row description (they get it at their next Bind); the client that gets this error
  // (or the retry's new description) knows it now.
  const uint64_t current = stmt.generation.load();
  stmt.note_stale(
      rewrite_.cache->has(stmt.id, current) ? std::optional<uint64_t>(current) : std::nullopt,
      message.wire);
  if (client_ != nullptr) client_->note_stale_plan_seen(stmt);
  spdlog::info("{} statement {} has a stale plan (schema change): prepared again at its next use",
               log_id(), stmt.server_name);
  // A client that was told the old shape gets PostgreSQL's answer: the retry's rows would have
  // the new one.
  if (front.shape_told) return false;

  // Sending the batch again is what the client would have seen had the statement been
  // prepared now, only when: nothing of the batch reached the client, no transaction block
  // was open before it (the error rolled back an implicit transaction only), and the whole
  // batch up to its Sync is at the server and kept, with nothing after it.
  // A Describe 'S' of a statement the client has just prepared (the server had an older copy,
  // whose plan went stale): on a direct connection its Parse came after the change and the
  // description is the new one; a Describe has no effect, so it is sent again like a Bind.
  if (front.retried || (front.kind != PendingKind::bind && front.kind != PendingKind::describe) ||
      replies_.transaction_status() != TransactionStatus::idle ||
      rewrite_.retry.batch_reached_client || client_ == nullptr ||
      rewrite_.pending.back().kind != PendingKind::sync) {
    return false;
  }
  // The retry's rows have the new shape: only a client that asked for the row description in
  // this batch (libpq, psycopg, pgbench: Bind, Describe portal, Execute) learns it. One that
  // relies on a description it cached (asyncpg, pgjdbc) gets the error, as from PostgreSQL,
  // and prepares again itself.
  bool described = front.kind == PendingKind::describe;
  for (size_t i = 1;
       i < rewrite_.pending.size() && rewrite_.pending[i].kind != PendingKind::execute; ++i) {
    if (rewrite_.pending[i].kind == PendingKind::describe &&
        rewrite_.pending[i].statement == nullptr) {
      described = true;
    }
  }
  if (!described) return false;
  for (size_t i = 0; i < rewrite_.pending.size(); ++i) {
    const PendingReply& r = rewrite_.pending[i];
    if ((r.kind == PendingKind::sync || r.kind == PendingKind::query) &&
        i + 1 != rewrite_.pending.size()) {
      return false;  // a later batch is already queued
    }
    if (!is_made_up(r.kind) && !r.replayable) return false;
    // The batch itself closes the statement (evicted by a later Parse): not worth the care.
    if (r.kind == PendingKind::close_hidden && r.server_name == stmt.server_name) return false;
  }
  rewrite_.retry.held_error.assign(message.wire);
  rewrite_.retry.holding_error = true;
  rewrite_.retry.held_batch = std::move(rewrite_.pending);
  rewrite_.pending.clear();
  return true;
}

Server::Match Server::on_ready_after_held_error(const pp::Message& message) {
  if (message.type != be::kReadyForQuery) return Match::out_of_step;
  rewrite_.retry.holding_error = false;
  auto ready = pp::parse_ready_for_query(message.body);
  TransactionStatus status = ready ? ready.value.transaction_status() : TransactionStatus::failed;
  if (status == TransactionStatus::idle && rewrite_.pending.empty() && client_ != nullptr) {
    rewrite_.retry.held_error.clear();
    PreparedStatementRef stmt = rewrite_.retry.held_batch.front().statement;
    std::string& out = channel_.output();
    // The cache already describes the server as it will be after the batch; only the stale
    // statement itself changes, prepared again under the same name.
    pp::write_close(out, DescribeTarget::statement, stmt->server_name);
    rewrite_.pending.push_back(
        PendingReply{.kind = PendingKind::close_hidden, .server_name = stmt->server_name});
    pp::write_parse(out, stmt->server_name, stmt->query, stmt->parameter_types);
    rewrite_.pending.push_back(
        PendingReply{.kind = PendingKind::parse_hidden, .statement_id = stmt->id});
    rewrite_.cache->set_generation(stmt->id, stmt->generation);
    ++pool_->counters().server_parse_count;
    ++pool_->counters().prepared_retries;
    ++stmt->stats->server_parses;
    ++stmt->stats->retries;
    rewrite_.retry.keep_wire = true;
    for (PendingReply& r : rewrite_.retry.held_batch) {
      if (r.replayable) out.append(r.wire);
      r.retried = true;  // once per batch
      rewrite_.pending.push_back(std::move(r));
    }
    rewrite_.retry.held_batch.clear();
    rewrite_.retry.batch_reached_client = false;
    channel_.flush();
    return Match::swallow;
  }
  // No longer safe (the client sent more meanwhile): the error goes through as it came, and
  // the batch is skipped to its Sync as PostgreSQL did.
  for (size_t i = rewrite_.retry.held_batch.size(); i-- > 0;) {
    rewrite_.pending.push_front(std::move(rewrite_.retry.held_batch[i]));
  }
  rewrite_.retry.held_batch.clear();
  rewrite_.skipping_to_sync = true;
  Match match = match_pending(message);
  return match == Match::forward ? Match::held_error_first : match;
}

bool Server::may_refuse_stale_bind() const {
  if (replies_.transaction_status() == TransactionStatus::failed || rewrite_.retry.holding_error ||
      rewrite_.skipping_to_sync)
    return false;
  for (const PendingReply& r : rewrite_.pending) {
    if (r.kind == PendingKind::sync || r.kind == PendingKind::query) return false;
  }
  return true;
}

// The pooler's statement names are PGSLUICE_<id>: this one never exists on a server.
static constexpr std::string_view kNoSuchStatement = "PGSLUICE_STALE_PLAN";

void Server::refuse_stale_bind(const PreparedStatementRef& stmt, std::string& out) {
  // PostgreSQL's error at that Bind would fail the transaction block, or roll back the implicit
  // transaction with what ran earlier in the batch: a Bind of a statement that does not exist
  // does the same on the server (26000, before any portal is touched), and its error is
  // replaced by the stale-plan error a server gave for this statement.
  PendingReply reply{.kind = PendingKind::bind_refused,
                     .statement_id = stmt->id,
                     .answer = stmt->stale_error(),
                     .statement = stmt};
  if (reply.answer.empty()) {
    // PostgreSQL's fields (asyncpg recognizes the error by its routine).
    std::string body;
    for (auto [type, value] : {std::pair<char, std::string_view>{'S', "ERROR"},
                               {'V', "ERROR"},
                               {'C', sqlstate::kFeatureNotSupported},
                               {'M', "cached plan must not change result type"},
                               {'F', "plancache.c"},
                               {'R', "RevalidateCachedQuery"}}) {
      body.push_back(type);
      body.append(value);
      body.push_back('\0');
    }
    body.push_back('\0');
    reply.answer.push_back(be::kErrorResponse);
    uint32_t length = static_cast<uint32_t>(body.size() + 4);
    for (int shift = 24; shift >= 0; shift -= 8) {
      reply.answer.push_back(static_cast<char>((length >> shift) & 0xff));
    }
    reply.answer.append(body);
  }
  // No formats, no parameters, no result formats.
  pp::write_bind_renamed(out, "", kNoSuchStatement, std::string_view("\0\0\0\0\0\0", 6));
  rewrite_.pending.push_back(std::move(reply));
}

void Server::send_held_error() {
  if (client_ != nullptr) client_->channel().output().append(rewrite_.retry.held_error);
  rewrite_.retry.held_error.clear();
}

void Server::hold_duplicate_error(const pp::Message& message, const std::string& client_name) {
  auto error = pp::parse_error_fields(message.body);
  // Another error came first (a syntax error, an aborted transaction): it is PostgreSQL's
  // answer for the client's Parse too, and goes through unchanged.
  if (!error || error.value.code != sqlstate::kDuplicatePreparedStatement) return;
  std::string text = fmt::format("prepared statement \"{}\" already exists", client_name);
  // PostgreSQL's fields, with the client's name in the message.
  std::string body;
  for (const auto& [type, value] : error.value.fields) {
    body.push_back(type);
    body.append(type == 'M' ? std::string_view(text) : value);
    body.push_back('\0');
  }
  body.push_back('\0');
  rewrite_.retry.held_error.clear();
  rewrite_.retry.held_error.push_back(be::kErrorResponse);
  uint32_t length = static_cast<uint32_t>(body.size() + 4);
  for (int shift = 24; shift >= 0; shift -= 8) {
    rewrite_.retry.held_error.push_back(static_cast<char>((length >> shift) & 0xff));
  }
  rewrite_.retry.held_error.append(body);
}

}  // namespace pgsluice
