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

#include "pgsluice/protocol/frame.h"
#include "pgsluice/protocol/scram.h"
#include "pgsluice/protocol/session_state.h"
#include "pooler/channel.h"
#include "pooler/dirty_state.h"
#include "pooler/intrusive_list.h"
#include "pooler/pending_replies.h"
#include "pooler/prepared_statements.h"
#include "pooler/session_params.h"
#include "pooler/stats.h"

namespace pgsluice {

class Client;
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
  enum class State { connecting, login, idle, active, resetting, closing };

  Server(Pool& pool, uint64_t id);
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;
  ~Server() override;

  void connect();

  // Links an idle server to a client: the client's parameters are applied first when they
  // differ from the server's.
  void link(Client& client);
  // The client is going away: the server is cleaned (rolled back, reset) and returned to the
  // pool, or closed when it is in the middle of something it cannot safely finish.
  void detach_client();

  // Session-state checks: what the linked client left on this server under `reset`/`pin`,
  // cleaned when the server is released; a pinned server stays with its client.
  void mark_dirty(const protocol::SessionStateFinding& finding);
  void mark_dirty_unknown();
  void pin() { pinned_ = true; }
  [[nodiscard]] bool pinned() const { return pinned_; }
  [[nodiscard]] bool dirty() const { return dirty_.any(); }

  // Called by the linked client for every message it forwards here. With prepared statement
  // rewriting on, it also queues the reply the message expects (unless `queue_reply` is false:
  // the client queued a special one itself).
  void note_client_message(char type, bool queue_reply = true);

  // --- protocol-level prepared statements (transaction mode, max_prepared_statements > 0) ---
  [[nodiscard]] bool rewrites_statements() const { return statements_ != nullptr; }
  void expect(PendingReply reply);
  [[nodiscard]] bool has_statement(uint64_t id) const { return statements_->contains(id); }
  void touch_statement(uint64_t id) { statements_->touch(id); }
  // Writes the Parse of `stmt` under its server name (after Close messages for statements the
  // cache evicts) and queues its reply: the client's own (`hidden` false) or swallowed.
  void prepare_statement(const PreparedStatement& stmt, bool hidden, std::string client_name,
                         std::string& out);
  // DEALLOCATE ALL or DISCARD ALL ran on this server: it has no statement left.
  void forget_statements();
  // After the client handled messages itself (a DEALLOCATE answered by the pooler): when the
  // server owes nothing, the link ends as at a ReadyForQuery.
  void release_if_nothing_owed();

  // Sends the cancel request for whatever this server runs now.
  void cancel_running_query();

  // Closes the connection; `reason` is logged.
  void close(std::string_view reason);

  [[nodiscard]] State state() const { return state_; }
  [[nodiscard]] uint64_t id() const { return id_; }
  [[nodiscard]] Client* client() const { return client_; }
  [[nodiscard]] Pool& pool() const { return pool_; }
  Channel& channel() { return channel_; }
  [[nodiscard]] const ParameterSet& parameters() const { return tracked_; }
  [[nodiscard]] char transaction_status() const { return tx_status_; }
  // Nothing owed to the client and no transaction open: the link may end here.
  [[nodiscard]] bool at_transaction_boundary() const;
  [[nodiscard]] std::string log_id() const;

  // ChannelOwner
  void on_channel_readable(Channel& channel) override;
  void on_channel_error(Channel& channel, int status) override;
  void on_channel_drained(Channel& channel) override;
  void on_channel_closed(Channel& channel) override;
  void on_channel_tls_ready(Channel& channel) override;

  ListNode pool_node;   // on the pool's list of its state
  ServerTiming timing;  // stats and admin state (stats.h): query/xact timing, close_needed

  // For SHOW SERVERS.
  [[nodiscard]] int32_t backend_pid() const { return backend_pid_; }
  [[nodiscard]] uint64_t linked_at_ms() const { return linked_at_ms_; }

 private:
  void set_state(State state);
  void start_connect(const sockaddr* addr);
  static void on_resolved(uv_getaddrinfo_t* req, int status, addrinfo* res);
  static void on_connected(uv_connect_t* req, int status);
  static void on_connect_timeout(uv_timer_t* timer);

  enum class Reply { forward, swallow, forward_and_release };
  enum class Match { forward, swallow, out_of_step };

  void process_login_input();
  bool handle_login_message(const protocol::Message& message);
  bool handle_authentication(const protocol::Message& message);
  // Replies after login: forwarded to the linked client, or handled by the pooler.
  void process_session_input();
  // One reply the client gets (or, for ParameterStatus, may get).
  Reply inspect_reply(const protocol::Message& message);
  // One reply to the pooler's own query, or an unsolicited message on an idle server; false
  // when the server was closed or changed hands.
  bool handle_internal_reply(const protocol::Message& message);
  // Walks the pending replies for one server reply.
  Match match_pending(const protocol::Message& message);
  // After an error in an extended-protocol batch, PostgreSQL skips to the Sync: so do the
  // pending replies (a Parse skipped there never created its statement).
  void skip_pending_to_sync();
  // Sends the made-up replies at the front of the queue to the client.
  void send_made_up_replies();
  void send_internal_query(const std::string& sql);
  void release_to_pool();
  void note_orphan_notification(const protocol::Message& message);
  // Rolls back, resets (session end in session mode) and cleans what the client left, then
  // goes idle; closes instead when the state cannot be undone.
  void clean_and_release(bool session_ended);
  void login_failed(std::string_view sqlstate, std::string_view message);
  // TLS towards the server (tls_server.cc): the SSLRequest sent before the StartupMessage under
  // server_tls_sslmode != disable, its one-byte answer, and SCRAM channel binding.
  bool request_tls();
  void handle_ssl_answer();
  void send_startup_message();
  std::string_view choose_scram_mechanism(bool offers_plus);
  static void on_timer_closed(uv_handle_t* handle);
  void maybe_destroy();

  Pool& pool_;
  Worker& worker_;
  uint64_t id_;
  State state_ = State::connecting;
  Channel channel_;
  uv_connect_t connect_req_{};
  uv_getaddrinfo_t resolve_req_{};
  uv_timer_t connect_timer_{};
  // libuv handles and requests that still point here; the object is deleted when all are done.
  bool timer_open_ = false;
  bool channel_open_ = false;
  bool resolving_ = false;
  bool connecting_ = false;
  Client* client_ = nullptr;

  // Login.
  std::optional<protocol::ScramClient> scram_;
  int32_t backend_pid_ = 0;
  bool connect_query_sent_ = false;
  bool awaiting_ssl_answer_ = false;  // SSLRequest sent; the next byte is 'S' or 'N'
  std::string backend_key_;

  // What is owed and open; see the comment at the top.
  uint32_t client_ready_owed_ = 0;
  uint32_t internal_ready_owed_ = 0;
  bool extended_open_ = false;
  bool copy_in_ = false;
  bool copy_out_ = false;
  bool internal_failed_ = false;
  char tx_status_ = 'I';
  // Forwarding a message that is larger than what has arrived: bytes still to pass through.
  size_t passthrough_remaining_ = 0;

  std::unique_ptr<ServerStatementCache> statements_;  // null: no rewriting
  PendingReplies pending_;
  bool skipping_to_sync_ = false;  // an extended-protocol error: the server skips to the Sync
  DirtyState dirty_;
  bool pinned_ = false;
  ParameterSet tracked_;  // as reported by ParameterStatus
  ParameterSet extras_;   // startup extras the pooler applied on this server
  uint64_t linked_at_ms_ = 0;
};

}  // namespace pgsluice
