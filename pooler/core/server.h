// One connection from the pooler to PostgreSQL: connect, log in (cleartext, MD5 or SCRAM, with a
// password or with SCRAM keys passed through from a client), then serve clients one transaction
// (transaction mode) or one session (session mode) at a time.
//
// While linked to a client, the server's replies are forwarded to that client; the server keeps
// the accounting that decides when it may go back to the pool: how many ReadyForQuery the client
// is still owed (one per Query, Sync and FunctionCall), whether an extended-protocol batch is open
// without its Sync, and whether a COPY is in progress. Queries the pooler sends itself (parameter
// sync, reset, rollback) are answered first, and their replies are swallowed.
#pragma once

#include <uv.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "pgsluice/protocol/backend.h"
#include "pgsluice/protocol/frame.h"
#include "pgsluice/protocol/scram.h"
#include "pgsluice/protocol/session_state.h"
#include "pgsluice/protocol/startup.h"
#include "pooler/base/intrusive_list.h"
#include "pooler/config/server_address.h"
#include "pooler/core/pending_replies.h"
#include "pooler/core/prepared_statements.h"
#include "pooler/core/role_check.h"
#include "pooler/core/server_handles.h"
#include "pooler/core/server_lifecycle.h"
#include "pooler/core/server_login_state.h"
#include "pooler/core/server_query.h"
#include "pooler/core/server_statements_state.h"
#include "pooler/core/stats.h"
#include "pooler/link/reply_queue.h"
#include "pooler/net/channel.h"
#include "pooler/session_state/dirty_state.h"
#include "pooler/session_state/findings.h"
#include "pooler/session_state/function_verdicts.h"
#include "pooler/session_state/kept_settings.h"
#include "pooler/session_state/listen_channels.h"
#include "pooler/session_state/params.h"
#include "pooler/session_state/server_session.h"
#include "pooler/session_state/sql_prepared.h"
#include "pooler/session_state/verify.h"

namespace pgsluice {

// The most parameters a server may report (PostgreSQL: a few dozen, GUC_REPORT ones): at login
// more fail the login, later new names beyond it are ignored (server_login.cc, server.cc).
inline constexpr size_t kMaxServerParameters = 1000;

class Client;
class ListenRelay;
class Pool;
class Worker;

struct ServerCredentials {
  std::string user;
  std::string password;  // plain, "md5…", "SCRAM-SHA-256$…" or empty
  // SCRAM pass-through: the keys a client of this user proved (when the secret is a verifier).
  std::optional<protocol::ScramKey> scram_client_key;
  std::optional<protocol::ScramKey> scram_server_key;
};

class Server final : public ChannelOwner {
 public:
  // `moving`: between two workers (server_release.cc), on no pool's list. `listening`: the pool's
  // LISTEN relay connection (listen_relay.h), which serves no client. `replicating`: a
  // replication client's own walsender connection, logged in (server_login.cc).
  // `being_canceled`: released while cancel requests sent for it were still on their way, so
  // linked to nobody and taken by nobody until they have landed (PgBouncer's list of that name).
  // `draining`: its client left while replies were owed (to the client's whole requests, or to
  // the pooler's own query): they are read to their last ReadyForQuery and dropped, then the
  // server is cleaned as for any client that leaves (detach_client).
  enum class State {
    connecting,
    login,
    idle,
    active,
    resetting,
    being_canceled,
    draining,
    closing,
    moving,
    listening,
    replicating
  };

  // `host` names which of the pool's hosts (pool_hosts.h) it logs in to, `address` that host.
  Server(Pool& pool, uint64_t id, size_t host, ServerAddress address);
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;
  ~Server() override;

  void connect();

  // Links an idle server to a client: the client's parameters are applied first when they
  // differ from the server's.
  void link(Client& client);
  // What the linked client sends waits: a read-back of the settings its transaction changed
  // is under way, or the parameter sync that must succeed before any statement of the client
  // runs here (fail closed: server_session_state.cc).
  [[nodiscard]] bool holds_client_input() const {
    return session_.kept.awaiting() || parameter_sync_owed_ || rewrite_.shape_check != nullptr;
  }
  // The client is going away: the server is cleaned (rolled back, reset) and returned to the
  // pool, or closed when it is in the middle of something it cannot safely finish.
  void detach_client();

  // Session-state checks: what the linked client left on this server under `reset`/`pin`,
  // cleaned when the server is released; a pinned server stays with its client.
  void mark_dirty(const protocol::SessionStateFinding& finding);
  void mark_dirty_unknown();
  // A finding the linked client's SQL left here (any action that forwards it): state that
  // session_state_verify may find without calling it hidden.
  void note_session_state(const protocol::SessionStateFinding& finding) {
    session_.verifier.track().note(finding);
  }
  SessionVerifier& verifier() { return session_.verifier; }
  // opaque_call:reset (function_verdicts.h): a function the process has no verdict on yet; its
  // overloads are read from pg_proc at the release, before the cleaning.
  void look_up_function(std::string_view name);
  // The verdict cache's key of a function name called on this server now: the pool's database
  // and user, and the search_path the pooler believes the server has.
  [[nodiscard]] std::string function_verdict_key(std::string_view name) const;
  // The linked client's transaction changed settings (their read-back is to come): the
  // search_path a verdict was keyed by may not be the one in effect.
  [[nodiscard]] bool settings_changing() const { return session_.kept.any(); }
  // `keep` (kept_settings.h): a setting the linked client changed, read back from the server
  // once the transaction has ended, before the server is released; `literal`: the value of a
  // plain SET that commits alone (set_literal.h), whose read-back the pool may know already.
  void keep_setting(const protocol::SessionStateFinding& finding,
                    std::optional<std::string> literal = std::nullopt) {
    session_.kept.note(finding, std::move(literal));
  }
  // currval()/lastval() in a transaction of its own, the link's first request: when other
  // clients used this server since its sequence values were last discarded, they are discarded
  // first (DISCARD SEQUENCES), so that the client gets PostgreSQL's "not yet defined in this
  // session" rather than another client's value. Later in a link (a pinned client's next
  // transaction) the values may be the client's own nextval's: left alone.
  void forget_other_clients_sequences(const Client& client);
  // A statement the checks flag is about to run: what the noted SETs gave may change.
  void forget_kept_literals() { session_.kept.forget_literals(); }
  void keep_settings_discarded() { session_.kept.note_reset_all(/*discard_all=*/true); }
  // Session mode keeps only the resets of reported settings (Client::note_session_mode_resets).
  void forget_unreported_kept_settings() { session_.kept.forget_pending(); }
  // `relay` (listen_channels.h): a LISTEN, UNLISTEN or DISCARD ALL of the linked client's
  // statement about to be forwarded; its channels are read back at the end of the transaction,
  // and the server unlistens everything before it serves anyone else (server_session_state.cc).
  void relay_listen(const protocol::SessionStateFinding& finding) { session_.listen.note(finding); }
  void relay_listen_discarded() { session_.listen.note_discard_all(); }
  // Before that statement goes: the client's channels are LISTENed here first, in an implicit
  // transaction of their own, when nothing is owed and no transaction is open; then the
  // read-back is the client's exact set.
  void sync_listen_channels(const ChannelSet& client_channels);
  // Linked, between transactions, nothing of the pooler's own under way: a notification may be
  // written to the client now.
  [[nodiscard]] bool quiet_for_notifications() const;
  // --- the pool's LISTEN relay connection (listen_relay.h) ---
  void serve_as_listener(ListenRelay& relay) { relay_ = &relay; }
  [[nodiscard]] bool is_listener() const { return relay_ != nullptr; }
  void send_listener_query(const std::string& sql);
  // Pins the server to its client when the pool has fewer than pool_size -
  // session_state_pin_reserve servers pinned (shared_limits.h); false, nothing changed,
  // otherwise. Already pinned: true.
  // `why`: the finding's kind and detail, as SHOW CLIENTS/SERVERS show it ("advisory_lock").
  // `past_reserve`: up to the pool's size, for a statement whose pin the server's answer
  // decides (the pin check at the transaction's end unpins it when nothing was taken).
  bool pin(std::string why, bool past_reserve = false);
  [[nodiscard]] bool pinned() const { return session_.pin.pinned; }
  // What pinned the server; empty when it is not pinned.
  [[nodiscard]] const std::string& pinned_for() const { return session_.pin.why; }
  // The linked client ran what may end its pin (an unlock, UNLISTEN, CLOSE, DEALLOCATE,
  // DISCARD): the check whether anything is still held runs at the next transaction boundary.
  void note_pin_may_end() { session_.pin.may_end = true; }
  [[nodiscard]] bool dirty() const { return session_.dirty.any(); }

  // The opaque calls of the Query about to be sent, kept until its first reply says whether its
  // statement ran (settle_deferred_calls, session_checks.h); only while the server owes nothing
  // else, so that the next reply is that Query's.
  void defer_call(OwnedFindingEvent call) { session_.deferred_calls.push_back(std::move(call)); }
  [[nodiscard]] bool owes_nothing() const {
    return !replies_.request_open() && rewrite_.pending.empty() && passthrough_remaining_ == 0;
  }
  // Nothing the client sent is unanswered (the pooler's own queries, such as the link's
  // parameter sync, may be: they never leave a transaction open).
  [[nodiscard]] bool owes_client_nothing() const {
    return replies_.client_ready_owed() == 0 && !replies_.extended_open() &&
           replies_.copy() == ReplyQueue::Copy::none && rewrite_.pending.empty() &&
           passthrough_remaining_ == 0;
  }

  // Called by the linked client for every message it forwards here. With prepared statement
  // rewriting on, it also queues the reply the message expects (unless `queue_reply` is false:
  // the client queued a special one itself).
  // `wire` is the message as sent (kept while a batch may have to be sent again).
  void note_client_message(char type, bool queue_reply = true, std::string_view wire = {});

  // --- protocol-level prepared statements (transaction mode, max_prepared_statements > 0) ---
  [[nodiscard]] bool rewrites_statements() const { return rewrite_.cache != nullptr; }
  // The server has the unnamed statement of client `client`'s Parse `serial` (UnnamedStatement,
  // client_unnamed_statement.cc); note_unnamed_statement: it will have (0, 0: not known).
  [[nodiscard]] bool has_unnamed_statement(uint64_t client, uint64_t serial) const {
    return serial != 0 && rewrite_.unnamed.serial == serial && rewrite_.unnamed.client == client;
  }
  void note_unnamed_statement(uint64_t client, uint64_t serial) {
    rewrite_.unnamed = {.client = client, .serial = serial};
  }
  void expect(PendingReply reply);
  // A Bind or Describe 'S' of `stmt`, rewritten as `wire` (server_statements.cc): from here to the
  // end of the batch the requests are kept, for a retry after a stale plan (0A000).
  // `client_name`: a Describe 'S', whose answer tells that client statement its shape;
  // `shape_told`: a Bind of a statement whose client was told its shape.
  void expect_rewritten(PendingKind kind, const PreparedStatementRef& stmt, std::string_view wire,
                        std::string client_name = {}, bool shape_told = false);
  // The shape of `stmt` as this server described it (null: it has not, or lacks the statement).
  [[nodiscard]] const std::shared_ptr<const std::string>* statement_shape(
      const PreparedStatement& stmt) const {
    return has_statement(stmt) ? rewrite_.cache->shape(stmt.id) : nullptr;
  }
  // A Describe 'S' of `stmt` (prepared here already) and a Flush, whose answer is the server's
  // shape of it: the client's input waits for it (the Bind that needs it is read again then).
  // Only where nothing else is owed and no error is being skipped (may_check_shape).
  void check_statement_shape(const PreparedStatementRef& stmt, std::string& out);
  // A hidden Parse of `stmt` at its current generation, after a hidden Close when the server
  // has a copy of it already (whatever its generation).
  void prepare_statement_again(const PreparedStatement& stmt, std::string& out);
  [[nodiscard]] bool may_check_shape() const;
  // Queues `reply` for the request written to `out` from `mark` on.
  void expect_sent(PendingReply reply, const std::string& out, size_t mark);
  [[nodiscard]] bool has_statement(const PreparedStatement& stmt) const {
    return rewrite_.cache->has(stmt.id, stmt.generation);
  }
  void touch_statement(uint64_t id) { rewrite_.cache->touch(id); }
  // Statements prepared on this server under rewritten names (SHOW SERVERS).
  [[nodiscard]] size_t prepared_statement_count() const {
    return rewrite_.cache != nullptr ? rewrite_.cache->size() : 0;
  }
  // Writes the Parse of `stmt` under its server name (after Close messages for statements the
  // cache evicts) and queues its reply: the client's own (`hidden` false) or swallowed.
  void prepare_statement(const PreparedStatement& stmt, bool hidden, std::string client_name,
                         std::string& out);
  // DEALLOCATE ALL or DISCARD ALL ran on this server: it has no statement left.
  void forget_statements();
  // Rewriting on or off, and the cache's size, from max_prepared_statements and the pool mode
  // as they are now (a SET on the console): called at each link.
  void apply_statement_settings();
  // A client sent DEALLOCATE ALL or DISCARD ALL, which the server may skip after an error. Its
  // SQL statements (kept ones) are then unknown: forgotten, and DEALLOCATE ALL at the release.
  void statements_may_be_gone();
  // The SQL prepared statements it has under the pooler's names (SQL PREPARE kept).
  ServerSqlStatements& sql_statements() { return rewrite_.sql; }
  // Writes a PREPARE of `stmt` as the unnamed statement, bound and executed, its replies hidden:
  // before a client's Parse that uses the statement (client_sql_prepare.cc).
  void prepare_sql_statement(const SqlStatementRef& stmt, std::string& out);
  // A client's Bind of a statement whose result type changed since the client last saw it
  // (server_statements.cc): refused with PostgreSQL's 0A000, as a Bind the server itself refuses so
  // that the transaction fails as it would have; not when the server's transaction state is
  // unknown (an earlier batch still owed) or failed (PostgreSQL would answer 25P02).
  [[nodiscard]] bool may_refuse_stale_bind() const;
  void refuse_stale_bind(const PreparedStatementRef& stmt, std::string& out);
  // After the client handled messages itself (a DEALLOCATE answered by the pooler): when the
  // server owes nothing, the link ends as at a ReadyForQuery.
  void release_if_nothing_owed();

  // Sends the cancel request for whatever this server runs now. Until PostgreSQL has closed
  // every such request's connection (or cancel_wait_timeout passed), the server does not go back
  // to its pool: a request still on its way would cancel the next client's query (PgBouncer's
  // sv_being_canceled). release_to_pool holds it in State::being_canceled meanwhile.
  void cancel_running_query();
  [[nodiscard]] int cancels_in_flight() const { return cancels_ ? cancels_->in_flight : 0; }

  // --- replication connections (server_login.cc) ---
  // Before connect(): this server is `client`'s walsender. It logs in with the client's
  // replication parameter and startup parameters, skips connect_query and the role check, is
  // linked to that client alone from its creation on, and closes with it.
  void serve_replication(Client& client);
  [[nodiscard]] protocol::ReplicationMode replication() const { return replication_; }

  // --- changing workers (server_release.cc): one pool per process ---
  // Idle, clean and between messages: the server may go to another worker's share of its pool.
  [[nodiscard]] bool movable() const;
  // Its client left while the replies to its last requests were under way, this long ago (ms;
  // -1: not so). The pool's maintenance closes it after kDrainLimitMs.
  [[nodiscard]] int64_t draining_for_ms(uint64_t now_ms) const {
    return state_ != State::draining || draining_since_ms_ == 0
               ? -1
               : static_cast<int64_t>(now_ms - draining_since_ms_);
  }
  static constexpr int64_t kDrainLimitMs = 2000;
  // Leaves this worker for `target` (on this worker's thread; its pool has already moved the
  // slots, shared_limits.h): off the pool's lists at once, its socket and timer closed here, and
  // the server is posted to `target` once libuv has let go of both. `answers_ask`: the target
  // asked for a server (Pool::ask_other_workers). False, with nothing changed, when the socket
  // could not be duplicated.
  bool move_to(Worker& target, bool answers_ask);
  // On the target's thread: the server joins `pool` (the target's share) as idle, reading `fd`.
  void arrive(Pool& pool, int fd);

  // Closes the connection; `reason` is logged (log_disconnections) in PgBouncer's shape,
  // "closing because: <reason> (age=<s>s)".
  void close(std::string_view reason);
  // The reason a failed login closes with: PgBouncer's words when the connection itself could
  // not be made ("server DNS lookup failed", "connect failed", "connect timeout"), which log
  // readers match; otherwise the failure's message. The "server login failed" line keeps the
  // details either way.
  [[nodiscard]] std::string_view login_close_reason(std::string_view message) const {
    return handles_.connect_failure != nullptr ? std::string_view(handles_.connect_failure)
                                               : message;
  }

  [[nodiscard]] State state() const { return state_; }
  [[nodiscard]] uint64_t id() const { return id_; }
  [[nodiscard]] Client* client() const { return client_; }
  [[nodiscard]] Pool& pool() const { return *pool_; }
  Channel& channel() { return channel_; }
  [[nodiscard]] const ParameterSet& parameters() const { return tracked_; }
  [[nodiscard]] protocol::TransactionStatus transaction_status() const {
    return replies_.transaction_status();
  }
  // Nothing owed to the client and no transaction open: the link may end here.
  [[nodiscard]] bool at_transaction_boundary() const;
  [[nodiscard]] std::string log_id() const;

  // ChannelOwner
  void on_channel_readable(Channel& channel) override;
  void on_channel_error(Channel& channel, int status) override;
  void on_channel_drained(Channel& channel) override;
  void on_channel_closed(Channel& channel) override;
  void on_channel_tls_ready(Channel& channel) override;

  ListNode pool_node;    // on the pool's list of its state
  ServerTiming timing;   // stats and admin state (stats.h): query/xact timing, close_needed
  ServerLifecycle life;  // age and health checks (server_lifecycle.h)
  // server_check_query on an idle server (server_release.cc): it is `resetting` until the
  // answer; then idle again, or closed when the query failed.
  void run_check(const std::string& query);
  // The pooler's own query (server_query.h) on an idle server no client is linked to: writes
  // `messages` (ending with a Sync) and sends the replies to `sink`. False when not idle.
  bool run_query(std::string_view messages, ServerQuerySink& sink);
  // The role check (role_check.h) on an idle server: `resetting` until the answer, then idle
  // again through the pool (Pool::on_server_idle), which closes it when its role does not fit.
  // False when the server was not idle.
  bool check_role();
  [[nodiscard]] const RoleCheck& role_check() const { return role_check_; }
  // The server's role as last reported or checked; empty for a server older than 14 that has
  // not been checked yet.
  [[nodiscard]] std::optional<ServerRole> role() const;

  // For SHOW SERVERS.
  [[nodiscard]] int32_t backend_pid() const { return login_.backend_pid; }
  // The host it is connected to (one of a multi-host entry's), and its index in the pool's list.
  [[nodiscard]] const ServerAddress& address() const { return address_; }
  [[nodiscard]] size_t host_index() const { return host_index_; }
  // The protocol version the server connection speaks (3.0, or 3.2 with PostgreSQL 18).
  [[nodiscard]] int32_t protocol_version() const { return login_.protocol_version; }
  [[nodiscard]] uint64_t linked_at_ms() const { return linked_at_ms_; }
  // Client timeouts (client_timeouts.h): a reply still owed to the client (a query runs), and
  // when the last ReadyForQuery for the client came (idle in transaction since then).
  [[nodiscard]] bool awaiting_reply() const { return replies_.client_ready_owed() > 0; }
  [[nodiscard]] uint64_t ready_ms() const { return ready_ms_; }

 private:
  void set_state(State state);
  void start_connect(const sockaddr* addr);
  static void on_resolved(uv_getaddrinfo_t* req, int status, addrinfo* res);
  static void on_connected(uv_connect_t* req, int status);
  static void on_connect_timeout(uv_timer_t* timer);
  static void on_linger_timeout(uv_timer_t* timer);
  // How long a closing server waits for PostgreSQL to close the connection after Terminate.
  static constexpr uint64_t kLingerMs = 2000;

  // replace: `held_messages_.replacement` goes to the client instead of the message.
  enum class Reply { forward, swallow, forward_and_release, replace };
  enum class Match {
    forward,
    swallow,
    out_of_step,
    held_error_first,    // the held error goes to the client, then this reply
    held_error_instead,  // the held error goes to the client in place of this reply
  };

  void process_login_input();
  bool handle_login_message(const protocol::Message& message);
  bool handle_authentication(const protocol::Message& message);
  bool handle_negotiation(const protocol::Message& message);
  // Replies after login: forwarded to the linked client, or handled by the pooler.
  void process_session_input();
  // A reply larger than what has arrived, for the client: passed through as it comes (true).
  bool stream_reply(const protocol::MessageHeader& header);
  // One reply the client gets (or, for ParameterStatus, may get).
  Reply inspect_reply(const protocol::Message& message);
  // pool_mode = statement: a ReadyForQuery inside a transaction block (BEGIN, or a block the
  // extended protocol left open) ends the server and its client (refuse_transaction_block).
  [[nodiscard]] bool refuses_transaction_block(const protocol::Message& message) const;
  Reply refuse_transaction_block();
  // One reply to the pooler's own query, or an unsolicited message on an idle server; false
  // when the server was closed or changed hands.
  bool handle_internal_reply(const protocol::Message& message);
  // Walks the pending replies for one server reply.
  Match match_pending(const protocol::Message& message);
  // The ParameterDescription of a client's Describe 'S': a stale plan's error may follow it
  // (PostgreSQL revalidates for the RowDescription), and the retry does not send it twice.
  [[nodiscard]] bool statement_parameters(const protocol::Message& message) const;
  // A ParameterDescription, RowDescription or NoData: the answer to a Describe.
  Match match_description(const protocol::Message& message, PendingReply& front);
  // A Bind's BindComplete of a client not told its statement's shape: the portal's Describe
  // that follows it, if any, tells it (carries the statement and the client's name).
  void pass_statement_to_portal_describe(PendingReply& bind);
  // A CommandComplete of a Query or a hidden Execute under SQL PREPARE kept.
  Match match_sql_command_complete(PendingReply& front);
  // An ErrorResponse for the request at the front of the pending replies.
  Match match_error(const protocol::Message& message, PendingReply& front);
  // After an error in an extended-protocol batch, PostgreSQL skips to the Sync: so do the
  // pending replies (a Parse skipped there never created its statement).
  void skip_pending_to_sync();
  // Sends the made-up replies at the front of the queue to the client.
  void send_made_up_replies();
  // A stale plan (0A000) at a rewritten Bind (server_statements.cc): the error is held back and the
  // batch sent again after the statement is prepared again when nothing of the batch reached
  // the client and no transaction block is open; otherwise the error goes through and the
  // statement is prepared again at its next use. True when the error is held.
  bool hold_for_retry(const protocol::Message& error);
  // The ReadyForQuery that ends a batch whose error is held: the batch is sent again, or, when
  // that is no longer safe, the held error goes to the client first.
  Match on_ready_after_held_error(const protocol::Message& ready);
  void send_held_error();
  // A 42P05 from a client's Parse of a name it already uses is held, to go to the client
  // under the client's name.
  void hold_duplicate_error(const protocol::Message& error, const std::string& client_name);
  // The request written to `out` from `mark` on is kept with the last queued reply.
  void keep_request(const std::string& out, size_t mark);
  // Logged at debug level as "<what>: <sql>".
  void send_internal_query(const std::string& sql, std::string_view what = "internal query",
                           InternalQuery whose = InternalQuery::other);
  void send_internal_query(const std::string& sql, InternalQuery whose) {
    send_internal_query(sql, "internal query", whose);
  }
  void release_to_pool();
  // At a transaction boundary with settings noted under `keep`: the query that reads them back
  // is sent, and the server stays linked until its answer (false: nothing to read).
  bool read_back_kept_settings();
  // Still linked after a read-back the client's input waited for: the parameter sync the
  // answer calls for, then the client's input (server_session_state.cc).
  void resume_client_after_read_back();
  // The client's parameters, applied when they differ from the server's (link, read-backs);
  // true when the sync was sent: the client's input then waits for its answer.
  bool sync_parameters(const Client& client);
  // The sync's ReadyForQuery: the client's input goes on, or, when the sync failed, the server
  // is closed and the client's held request is answered with the error (fail closed). False
  // when the server was closed.
  bool finish_parameter_sync();
  // An ErrorResponse to the sync: what the client's held request is answered with.
  void note_sync_failure(const protocol::ErrorFields* error);
  [[nodiscard]] std::string_view server_version() const;  // as reported, or empty
  void finish_kept_settings();
  // The client reset reported parameters it gave at startup: where the reset left the server's
  // default, the startup value goes back on, as a sync (true when one was sent).
  bool restore_startup_reported();
  // At the ReadyForQuery 'I' that ends a transaction that touched LISTEN (server_session_state.cc):
  // the read-back is sent and the ReadyForQuery held; with the answer both go to the client, which
  // lets its ReadyForQuery through once the relay listens on what it added.
  void read_back_listen(std::string_view ready_wire);
  void finish_listen_read_back();
  // Flushes the linked client's output, after what the relay held for it when it is pinned (it
  // stays linked between transactions) and the server is quiet (server_session_state.cc).
  void flush_client_output();
  // The listener connection's input: every message goes to the relay.
  void process_listener_input();
  // A replication server's StartupMessage additions, its login's end, its failure, and its
  // bytes relayed to the client as they come (server_login.cc).
  void add_replication_parameters(std::vector<std::pair<std::string_view, std::string_view>>& ps);
  void finish_replication_login();
  void replication_login_failed(std::string_view code, std::string_view message);
  void process_replication_input();
  // At a transaction boundary: the pooler's own queries that must run before the server may
  // be released (kept settings, the pin check); true when one was sent. A session that kept
  // nothing and holds no pin costs the inline flag tests of boundary_checks_due().
  bool run_boundary_checks() { return boundary_checks_due() && run_due_boundary_checks(); }
  [[nodiscard]] bool boundary_checks_due() const {
    return session_.kept.any() || session_.kept.resets_reported() || session_.pin.pinned;
  }
  bool run_due_boundary_checks();
  // Pinned: whether the session still holds what pinned it (advisory locks, LISTEN, SQL
  // prepared statements, holdable cursors, temp relations), checked after what may have
  // released it and at most once a second otherwise (server_session_state.cc).
  bool check_pin();
  void on_pin_check_row(std::string_view data_row_body);
  void finish_pin_check();
  void unpin();
  void note_orphan_notification(const protocol::Message& message);
  // A refusal of the session-state checks comes back from the DO statement that raised it
  // (rejection_statement): its CONTEXT names that statement, which is the pooler's, not the
  // client's; the error goes to the client without it. False for any other error.
  bool strip_refusal_context(const protocol::Message& error);
  // --- a lost connection (server.cc, client_lost_server.h) ---
  // An error on its way to the client: a FATAL (PostgreSQL ends the connection: terminated,
  // shutting down) is kept instead when the client can carry on (true), and told to it in
  // PostgreSQL's words, as an ERROR, when the connection goes (lose).
  bool swallow_server_fatal(const protocol::Message& error);
  // The connection failed or was closed by PostgreSQL (libuv's `status`): the linked client
  // keeps its connection when it can carry on, else it is failed with the server (close).
  void lose(int status);
  [[nodiscard]] bool client_may_carry_on() const;
  // The pending replies of the requests in flight (statement rewriting), as after an error:
  // the client's statements they would have prepared are not there.
  void drop_pending_replies();
  // An error of a Query whose SQL prepared statements were renamed: the client's names and
  // positions in its text (SqlQueryPlan::client_error) go in `held_messages_.replacement`. False:
  // as is.
  bool rename_sql_error(const protocol::Message& error);
  // Rolls back, resets (session end in session mode) and cleans what the client left, then
  // goes idle; closes instead when the state cannot be undone.
  void clean_and_release(bool session_ended);
  // The cleaning about to run resets these settings: what the pooler applied of them is gone.
  void forget_reset_settings();
  // session_state_verify's answer came (the last internal reply while resetting): true when
  // the server goes on resetting (a DISCARD ALL for what was hidden), false to go idle.
  bool finish_verify();
  void on_internal_row(std::string_view data_row_body);
  [[nodiscard]] InternalQuery internal_front() const {
    return static_cast<InternalQuery>(replies_.internal_front());
  }
  // `severity`: PostgreSQL's (FATAL), when the login ended in its ErrorResponse.
  void login_failed(std::string_view code, std::string_view message,
                    std::string_view severity = {});
  // The connection could not be made: `words` are PgBouncer's (login_close_reason).
  void connect_failed(const char* words, std::string_view message);
  // TLS towards the server (tls_server.cc): the SSLRequest sent before the StartupMessage under
  // server_tls_sslmode != disable, its one-byte answer, and SCRAM channel binding.
  bool request_tls();
  void handle_ssl_answer();
  void send_startup_message();
  std::string_view choose_scram_mechanism(bool offers_plus);
  // A ParameterStatus of `name` is tracked (and passed to the client): false past the cap.
  bool may_track_parameter(std::string_view name);
  // A login refused for what the server sent (counted in /metrics as server_login).
  void refuse_server_login(std::string_view code, std::string_view message);
  static void on_timer_closed(uv_handle_t* handle);
  void maybe_destroy();
  // Both handles are closed on the old worker: the server is posted to the new one.
  void finish_move_out();

  Pool* pool_;  // the pool and worker change when the server moves to another worker
  Worker* worker_;
  // What every transaction reads, kept together at the front so that a transaction touches a
  // few cache lines of the server, not one per member (docs/profile.md 0i: at 20 clients the
  // cache misses, not the instructions, were the user time PgBouncer did not spend).
  State state_ = State::connecting;
  protocol::ReplicationMode replication_ = protocol::ReplicationMode::none;
  bool internal_failed_ = false;  // a query of the pooler's own failed
  // The link's parameter sync (build_parameter_sync_query) awaits its ReadyForQuery.
  bool parameter_sync_owed_ = false;
  Client* client_ = nullptr;
  // Forwarding a message that is larger than what has arrived: bytes still to pass through.
  size_t passthrough_remaining_ = 0;
  ListenRelay* relay_ = nullptr;  // set on the relay's listener connection only
  // run_query's sink until the ReadyForQuery (server_release.cc).
  ServerQuerySink* query_sink_ = nullptr;
  // State::draining for the client's own requests: when the client left (server_release.cc);
  // 0 while only the pooler's own query is awaited, which has no time limit of its own here.
  uint64_t draining_since_ms_ = 0;
  uint64_t linked_at_ms_ = 0;
  uint64_t ready_ms_ = 0;
  // What is owed and open; see the comment at the top (reply_queue.h).
  ReplyQueue replies_;
  // The statement rewriter's (server_statements_state.h); its cache is null when off.
  ServerStatements rewrite_;
  ParameterSet tracked_;  // as reported by ParameterStatus
  ParameterSet extras_;   // startup extras the pooler applied on this server
  Channel channel_;

  uint64_t id_;
  size_t host_index_;
  ServerAddress address_;
  ServerAddress cancel_address_;  // address_ with the IP the login connected to (start_connect)
  // What the pooler holds for the client in place of, or after, the server's own messages.
  struct HeldMessages {
    // Reply::replace: what the client gets instead of the server's message.
    std::string replacement;
    // The link's sync failed: the ErrorResponse its client's held request gets instead of
    // running (finish_parameter_sync); empty otherwise.
    std::string sync_failure;
    // swallow_server_fatal: PostgreSQL's FATAL, kept for a client that carries on (lose()).
    std::string loss_code;
    std::string loss_message;
  } held_messages_;
  // A RowDescription or NoData that answers a Describe 'S' of a rewritten statement: the shape
  // is noted for this server's copy, and for the client that asked (ClientStatement).
  void note_statement_shape(const PendingReply& describe, const protocol::Message& message);
  // The shape check's answer came, or an error skipped it (its Parse failed; the error has
  // reached the client): the client's input goes on, skipped by the server up to its Sync.
  void finish_shape_check_if_answered();
  ServerHandles handles_;  // libuv's, besides the channel's (server_handles.h)
  ServerMoveOut move_;     // while moving to another worker
  ServerLoginState login_;
  // The cancel requests sent for this server and not finished; shared with their senders'
  // completion hooks, which may run after the server is gone (then `server` is null).
  struct CancelsInFlight {
    int in_flight = 0;
    Server* server = nullptr;
  };
  std::shared_ptr<CancelsInFlight> cancels_;
  // Becomes idle (go_idle) once a held release's last cancel request has finished.
  void on_cancels_finished();
  // Linked to a client, or draining after it left: replies are read as the client's (and
  // dropped when it is gone), through inspect_reply and the rewriter's bookkeeping.
  [[nodiscard]] bool forwards_replies() const {
    return state_ == State::active || state_ == State::draining;
  }
  // Idle, or released and held for its cancels: no client's reply is owed, so whatever the
  // server sends unasked is its own doing (a termination, a notification).
  [[nodiscard]] bool serves_nobody() const {
    return state_ == State::idle || state_ == State::being_canceled;
  }
  // set_state(idle) and the pool's on_server_idle, unless cancels are in flight: then held.
  void go_idle();

  // The session-state guard's view of this session (server_session.h).
  ServerSessionState session_;
  RoleCheck role_check_;  // check_role()'s sink
  bool deliver_query_reply(const protocol::Message& message);
  void finish_query();
  void abandon_query(std::string_view reason);
  void settle_calls(const protocol::Message* first_reply);
  [[nodiscard]] bool may_drain_for_gone_client() const;
  bool finish_drain_if_done();
  // After the sync: a value the server keeps in another spelling (DateStyle 'ISO' is
  // 'ISO, MDY') becomes the client's, so that the next link does not set it again.
  void adopt_canonical_values();
};

}  // namespace pgsluice
