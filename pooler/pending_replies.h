// What a server still owes, request by request, while pgsluice rewrites protocol-level prepared
// statements. Replies come back in the order of the requests; walking this queue tells which
// replies belong to the client, which answer the pooler's own Parse or Close (and are hidden),
// and where a reply the pooler makes up itself (a ParseComplete for a statement the server
// already had) must be slipped in so that the client sees them in the order it asked.
#pragma once

#include <cstdint>
#include <deque>
#include <string>

namespace pgsluice {

enum class PendingKind : uint8_t {
  parse,         // the client's Parse, forwarded: ParseComplete goes to the client
  parse_hidden,  // the pooler's Parse (statement missing on this server): swallowed
  close_hidden,  // the pooler's Close (an evicted statement): swallowed
  bind,          // BindComplete
  describe,      // [ParameterDescription] then RowDescription or NoData
  execute,       // rows, then CommandComplete, EmptyQueryResponse or PortalSuspended
  close,         // the client's Close, forwarded: CloseComplete
  sync,          // ReadyForQuery
  query,         // a Query or FunctionCall: everything up to ReadyForQuery
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
  std::string text;           // the client's statement name (parse, made_parse_complete),
                              // the error message (made_error), the tag (made_command_done)
  std::string code;           // made_error: the SQLSTATE
  std::string hint;           // made_error
};

using PendingReplies = std::deque<PendingReply>;

}  // namespace pgsluice
