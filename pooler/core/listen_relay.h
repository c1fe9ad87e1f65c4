// The `relay` action for LISTEN (issue 18): one listener connection per pool (database, server
// user) runs every LISTEN any client of the pool asked for, and each NotificationResponse it
// receives goes to every client of the pool that listens on that channel, on whichever worker
// the client lives.
//
// The client's own LISTEN/UNLISTEN run on the server it is linked to, so that PostgreSQL answers
// them and decides what sticks (listen_channels.h); at the end of the transaction the server's
// channels are read back, the server unlistens everything, and the client's new set is given to
// the relay here (`update`). The client's ReadyForQuery waits until the listener has LISTENed on
// every channel the client added (relay_registry.h), so a NOTIFY committed after the client saw
// it always reaches the client.
//
// Threads: a relay is process-wide. Its registry is behind a mutex (taken at a read-back, at a
// client's close and once per notification on the listener's thread); the listener connection
// belongs to one worker (the one of the first client that listened) and is touched only there;
// clients are reached by posting to their worker (Worker::post) with their id, never a pointer,
// and the worker looks the id up among its clients (Worker::find_relay_client).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "pgsluice/protocol/frame.h"
#include "pooler/core/relay_registry.h"
#include "pooler/core/shared_limits.h"

namespace pgsluice {

class Client;
class Server;
class Worker;
class WorkerGroup;

class ListenRelay {
 public:
  ListenRelay(WorkerGroup& group, LimitSlots slots) : group_(group), slots_(slots) {}
  ListenRelay(const ListenRelay&) = delete;
  ListenRelay& operator=(const ListenRelay&) = delete;

  // --- on the client's worker ---
  // `client`'s channels changed. True when its ReadyForQuery may go now; otherwise
  // Client::on_relay_confirmed is called on its worker once the listener listens.
  bool update(const Client& client, const ChannelSet& added, const ChannelSet& removed);
  // The client closed.
  void remove(const Client& client);

  // --- on the listener's worker, from the listener connection (a Server) ---
  void on_listener_ready(Server& listener);
  // A message after the login: NotificationResponse, the ReadyForQuery of the relay's query, …
  void on_listener_message(Server& listener, const protocol::Message& message);
  // The connection closed (pg_terminate_backend, a failed login, shutdown).
  void on_listener_closed(Server& listener);
  // The janitor of every worker: the listener's reconnects, with back-off.
  void tick(Worker& worker);

  // The time the listener waits before its next attempt after `failures` lost connections in a
  // row: at once, then doubling from 200 ms up to 5 s.
  static uint64_t backoff_ms(int failures);

 private:
  // Runs on the listener's worker (posted): start the listener, or send its next query.
  void kick();
  void launch(Worker& worker);
  // False when the listener is in step (or busy): nothing sent.
  bool send_next_query();
  // Posts to each subscriber's worker: the message, or (`confirm`) its held ReadyForQuery.
  void post_to_clients(const std::vector<RelaySubscriber>& who, std::string channel,
                       std::string wire, bool confirm);

  WorkerGroup& group_;
  LimitSlots slots_;

  std::mutex mutex_;
  RelayRegistry registry_;    // under mutex_
  int listener_worker_ = -1;  // under mutex_: set at the first update, then fixed

  // The listener's worker only.
  Server* listener_ = nullptr;
  bool listener_ready_ = false;  // logged in and listening
  bool tell_missed_ = false;     // a lost connection: the clients get a NOTICE once it is back
  int failures_ = 0;             // lost connections since the last good login
  uint64_t retry_at_ms_ = 0;
};

// Every pool's relay, for the process; made at a pool's first LISTEN and kept.
class ListenRelays {
 public:
  ListenRelay& for_pool(WorkerGroup& group, const LimitSlots& slots);
  void tick(Worker& worker);

 private:
  std::mutex mutex_;
  std::map<const LimitCounter*, std::unique_ptr<ListenRelay>> relays_;
};

}  // namespace pgsluice
