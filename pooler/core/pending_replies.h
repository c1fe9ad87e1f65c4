// What a server still owes, request by request, while pgsluice rewrites protocol-level prepared
// statements. Replies come back in the order of the requests; walking this queue tells which
// replies belong to the client, which answer the pooler's own Parse or Close (and are hidden),
// and where a reply the pooler makes up itself (a ParseComplete for a statement the server
// already had) must be slipped in so that the client sees them in the order it asked.
#pragma once

#include <cstdint>
#include <string>

#include "pooler/base/ring_queue.h"
#include "pooler/core/prepared_statements.h"
#include "pooler/session_state/sql_prepared.h"

namespace pgsluice {

enum class PendingKind : uint8_t {
  parse,            // the client's Parse, forwarded: ParseComplete goes to the client
  parse_hidden,     // the pooler's Parse (statement missing on this server): swallowed
  parse_duplicate,  // a client's Parse of a name it already uses, sent as a Parse of a name the
                    // server has: PostgreSQL's own 42P05 fails the transaction as it should; the
                    // error is passed on under the client's name
  close_hidden,     // the pooler's Close (an evicted statement): swallowed
  bind_hidden,      // the pooler's Bind and Execute of its PREPARE of a SQL prepared statement
  execute_hidden,   // the server lacks, before a client's Parse that uses it: swallowed
  bind,             // BindComplete
  bind_refused,     // a client's Bind of a statement whose result type changed since the client
                    // saw it, sent as a Bind the server refuses (the transaction fails as in
                    // PostgreSQL): its error is replaced by the stale-plan error in `answer`
  describe,         // [ParameterDescription] then RowDescription or NoData
  describe_hidden,  // the pooler's Describe 'S' of a statement a client was told the shape of
                    // (Server::check_statement_shape): swallowed, its shape noted
  execute,          // rows, then CommandComplete, EmptyQueryResponse or PortalSuspended
  close,            // the client's Close, forwarded: CloseComplete
  sync,             // ReadyForQuery
  query,            // a Query or FunctionCall: everything up to ReadyForQuery
  // Made up by the pooler, sent when they reach the front:
  made_parse_complete,  // the server already had the statement
  made_close_complete,  // a Close of a statement the pooler keeps for other clients
  made_error,           // an error PostgreSQL would have given (42P05), or a refused statement
                        // (0A000): the client's messages up to its Sync are dropped
  made_command_done,    // a DEALLOCATE the pooler answered: CommandComplete + ReadyForQuery
};

inline bool is_made_up(PendingKind kind) {
  return kind == PendingKind::made_parse_complete || kind == PendingKind::made_close_complete ||
         kind == PendingKind::made_error || kind == PendingKind::made_command_done;
}

struct PendingReply {
  PendingKind kind = PendingKind::query;
  uint64_t statement_id = 0;  // parse, parse_hidden, made_parse_complete
  // The client's name of the statement: parse, parse_duplicate, made_parse_complete.
  std::string client_name{};
  // close_hidden: the pooler's name of the statement it closes.
  std::string server_name{};
  // What the client gets in place of the server's reply, as whole messages: the ErrorResponse
  // of made_error and bind_refused (the stale-plan error), the CommandComplete of
  // made_command_done (its ReadyForQuery is written when sent, with the status of then).
  std::string answer{};
  // A Bind or Describe 'S' of a rewritten statement: what to prepare again if the server says
  // the plan is stale (0A000). bind_refused: the statement whose stale plan is reported.
  PreparedStatementRef statement{};
  // The request as sent to the server, kept from a rewritten Bind on until the queue empties,
  // so that the batch can be sent again after the statement is prepared again
  // (server_statements.cc).
  std::string wire{};
  // query, parse, execute: a Query or a Parse whose SQL prepared statements were renamed (SQL
  // PREPARE kept): an inserted PREPARE's CommandComplete is swallowed, an error undoes what did
  // not run (the Query's, or the Execute's of the Parse) and names the client's statements.
  std::shared_ptr<SqlQueryPlan> sql{};
  // execute_hidden: the statement it prepares, forgotten again when it is skipped or fails.
  SqlStatementRef sql_prepared{};
  bool replayable = false;  // `wire` holds the request
  bool retried = false;     // sent again once already: a second 0A000 goes to the client
  // bind: the client was told the statement's shape (ClientStatement::told_shape); a stale
  // plan's 0A000 goes to it as from PostgreSQL, never a retry with rows of the new shape.
  bool shape_told = false;
};

// RingQueue's reset of a popped slot. Most replies (a Query's, a Sync's, a Bind's) carry only
// their kind: nothing to free, so the default-constructed temporary and the move of every member
// (a fifth of the queue's cost per select-only transaction) are skipped for them.
// A member added to PendingReply changes this size: then add it to reset_slot below too.
static_assert(sizeof(PendingReply) == 200, "reset_slot(PendingReply&) must reset every member");
inline void reset_slot(PendingReply& reply) {
  const auto bare = [](const std::string& s) { return s.capacity() == std::string().capacity(); };
  if (bare(reply.client_name) && bare(reply.server_name) && bare(reply.answer) &&
      bare(reply.wire) && reply.client_name.empty() && reply.server_name.empty() &&
      reply.answer.empty() && reply.wire.empty() && reply.sql == nullptr &&
      reply.statement == nullptr && reply.sql_prepared == nullptr) {
    reply.kind = PendingKind::query;
    reply.statement_id = 0;
    reply.replayable = false;
    reply.retried = false;
    reply.shape_told = false;
    return;
  }
  reply = PendingReply{};
}

using PendingReplies = RingQueue<PendingReply>;

// The reply of an unnamed Parse: a client's, forwarded (a named one has its statement's id), or
// the pooler's own (a SQL PREPARE's, or a client's unnamed statement parsed again).
inline bool is_unnamed_parse(const PendingReply& reply) {
  return (reply.kind == PendingKind::parse || reply.kind == PendingKind::parse_hidden) &&
         reply.statement_id == 0;
}
inline bool unnamed_parse_pending(const PendingReplies& pending) {
  for (size_t i = 0; i < pending.size(); ++i) {
    if (is_unnamed_parse(pending[i])) return true;
  }
  return false;
}

}  // namespace pgsluice
