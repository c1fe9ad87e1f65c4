// A client whose server connection was lost (the backend terminated, PostgreSQL crashed or shut
// down) and that keeps its connection to the pooler (issue 45): what the server owed it when
// the connection went (ServerLoss, filled in by Server::lose), and the client's state until its
// transaction is over (ClientLostServer, client_lost_server.cc).
//
// PostgreSQL would have closed the connection. A pooler need not: the client is told with an
// ErrorResponse (PostgreSQL's own FATAL, held back and sent with severity ERROR, when it sent
// one before it went; else 08006) and a ReadyForQuery, 'E' inside a transaction block, whose
// ROLLBACK (or COMMIT, which PostgreSQL answers ROLLBACK in a failed transaction) the pooler
// answers itself: the server that held the transaction is gone, and every other statement of the
// block gets 25P02 as PostgreSQL gives it in a failed transaction, so nothing of the block runs
// elsewhere outside it. Its next transaction gets a server as any other.
#pragma once

#include <cstdint>
#include <string>

namespace pgsluice {

struct ServerLoss {
  bool in_block = false;    // the client's last ReadyForQuery was 'T' or 'E'
  uint32_t owed = 0;        // ReadyForQuery owed: one per Query, Sync, FunctionCall sent
  bool batch_open = false;  // extended-protocol messages sent without their Sync yet
  std::string code;         // SQLSTATE of the error the client gets
  std::string message;
};

struct ClientLostServer {
  bool active = false;          // the client's requests are answered by the pooler
  bool in_block = false;        // ...inside a failed transaction block, until its end
  bool untold = false;          // the loss is still to be told (nothing was in flight): the next
                                // request gets the error, unless it is a ROLLBACK
  bool skipping = false;        // an error was sent in an extended-protocol batch: up to its Sync
  bool ended = false;           // the batch (up to its Sync) ended the block
  bool exit_statement = false;  // the unnamed statement parsed in this state ends the block
  bool exit_portal = false;     // the unnamed portal bound of it
  std::string error;            // the ErrorResponse (wire) of the loss
};

}  // namespace pgsluice
