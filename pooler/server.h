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
#include <optional>
#include <string>

#include "pgsluice/protocol/frame.h"
#include "pgsluice/protocol/scram.h"
#include "pgsluice/protocol/session_state.h"
#include "pooler/channel.h"
#include "pooler/dirty_state.h"
#include "pooler/intrusive_list.h"
#include "pooler/session_params.h"

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

  // Called by the linked client for every message it forwards here.
  void note_client_message(char type);

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

  ListNode pool_node;  // on the pool's list of its state

 private:
  void set_state(State state);
  void start_connect(const sockaddr* addr);
  static void on_resolved(uv_getaddrinfo_t* req, int status, addrinfo* res);
  static void on_connected(uv_connect_t* req, int status);
  static void on_connect_timeout(uv_timer_t* timer);

  enum class Reply { forward, swallow, forward_and_release };

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
  void send_internal_query(const std::string& sql);
  void release_to_pool();
  void note_orphan_notification(const protocol::Message& message);
  // Rolls back, resets (session end in session mode) and cleans what the client left, then
  // goes idle; closes instead when the state cannot be undone.
  void clean_and_release(bool session_ended);
  void login_failed(std::string_view sqlstate, std::string_view message);
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

  DirtyState dirty_;
  bool pinned_ = false;
  ParameterSet tracked_;  // as reported by ParameterStatus
  ParameterSet extras_;   // startup extras the pooler applied on this server
  uint64_t linked_at_ms_ = 0;
};

}  // namespace pgsluice
