// The server's side of protocol-level prepared statements (members of Server, kept apart from
// server.cc): the replies each rewritten request expects (pending_replies.h), the ones the
// pooler makes up or swallows, and the skip to Sync after an error, as PostgreSQL skips.
#include <spdlog/spdlog.h>

#include "pgsluice/protocol/backend.h"
#include "pgsluice/protocol/message_types.h"
#include "pgsluice/protocol/writer.h"
#include "pooler/core/client.h"
#include "pooler/core/pool.h"
#include "pooler/core/server.h"

namespace pgsluice {

namespace pp = pgsluice::protocol;
namespace be = pgsluice::protocol::backend;
using protocol::DescribeTarget;
// --- protocol-level prepared statements ---

void Server::expect(PendingReply reply) {
  if (replies_.skipping_to_sync() && is_made_up(reply.kind)) {
    // PostgreSQL skips everything up to the Sync after an error, so it would not have
    // answered this request either; a statement "parsed" here does not exist for the client.
    if (reply.kind == PendingKind::made_parse_complete && client_ != nullptr) {
      client_->forget_statement(reply.client_name, reply.statement_id);
    }
    return;
  }
  replies_.pending().push_back(std::move(reply));
  if (replies_.pending().size() == 1 && is_made_up(replies_.pending().front().kind) &&
      !holding_error_) {
    send_made_up_replies();
  }
}

void Server::prepare_statement(const PreparedStatement& stmt, bool hidden, std::string client_name,
                               std::string& out) {
  std::vector<std::string> to_close;
  pool_->counters().prepared_evictions +=
      statements_->add(stmt.id, stmt.server_name, stmt.generation, to_close, stmt.stats);
  for (std::string& name : to_close) {
    // Closing costs nothing visible: the CloseComplete is swallowed. The client messages it
    // travels with carry the Sync that makes the server answer.
    size_t mark = out.size();
    pp::write_close(out, DescribeTarget::statement, name);
    replies_.pending().push_back(
        PendingReply{.kind = PendingKind::close_hidden, .server_name = std::move(name)});
    keep_request(out, mark);
  }
  size_t mark = out.size();
  pp::write_parse(out, stmt.server_name, stmt.query, stmt.parameter_types);
  replies_.pending().push_back(
      PendingReply{.kind = hidden ? PendingKind::parse_hidden : PendingKind::parse,
                   .statement_id = stmt.id,
                   .client_name = std::move(client_name)});
  keep_request(out, mark);
  ++pool_->counters().server_parse_count;
  ++stmt.stats->server_parses;
}

void Server::forget_statements() {
  if (statements_ != nullptr) statements_->clear();
}

void Server::send_made_up_replies() {
  if (client_ == nullptr || holding_error_) return;
  std::string& out = client_->channel().output();
  while (!replies_.pending().empty() && is_made_up(replies_.pending().front().kind)) {
    PendingReply reply = std::move(replies_.pending().front());
    replies_.pending().pop_front();
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
      case PendingKind::bind:
      case PendingKind::bind_refused:
      case PendingKind::describe:
      case PendingKind::execute:
      case PendingKind::close:
      case PendingKind::sync:
      case PendingKind::query:
        break;
    }
  }
}

void Server::skip_pending_to_sync() {
  while (!replies_.pending().empty() && replies_.pending().front().kind != PendingKind::sync &&
         replies_.pending().front().kind != PendingKind::query) {
    PendingReply reply = std::move(replies_.pending().front());
    replies_.pending().pop_front();
    if (reply.kind == PendingKind::close_hidden) {
      // The server skipped the Close: the statement is still there, out of the cache.
      statements_->mark_to_close(std::move(reply.server_name));
      continue;
    }
    if (reply.kind == PendingKind::parse || reply.kind == PendingKind::parse_hidden ||
        reply.kind == PendingKind::made_parse_complete) {
      // PostgreSQL skipped that Parse: the statement does not exist there, and a client Parse
      // that "failed" must not leave its name taken.
      if (reply.kind != PendingKind::made_parse_complete) statements_->remove(reply.statement_id);
      if (reply.kind != PendingKind::parse_hidden && client_ != nullptr &&
          !reply.client_name.empty()) {
        client_->forget_statement(reply.client_name, reply.statement_id);
      }
    }
  }
}

Server::Match Server::match_error(const pp::Message& message, PendingReply& front) {
  if (front.kind != PendingKind::query) {
    if (front.kind == PendingKind::parse_duplicate) {
      std::string client_name = front.client_name;
      hold_duplicate_error(message, client_name);
    } else if (front.kind == PendingKind::bind_refused) {
      held_error_ = std::move(front.answer);
      // Only now (not when an earlier error made the server skip it) the client has it.
      if (client_ != nullptr) client_->note_stale_plan_seen(*front.statement);
    } else if (front.statement != nullptr && hold_for_retry(message)) {
      return Match::swallow;
    }
    // Until the Sync, the server ignores what the client sends (and sends nothing back).
    skip_pending_to_sync();
    replies_.skip_to_sync();
    if (!held_error_.empty()) return Match::held_error_instead;
  }
  batch_reached_client_ = true;
  return Match::forward;
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
  if (holding_error_) return on_ready_after_held_error(message);
  // Whether a stale plan may be retried: ParseComplete and hidden CloseComplete only say that
  // statements exist, which a retry does not change.
  if (message.type != be::kParseComplete && message.type != be::kCloseComplete &&
      message.type != be::kErrorResponse && message.type != be::kReadyForQuery) {
    batch_reached_client_ = true;
  }
  if (replies_.pending().empty()) {
    // A FATAL the server sends on its own (terminated, shutting down) belongs to no request;
    // the client should see PostgreSQL's reason before the connection goes.
    return message.type == be::kErrorResponse ? Match::forward : Match::out_of_step;
  }
  PendingReply& front = replies_.pending().front();
  auto pop = [this] { replies_.pending().pop_front(); };
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
      if (front.kind != PendingKind::bind) return Match::out_of_step;
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
      return front.kind == PendingKind::describe ? Match::forward : Match::out_of_step;
    case be::kRowDescription:
      if (front.kind == PendingKind::describe) {
        pop();
        return Match::forward;
      }
      return front.kind == PendingKind::query ? Match::forward : Match::out_of_step;
    case be::kNoData:
      if (front.kind != PendingKind::describe) return Match::out_of_step;
      pop();
      return Match::forward;
    case be::kCommandComplete:
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
      if (replies_.skipping_to_sync()) {
        // Requests that arrived after the error were skipped by the server too.
        skip_pending_to_sync();
        replies_.stop_skipping();
        if (replies_.pending().empty()) return Match::out_of_step;
      }
      if (replies_.pending().front().kind != PendingKind::sync &&
          replies_.pending().front().kind != PendingKind::query) {
        return Match::out_of_step;
      }
      pop();
      batch_reached_client_ = false;
      if (replies_.pending().empty()) keep_wire_ = false;
      return Match::forward;
    default:
      // DataRow, COPY messages, FunctionCallResponse: inside the current request.
      return Match::forward;
  }
}

}  // namespace pgsluice
