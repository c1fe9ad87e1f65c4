// What the statement rewriter keeps per server connection: the protocol-level prepared
// statements the server has under the pooler's names, the replies its requests expect, the SQL
// prepared statements kept for clients (SQL PREPARE kept), the shape check under way, and the
// retry of a batch whose rewritten Bind met a stale plan. Plain data, owned by the Server and
// worked by server_statements.cc and the clients' statement code.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <utility>

#include "pgsluice/protocol/message_types.h"
#include "pooler/core/pending_replies.h"
#include "pooler/core/prepared_statements.h"
#include "pooler/session_state/sql_prepared.h"

namespace pgsluice {

// A stale plan (0A000) at a rewritten Bind (server_statements.cc): the error is held back and the
// batch sent again after the statement is prepared again, when nothing of it reached the client.
struct StalePlanRetry {
  bool keep_wire = false;             // requests keep their bytes (a rewritten Bind was sent)
  bool batch_reached_client = false;  // a reply other than ParseComplete since ReadyForQuery
  bool holding_error = false;         // an 0A000 held back until the batch's ReadyForQuery
  std::string held_error;
  PendingReplies held_batch;  // the requests from the failed Bind to the Sync
};

struct ServerStatements {
  // What every forwarded message tests first.
  std::unique_ptr<ServerStatementCache> cache;  // null: no rewriting
  // What each request expects, in order (pending_replies.h), while statements are rewritten:
  // the link does not end while any is left.
  PendingReplies pending;
  // Plain Queries (and FunctionCalls) sent while nothing was pending: every reply up to their
  // ReadyForQuery is the client's as it comes, so they are counted here rather than queued.
  // An entry costs a 200-byte PendingReply to build and a match per reply, which was most of
  // the rewriter's share of a select-only transaction. Always ahead of `pending`: once anything
  // is queued, later Queries queue behind it (Server::note_client_message).
  uint32_t plain_queries_ahead = 0;
  bool skipping_to_sync = false;  // after an error in a batch, PostgreSQL skips to the Sync
  // Whose unnamed statement the server has: a client's id and its Parse's serial
  // (UnnamedStatement). Zero: none of a client's, or not known (a Query or the pooler's own
  // unnamed Parse replaced it, the Parse failed or was skipped, rewriting was off). Beside
  // `pending`: a Query writes it.
  struct UnnamedOwner {
    uint64_t client = 0;
    uint64_t serial = 0;
  } unnamed;
  // Server::check_statement_shape's statement until its answer (or the error that skipped it).
  PreparedStatementRef shape_check;
  StalePlanRetry retry;
  // The cache while rewriting is off (max_prepared_statements set to 0): its statements stay on
  // the server, and are closed before the next Parse once rewriting is back on.
  std::unique_ptr<ServerStatementCache> cache_off;
  ServerSqlStatements sql;  // SQL prepared statements under the pooler's names

  // A CopyInResponse: PostgreSQL ignores the Syncs owed now (ReplyQueue::copy_in_started), so
  // their entries go, the queue kept in order without them.
  void forget_pending_syncs() {
    for (size_t n = pending.size(); n > 0; --n) {
      PendingReply reply = std::move(pending.front());
      pending.pop_front();
      if (reply.kind != PendingKind::sync) pending.push_back(std::move(reply));
    }
  }
  // Whether a Query about to be sent may be counted in plain_queries_ahead: nothing of the
  // rewriter's is owed before it (a held batch's replies are still to come while its error is
  // held, with `pending` emptied).
  [[nodiscard]] bool may_count_plain_query() const {
    return pending.empty() && !retry.keep_wire && !retry.holding_error && !skipping_to_sync;
  }
  // A Query or FunctionCall sent to the server: counted, or queued behind what is pending.
  void note_query() {
    if (may_count_plain_query()) {
      ++plain_queries_ahead;
    } else {
      pending.push_back_default().kind = PendingKind::query;
    }
  }
  // A reply while plain Queries are ahead is theirs, forwarded as it is (true); false: the
  // reply goes through Server::match_pending.
  bool take_plain_query_reply(char type) {
    if (plain_queries_ahead == 0) return false;
    if (type == protocol::backend::kReadyForQuery) {
      --plain_queries_ahead;
      retry.batch_reached_client = false;  // as match_pending at a Query's ReadyForQuery
    }
    return true;
  }
  // The retry and the shape check are over (the link ended): held batches and errors go.
  void reset_retry() {
    shape_check = nullptr;
    retry.keep_wire = false;
    retry.batch_reached_client = false;
    retry.holding_error = false;
    retry.held_error.clear();
    retry.held_batch.clear();
  }
  // The link ended (released, or cleaned for the next): nothing of the client's is expected.
  void forget_client_requests() {
    pending.clear();
    plain_queries_ahead = 0;
    skipping_to_sync = false;
  }
};

}  // namespace pgsluice
