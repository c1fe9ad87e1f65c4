// A client's part of the LISTEN relay (client_relay.cc, listen_relay.h): whether its LISTENs
// are relayed, the channels it listens on, the notifications held while it is in a
// transaction, and its ReadyForQuery while the relay confirms a new channel.
#pragma once

#include <string>

#include "pooler/session_state/listen_channels.h"
#include "pooler/session_state/relay_queue.h"

namespace pgsluice {

class ListenRelay;

struct ClientListenState {
  bool relays = false;           // transaction mode, the listen kind's action is `relay`
  bool awaiting = false;         // held_ready waits for Client::on_relay_confirmed
  ListenRelay* relay = nullptr;  // set at the first channel; registered with the worker then
  ChannelSet channels;
  RelayQueue relayed;  // held while the client is in a transaction
  std::string held_ready;
};

// A request of the client's that waits instead of running: while the server reads settings
// back after a transaction (process_regular_input), or, when the link's sync failed, the
// request answered with the sync's error (fail closed: Client::refuse_held_request).
struct ClientHeldRequest {
  bool for_read_back = false;
  bool answering = false;  // `error` is to be sent
  bool error_sent = false;
  std::string error;
};

}  // namespace pgsluice
