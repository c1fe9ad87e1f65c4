// The session-state check of one Query or Parse a client sends in transaction mode: classify
// its SQL (lexer prefilter, then libpg_query through the worker's verdict cache), record what it
// finds, and act by the policy — forward it, mark the server for cleaning, pin the client to
// the server, or replace the message with one that fails with SQLSTATE 0A000 and a hint.
#pragma once

#include <string>
#include <vector>

#include "pgsluice/protocol/frame.h"
#include "pooler/config/session_policy.h"
#include "pooler/session_state/findings.h"
#include "pooler/session_state/prefilter_memo.h"
#include "pooler/session_state/verify.h"

namespace pgsluice {

class Client;
class SessionVerifier;
class Server;
class Worker;

enum class SessionCheckResult {
  forward,  // send the message as it is
  refused,  // the statement is refused: `message` and `hint` say why (SQLSTATE 0A000)
  // The pin it needs would take one of the pool's reserved servers: at the start of a
  // transaction, nothing sent yet, the client gives its server back and waits for a pin
  // (up to query_wait_timeout, then the refusal).
  wait_for_pin,
};

// `prefilter` answers for the message's text, and keeps the answer for the routing that follows.
SessionCheckResult check_session_state(Worker& worker, const Client& client, Server& server,
                                       const SessionPolicy& policy, PrefilterMemo& prefilter,
                                       const protocol::Message& message, std::string& message_out,
                                       std::string& hint_out);

// The same actions for a Bind of a prepared statement (the pooler's statement rewriting) whose
// query the prefilter flags: its execution in a later transaction, maybe on another server,
// must be kept, cleaned or pinned like its Parse was. The findings were counted at the Parse.
SessionCheckResult check_bound_statement(Worker& worker, const Client& client, Server& server,
                                         const SessionPolicy& policy, std::string_view sql,
                                         std::string& message_out, std::string& hint_out);

// The statement that makes the server itself refuse a rejected one: the error then comes in
// its normal place among the replies, and the transaction state (idle, or failed inside a
// transaction block) is what PostgreSQL would have made it.
std::string rejection_statement(std::string_view message, std::string_view hint);

// The opaque calls a Query's answer decides on (Server::defer_call): recorded unless
// `first_reply`, the first reply to that Query other than a notice, says that its statement
// never ran (failed_before_running, findings.h). Null: no answer came (the server closed), and
// they are recorded.
void settle_deferred_calls(Worker& worker, std::vector<OwnedFindingEvent>& calls,
                           const std::string& who, const protocol::Message* first_reply);

// Who used a server last, for its verify findings (the client is gone when the answer comes).
void note_last_client(SessionVerifier& verifier, const Client& client);

// Records `hidden` findings for what session_state_verify found on `server`; logs the first of
// each.
void record_hidden_findings(Worker& worker, Server& server,
                            const std::vector<VerifyDifference>& differences);

// Called by the worker's janitor: counts clients idle in a transaction on their server longer
// than session_state_long_hold (once per transaction).
void check_long_holds(Worker& worker);

}  // namespace pgsluice
