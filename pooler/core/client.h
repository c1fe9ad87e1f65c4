// One client connection: the startup phase (SSLRequest and GSSENCRequest declined, CancelRequest
// routed, StartupMessage), authentication, the greeting, then its messages forwarded to whichever
// server the pool links it to. Its session parameters travel with it from server to server.
#pragma once

#include <sys/types.h>
#include <uv.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "pgsluice/protocol/deallocate.h"
#include "pgsluice/protocol/frame.h"
#include "pgsluice/protocol/frontend.h"
#include "pgsluice/protocol/message_types.h"
#include "pgsluice/protocol/startup.h"
#include "pgsluice/protocol/writer.h"
#include "pooler/auth/client_auth.h"
#include "pooler/base/intrusive_list.h"
#include "pooler/config/config.h"
#include "pooler/config/session_policy.h"
#include "pooler/core/client_identity.h"
#include "pooler/core/client_listen_state.h"
#include "pooler/core/client_login_state.h"
#include "pooler/core/client_lost_server.h"
#include "pooler/core/client_queue_wait.h"
#include "pooler/core/client_statements_state.h"
#include "pooler/core/prepared_statements.h"
#include "pooler/net/channel.h"
#include "pooler/session_state/listen_channels.h"
#include "pooler/session_state/params.h"
#include "pooler/session_state/prefilter_memo.h"
#include "pooler/session_state/relay_queue.h"
#include "pooler/session_state/sql_prepared.h"

namespace pgsluice {

class ConsoleSession;
class Forwarder;
class ListenRelay;
struct AuthLookupResult;
struct TakeoverClient;
class Pool;
class Server;
class Worker;

class Client final : public ChannelOwner {
 public:
  enum class State {
    startup,       // before a StartupMessage (SSLRequest may come first)
    auth,          // authentication exchange in progress
    welcome_wait,  // authenticated, waiting for the pool's first server to log in
    idle,          // logged in, no server
    waiting,       // queued for a server
    active,        // linked to a server
    closing,
  };

  Client(Worker& worker, uint64_t id);
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;
  ~Client() override;

  Channel& channel() { return channel_; }
  // After accept(): records the peer address and starts reading.
  void start();

  // --- from the pool ---
  void on_welcome(const ParameterSet& server_parameters);
  void on_server_linked(Server& server);
  // A request could not be served (query_wait_timeout, server login failures, shutdown): a
  // FATAL error, then the connection closes. The log's close line gives `log_reason` (the
  // message when empty): a server login failure is logged in the server's own words, as
  // PgBouncer does.
  void fail(std::string_view sqlstate, std::string_view message, std::string_view log_reason = {});

  // --- from the linked server ---
  void on_server_released();
  void on_server_lost(std::string_view message);
  // The linked server's connection was lost and the client can carry on (client_lost_server.h):
  // the requests in flight are answered with the error, the client stays connected.
  void keep_after_server_loss(const ServerLoss& loss);
  // A large message of the client's is on its way to the server in pieces (its rest would
  // arrive without a server to take it).
  [[nodiscard]] bool mid_message() const { return passthrough_remaining_ > 0; }
  // The linked server has read its settings back: what the client sent meanwhile goes on (true
  // when something was held, which the server's parameter sync must then come before).
  [[nodiscard]] bool input_held_for_read_back() const { return held_.for_read_back; }
  void resume_input_after_read_back();
  // A Describe 'S' of the client's statement `name` was answered: the client was told `shape`.
  void note_told_shape(std::string_view name, const PreparedStatement& stmt,
                       std::shared_ptr<const std::string> shape);
  // The server's sync to this client's settings failed and the server is gone: the request
  // that was held for it is answered with `error_response` (a whole ErrorResponse) instead of
  // running anywhere; the client stays connected, and its next request links a server anew.
  void refuse_held_request(std::string error_response);
  // No server ever took the settings of the client's startup packet and the first sync failed:
  // as PostgreSQL refuses such a login with FATAL, the client gets `fatal_response` (a whole
  // ErrorResponse, PostgreSQL's own fields) and is closed, instead of an error per statement.
  void end_with_startup_error(std::string fatal_response);
  // Whether a server has been in this client's settings once (ClientParameters::taken_once).
  [[nodiscard]] bool settings_taken() const { return params_.taken_once; }
  void note_settings_taken() { params_.taken_once = true; }
  // The pool has a pin free, maybe: the statement that waited for one asks for a server again.
  void retry_after_pin_wait();
  // The server's socket took what this client sent: reading may resume.
  void on_server_drained();
  // A ParameterStatus the server reported while linked: the client sees it only when its own
  // view of the value changes.
  void on_server_parameter(std::string_view name, std::string_view value);

  // --- replication connections (client_replication.cc) ---
  // replication=true or =database: a walsender of its own, never shared (pool.h).
  [[nodiscard]] protocol::ReplicationMode replication() const { return replication_; }
  // The startup parameters that go, as the client sent them, into its walsender's
  // StartupMessage (all but user, database, replication, _pq_.* and ignore_startup_parameters):
  // a physical walsender takes no SET, so nothing can be applied after its login.
  [[nodiscard]] const std::vector<std::pair<std::string, std::string>>& replication_parameters()
      const {
    return login_.replication_parameters;
  }
  // The pool started this client's walsender connection; it is linked from now on (a client
  // that leaves while it logs in closes it).
  void on_replication_server(Server& server) { server_ = &server; }
  // Its walsender logged in: the greeting is its ParameterStatus set, then bytes flow both ways.
  void on_replication_ready(Server& server);
  // Its walsender's login failed: the client gets PostgreSQL's own error (a missing REPLICATION
  // attribute, no pg_hba.conf line for replication), not a generic one.
  void on_replication_refused(std::string_view sqlstate, std::string_view message);

  // --- online restart (client_takeover.cc, takeover.h) ---
  // Old process: what the client carries to the new one; false when it cannot move now.
  bool export_state(TakeoverClient& out) const;
  // New process: a client taken over on this (adopted) socket goes on as logged in.
  bool resume(TakeoverClient state);

  // --- from AuthQuery: the secret of a user without an auth_file entry (client_login.cc) ---
  void on_auth_lookup(const AuthLookupResult& result);

  // Closes the connection; `reason` is logged (when log_disconnections is on) in PgBouncer's
  // shape, "closing because: <reason> (age=<s>s)", which operators' tools grep. A client that
  // leaves before its StartupMessage is not logged (a port probe, a CancelRequest); one that is
  // refused there (fail) is.
  void close(std::string_view reason);
  // disable_pqexec: a Query message (`type`) fails the client as PgBouncer does, FATAL 08P01
  // "PQexec disallowed"; true when it did.
  bool refused_simple_query(char type);
  // query_wait_notify: tells the client it is queued, in PgBouncer's words (a NOTICE).
  void notify_queued();

  [[nodiscard]] State state() const { return state_; }
  [[nodiscard]] uint64_t id() const { return id_; }
  [[nodiscard]] Server* server() const { return server_; }
  [[nodiscard]] Pool* pool() const { return pool_; }
  [[nodiscard]] const std::string& user() const { return who_.user; }
  [[nodiscard]] const std::string& database() const { return who_.database; }
  [[nodiscard]] const ParameterSet& tracked_parameters() const { return params_.reported; }
  [[nodiscard]] int32_t protocol_version() const { return who_.protocol_version; }
  void set_cancel_key(int32_t pid, std::string key);
  [[nodiscard]] const ParameterSet& startup_extras() const { return params_.extras; }
  // The reported parameters the client gave at startup (DateStyle, TimeZone, …): what a RESET
  // of one gives back.
  [[nodiscard]] const ParameterSet& startup_reported() const { return params_.startup_reported; }
  // The settings the server does not report that this client wants on every server: its startup
  // extras, changed by what its SQL set under the `keep` action (kept_settings.h).
  [[nodiscard]] const ParameterSet& session_settings() const { return params_.settings; }
  ParameterSet& session_settings() { return params_.settings; }
  [[nodiscard]] uint64_t wait_started_ms() const { return wait_started_ms_; }
  [[nodiscard]] uint64_t connected_ms() const { return who_.connected_ms; }
  // When the client last sent anything (client_idle_timeout).
  [[nodiscard]] uint64_t last_request_ms() const { return last_request_ms_; }
  [[nodiscard]] int32_t cancel_pid() const { return cancel_.pid; }
  [[nodiscard]] const std::string& cancel_key() const { return cancel_.key; }
  [[nodiscard]] const std::string& log_id() const { return who_.log_id; }
  [[nodiscard]] const std::string& peer() const { return who_.peer; }

  // Protocol-level prepared statements: a name whose Parse failed or the server skipped (an
  // error earlier in the batch) is free again, and kept aside as an unrun statement.
  void forget_statement(const std::string& name, uint64_t id);
  // The client's protocol-level prepared statements (SHOW CLIENTS).
  [[nodiscard]] size_t prepared_statement_count() const { return prepared_.by_name.size(); }
  // A stale plan (0A000) of `stmt` reached this client, or its batch was sent again with a
  // Describe of the portal: the client knows the statement's new row description.
  void note_stale_plan_seen(const PreparedStatement& stmt);
  // Its SQL prepared statements, when SQL PREPARE is kept (client_sql_prepare.cc).
  ClientSqlStatements& sql_statements() { return prepared_.sql; }
  // Its unnamed statement is gone (client_unnamed_statement.cc): a Query or a Close ended it, or
  // its last unnamed Parse failed or was skipped.
  void forget_unnamed_statement() {
    if (prepared_.unnamed.serial != 0) drop_unnamed_statement();
  }

  // --- the LISTEN relay (client_relay.cc, listen_relay.h) ---
  // Its LISTENs are relayed (transaction mode, the listen kind's action is `relay`).
  [[nodiscard]] bool relays_listen() const { return listen_.relays; }
  [[nodiscard]] const ChannelSet& listen_channels() const { return listen_.channels; }
  [[nodiscard]] int worker_index() const;
  // The read-back of a transaction that touched LISTEN: the channels it listens on now, and the
  // ReadyForQuery that ended the transaction, which goes once the relay listens on every
  // channel added (until then the client's further input waits).
  void on_listen_read_back(ChannelSet after, std::string ready_wire);
  // The relay listens on them now (posted by the relay).
  void on_relay_confirmed();
  // A NotificationResponse of `channel` (or, with an empty channel, a NOTICE for every listener):
  // written now when the client is between transactions, held otherwise, within
  // session_state_relay_queue bytes.
  void on_relay_message(std::string_view channel, std::string_view wire);
  // Writes what was held (not flushed), when the client is between transactions.
  void deliver_relayed();

  // ChannelOwner
  void on_channel_readable(Channel& channel) override;
  void on_channel_error(Channel& channel, int status) override;
  void on_channel_drained(Channel& channel) override;
  void on_channel_closed(Channel& channel) override;
  void on_channel_tls_ready(Channel& channel) override;

  ListNode worker_node;  // on the worker's list of clients
  ListNode pool_node;    // on a pool's waiting list while it waits
  ClientQueueWait wait;  // set and read by the pool (client_queue_wait.h)

  // The admin console (database "pgsluice" or "pgbouncer"): answered by a ConsoleSession.
  [[nodiscard]] bool is_admin_console() const { return admin_console_; }
  // `pgbouncer` from the pooler's own OS user over the Unix socket: an admin (client_login.cc).
  [[nodiscard]] bool is_own_user() const { return login_.own_user; }

 private:
  void set_state(State state);
  void process_input();
  void process_startup_input();
  bool handle_startup_packet(const protocol::Message& message);
  bool handle_startup_message(const protocol::StartupPacket& packet);
  // Its parameters into params_ (client_login.cc); false when refused (the client is failed).
  bool read_startup_parameters(const protocol::StartupPacket& packet);
  void handle_cancel_request(const protocol::StartupPacket& packet);
  // A cancel key of the pooler's own for the client, registered with the worker (at its
  // welcome, or its replication start); false (the client failed) when no random key came.
  bool register_for_cancel();
  // TLS (tls_client.cc): answers an SSLRequest with 'S' and starts the handshake (false: decline
  // with 'N'); refuses a plaintext StartupMessage under client_tls_sslmode >= require; logs in
  // by the certificate's CN under auth_type = cert.
  bool accept_tls();
  // Direct TLS (sslnegotiation=direct): the connection opened with a TLS record, no SSLRequest.
  [[nodiscard]] bool opens_with_tls_record();
  void accept_direct_tls();
  bool tls_requirement_met();
  void login_by_certificate();
  // Authentication (client_login.cc): the method (auth_type, or the auth_hba_file rule that
  // matches), the secret (auth_file, or auth_query), then the exchange.
  void begin_authentication();
  // log_connections: PgBouncer's "login attempt: db= user= tls= replication=" line.
  void log_login_attempt();
  std::optional<AuthType> decide_by_hba();
  bool peer_matches();
  // The auth_ident_file map of the hba rule lets `system_user` log in as the client's user.
  [[nodiscard]] bool ident_permits(std::string_view system_user) const;
  // The connecting process's uid (SO_PEERCRED); none over TCP.
  std::optional<uid_t> peer_uid();
  void start_exchange(std::optional<std::string> secret);
  // auth_type = trust and a user neither auth_file nor (looked_up) auth_query knows.
  void refuse_unknown_trust_user(bool looked_up);
  void note_auth_failure();
  // A message above PostgreSQL's cap before login: FATAL 08P01, counted, logged.
  void refuse_oversized_login_message();
  // One above max_packet_size after login: the same, in the words PgBouncer's users know.
  void refuse_oversized_message(const protocol::MessageHeader& header);
  // The message at the front of the input, larger than what has arrived, may go to the server
  // in pieces (forwarder.h) instead of waiting whole in memory.
  bool may_stream(char type);
  // CopyData, CopyDone and CopyFail of a COPY whose server already ended it (an error there, whose
  // ReadyForQuery released the server) are dropped as PostgreSQL drops them outside COPY, not
  // given a server (PgBouncer 1.26, #1471). False while the last one is still arriving. Inline:
  // every message of an idle client asks, and its type byte alone almost always answers.
  bool drop_late_copy_messages() {
    if (late_copy_remaining_ == 0) {
      const protocol::FrameReader& in = channel_.input();
      if (in.unread_size() == 0) return true;
      const char first = in.unread().front();
      namespace fe = protocol::frontend;
      if (first != fe::kCopyData && first != fe::kCopyDone && first != fe::kCopyFail) return true;
    }
    return drop_late_copy_messages_now();
  }
  bool drop_late_copy_messages_now();
  void process_auth_input();
  void auth_succeeded();
  // A queued client's input beyond this stops its reading until a server is linked (what it
  // sends while it waits stays in its input buffer, whose first size is 16 kB).
  static constexpr size_t kQueuedInputLimit = 16 * 1024;
  void stop_reading_when_queued_input_is_full();
  void process_regular_input();
  // Replication (client_replication.cc): the startup parameter read, the parameters kept for
  // the walsender; false when the client was refused.
  bool read_replication_parameter(const protocol::StartupPacket& packet);
  void keep_replication_parameter(std::string_view name, std::string_view value);
  void begin_replication();
  // A linked walsender: the client's bytes go to it as they come, unparsed (COPY both ways).
  void relay_replication_input();
  // Forwards complete (or streamable) messages to the linked server.
  void forward_to_server();
  // A Query or Parse the session-state policy refuses (session_checks.h): the refusal is
  // written to `out` (after what `batch` holds) in place of the message; or the pin it needs
  // is not free now: the message is given back to the input and the client waits for a pin
  // (wait_for_pin; also true). False: forward it.
  bool refused_by_session_checks(const protocol::Message& message, Forwarder& batch,
                                 std::string& out);
  // Without the checks (session mode), a client that gave reported settings at startup: a Query
  // or Parse that resets one of them is noted, so that the end of its transaction puts the
  // startup value back as PostgreSQL would (session_checks.cc).
  [[nodiscard]] bool notes_startup_resets() const {
    return !session_checks_ && !params_.startup_reported.empty();
  }
  void note_session_mode_resets(const protocol::Message& message);
  // Relay: nothing between this client and a notification (no transaction, no held reply).
  [[nodiscard]] bool may_deliver_relayed() const;
  // The queue passed session_state_relay_queue: FATAL 54000 and the connection closes.
  void relay_overflow(size_t limit);
  void leave_relay();
  // At the end of a link: what was held goes out; false when that closed the client. Inline:
  // a client that listens on nothing holds nothing.
  bool deliver_relayed_after_release() { return listen_.relayed.empty() || deliver_held_relayed(); }
  bool deliver_held_relayed();
  // A message a logged-in client may not send: one no client sends then (an unknown type, a
  // PasswordMessage), or a Query under disable_pqexec. refuse_type fails the client for it.
  [[nodiscard]] bool refused_type(char type) const;
  void refuse_type(char type);
  // A header that cannot be read: too long (refuse_oversized_message) or malformed.
  void refuse_bad_header(const protocol::HeaderResult& header);
  void send_error(std::string_view severity, std::string_view sqlstate, std::string_view message,
                  std::string_view hint = {});
  void protocol_violation(std::string_view message);
  // close(), with the log line written or not.
  void close_logged(std::string_view reason, bool log);

  // How a message went under prepared statement rewriting (client_statements.cc).
  enum class Routed {
    as_is,     // forward it unchanged
    written,   // rewritten into the server's output; its reply is queued
    answered,  // answered by the pooler (its made-up reply is queued); nothing sent
    held,      // not yet: read again once the server has answered the pooler's question
  };
  Routed route_statement_message(const protocol::Message& message, std::string& out);
  // One per message type: a client's statement name mapped to the pooler's (Parse, Bind,
  // Describe and Close of a statement), SQL DEALLOCATE / DISCARD ALL (Query).
  Routed route_parse(const protocol::Message& message, std::string& out);
  Routed route_bind(const protocol::Message& message, std::string& out);
  // A Bind of a statement whose query leaves session state runs the checks again.
  bool bind_needs_checks(const PreparedStatement& stmt);
  Routed route_describe(const protocol::Message& message, std::string& out);
  Routed route_close(const protocol::Message& message);
  // The client's statement of that name, an unrun one (below) made the client's again; end()
  // when it has none.
  std::unordered_map<std::string, ClientStatement>::iterator find_statement(std::string_view name);
  // A Bind of a statement whose client was told its shape (ClientStatement::told_shape), on a
  // server whose copy may describe another: checked first (held), or refused with PostgreSQL's
  // 0A000 (written); nullopt: it goes on as usual.
  std::optional<Routed> route_told_bind(ClientStatement& use, std::string_view name,
                                        std::string& out);
  void drop_unrun_statement(std::string_view name);
  void forget_all_statements();
  Routed route_query(const protocol::Message& message, std::string& out);
  // SQL PREPARE kept (client_sql_prepare.cc, sql_prepared.h): a Query, or an unnamed Parse,
  // that names SQL prepared statements, renamed for the server and written to `out`; nullopt
  // when SQL PREPARE is not kept or nothing is renamed.
  [[nodiscard]] bool keeps_sql_prepare() const;
  std::optional<SqlQueryPlan> plan_sql(std::string_view sql, SqlPlanMode mode);
  std::optional<Routed> route_sql_query(std::string_view sql, std::string& out);
  std::optional<Routed> route_sql_parse(const protocol::Parse& parse, std::string& out);
  // The Execute after a renamed Parse carries its plan; a Sync before one drops it.
  Routed route_execute_or_sync(const protocol::Message& message, std::string& out);
  void drop_unexecuted_sql_parse();
  // The client's unnamed statement (client_unnamed_statement.cc): its Parse goes to the server
  // and is kept (route_parse; renamed, a SQL PREPARE kept's); a Describe or Bind of it on a
  // server that lacks it parses it there first (hidden), or, when the client has none, closes
  // the server's (PostgreSQL's 26000 follows).
  void keep_renamed_unnamed_parse(const protocol::Parse& parse);
  void prepare_unnamed_statement(std::string& out);
  void drop_unnamed_statement();
  // A named Parse whose text only EXECUTEs the client's SQL prepared statements: renamed, with
  // those statements in `prepares` (the protocol-level statement's dependencies). Nullopt: as is
  // (a PREPARE or DEALLOCATE in a named statement runs at every execution: not renamed).
  std::optional<SqlQueryPlan> plan_named_sql(std::string_view query);
  // The messages route_statement_message looks at: an Execute or a Sync only after a renamed
  // Parse, a Query only when it may name a prepared statement (route_query: a DEALLOCATE or
  // DISCARD, a PREPARE or EXECUTE the prefilter sees, while a Parse's PREPARE is still to drop).
  // The others, nearly every Query among them, pass in the forwarding batch untouched: the
  // rewriter costs them this test, not a call.
  [[nodiscard]] bool routes_statement_message(const protocol::Message& message) {
    namespace fe = protocol::frontend;
    switch (message.type) {
      case fe::kParse:
      case fe::kBind:
      case fe::kDescribe:
      case fe::kClose:
        return true;
      case fe::kExecute:
      case fe::kSync:
        return prepared_.unexecuted_sql_parse != nullptr;
      case fe::kQuery: {
        if (prepared_.unexecuted_sql_parse != nullptr) return true;
        auto query = protocol::parse_query(message.body);
        return !query || protocol::starts_like_deallocate_command(query.value.sql) ||
               (session_checks_ && prefilter_.may_change_session_state(query.value.sql));
      }
      default:
        return false;
    }
  }
  void refuse_until_sync(std::string code, std::string message, std::string hint);
  // refuse_held_request's answer, once its request is here: the error, the messages up to the
  // Sync skipped, a ReadyForQuery. False while the request has not come whole (or the client
  // was closed).
  bool answer_held_request();
  // The next whole message of the client's input, for a request the pooler answers itself
  // (answer_held_request, answer_after_server_loss): `taken` (in `message`), `wait` for more
  // bytes, `terminate` (left in the input for the usual close), `refused` (a bad header: the
  // client is being closed).
  enum class NextOwn : uint8_t { taken, wait, terminate, refused };
  NextOwn take_message_to_answer(protocol::Message& message);
  // What the client sends while lost_ is active, answered by the pooler; false while a message
  // has not come whole (or the client was closed).
  bool answer_after_server_loss();
  void answer_lost_message(char type, std::string_view body);
  // The failed block ends (its ROLLBACK, COMMIT or END, answered ROLLBACK).
  void end_lost_block();
  // Its statement's pin is refused by the reserve (SessionCheckResult::wait_for_pin): the
  // statement was given back to the input, the server goes back to the pool.
  void wait_for_pin();
  // A refused Query or Parse, replaced by a statement the server itself refuses.
  void write_refusal(const protocol::Message& message, std::string_view text, std::string_view hint,
                     std::string& out);
  // Without statement rewriting, a refused Parse became a statement with no parameter: a Bind
  // of it is sent without its parameters, so that the client gets the 0A000 at Execute
  // rather than a parameter-count error. True when `message` was written here.
  bool bind_refused_statement(const protocol::Message& message, std::string& out);

  Worker& worker_;
  uint64_t id_;
  State state_ = State::startup;
  // What every transaction reads, kept together so that a transaction touches a few cache lines
  // of the client, not one per member (docs/profile.md 0i).
  bool session_checks_ = false;  // transaction mode and a policy that is not all "off"
  bool discard_until_sync_ = false;
  bool admin_console_ = false;
  ClientHeldRequest held_;  // client_listen_state.h
  ClientLostServer lost_;   // client_lost_server.h
  protocol::ReplicationMode replication_ = protocol::ReplicationMode::none;
  Pool* pool_ = nullptr;
  Server* server_ = nullptr;
  size_t passthrough_remaining_ = 0;
  size_t late_copy_remaining_ = 0;  // drop_late_copy_messages: bytes still to drop
  uint64_t wait_started_ms_ = 0;
  uint64_t last_request_ms_ = 0;
  ClientParameters params_;   // client_identity.h
  PrefilterMemo prefilter_;   // for the message forward_to_server handles
  ClientListenState listen_;  // the LISTEN relay's (client_listen_state.h)
  SessionPolicy session_policy_;
  Channel channel_;
  ClientIdentity who_;

  ClientLoginState login_;  // client_login_state.h
  ClientCancelKey cancel_;

  ClientPreparedStatements prepared_;  // client_statements_state.h
  // Closed for its queue: the error is sent and the connection stays until the client closes it
  // (closing first would reset it, and a reset may discard the error before the client reads it).
  bool close_when_client_closes_ = false;
  std::unique_ptr<ConsoleSession> admin_;
};

}  // namespace pgsluice
