// The bookkeeping of one pool's LISTEN relay (listen_relay.h), without sockets or threads: who
// listens on which channel, what the listener connection has been asked to LISTEN, what it has
// confirmed, and which clients wait for a confirmation before their ReadyForQuery.
//
// Causality: a client's LISTEN must catch every NOTIFY committed after the client got the
// ReadyForQuery that ended its transaction. So a client's ReadyForQuery waits until the
// listener's own LISTEN of each channel it added has completed (`update` answers whether it may
// go now; `on_listener_query_done` names those that may go later). A channel being unlistened
// (its UNLISTEN in flight) does not count as listened: the client waits for the LISTEN sent
// after it.
#pragma once

#include <compare>
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "pooler/session_state/listen_channels.h"

namespace pgsluice {

// A client by its worker and its id: never a pointer, since the registry is read from every
// worker's thread and a client may close at any time on its own.
struct RelaySubscriber {
  int worker = 0;
  uint64_t client = 0;
  auto operator<=>(const RelaySubscriber&) const = default;
};

class RelayRegistry {
 public:
  // A client's channels changed (its read-back: listen_channels.h). True when every added
  // channel is already confirmed on the listener: the client's ReadyForQuery may go now.
  // Otherwise it is owed a confirmation (on_listener_query_done or take_pending).
  bool update(RelaySubscriber who, const ChannelSet& added, const ChannelSet& removed);
  // The client closed: it listens on nothing and is owed nothing.
  void remove(RelaySubscriber who);

  // The listener's next query: LISTEN the channels someone listens on that it does not, and
  // UNLISTEN those nobody listens on any more (so that a pool whose clients use many short-lived
  // channels does not make the listener receive every one of them forever). Empty when it is in
  // step or a query is still in flight. What it names counts as sent.
  std::string next_listener_query();
  [[nodiscard]] bool query_in_flight() const { return in_flight_; }
  // The query in flight completed (its ReadyForQuery): its channels are confirmed. Returns the
  // clients whose confirmation is now due (each once).
  std::vector<RelaySubscriber> on_listener_query_done();
  // The listener connection is gone: it listens on nothing.
  void on_listener_lost();
  // Every client owed a confirmation, which it gets now (the listener cannot log in).
  std::vector<RelaySubscriber> take_pending();

  // Who listens on `channel` (empty when nobody does).
  [[nodiscard]] std::vector<RelaySubscriber> subscribers(std::string_view channel) const;
  // Every listening client, once each.
  [[nodiscard]] std::vector<RelaySubscriber> all_subscribers() const;
  // Nobody listens on anything.
  [[nodiscard]] bool empty() const { return by_channel_.empty(); }
  // The listener is asked for what someone listens on (SHOW and tests).
  [[nodiscard]] const ChannelSet& listening() const { return listening_; }

 private:
  [[nodiscard]] bool ready(const std::string& channel) const;

  std::map<std::string, std::set<RelaySubscriber>, std::less<>> by_channel_;
  ChannelSet listening_;  // as of the queries sent
  ChannelSet confirmed_;  // as of the queries completed
  bool in_flight_ = false;
  ChannelSet in_flight_listen_;
  ChannelSet in_flight_unlisten_;
  struct Pending {
    RelaySubscriber who;
    ChannelSet needs;
  };
  std::vector<Pending> pending_;
};

}  // namespace pgsluice
