// Notifications relayed to one client (relay, issue 18): the ones it may not be sent yet wait
// here, in order, and the bytes waiting for it are bounded. A client may be sent one when it is
// idle or between messages of a quiet server (Client::may_deliver_relayed); in a transaction the
// notifications wait until it ends, as PostgreSQL delivers them. The bound counts what waits here
// and what its socket has not taken yet, so a client that does not read cannot make the pooler
// hold more than session_state_relay_queue bytes for it either way.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace pgsluice {

class RelayQueue {
 public:
  enum class Offer {
    send_now,  // nothing waits before it and the client may be sent it: write it out now
    queued,    // kept here until drain_into
    overflow,  // over the bound: the client is to be closed (nothing was kept)
  };

  // What to do with one NotificationResponse (`wire`, the whole message): `deliverable` when the
  // client may be sent notifications now, `unsent` the bytes already queued on its socket,
  // `limit` the bound (session_state_relay_queue).
  Offer offer(std::string_view wire, bool deliverable, size_t unsent, size_t limit);
  // Appends every waiting notification to `out`, oldest first, and empties the queue.
  void drain_into(std::string& out);
  void clear();
  // Drops, in place, each waiting notification `unwanted(wire)` is true of (one for a channel the
  // client has left since: PostgreSQL sends nothing after UNLISTEN).
  template <typename Unwanted>
  void drop_if(Unwanted unwanted) {
    std::erase_if(held_, [&](const std::string& wire) {
      if (!unwanted(std::string_view(wire))) return false;
      bytes_ -= wire.size();
      return true;
    });
  }
  [[nodiscard]] bool empty() const { return held_.empty(); }
  [[nodiscard]] size_t bytes() const { return bytes_; }

 private:
  // A vector, not a deque: libstdc++'s deque allocates 576 bytes when constructed, which every
  // idle client carried (issue 17).
  std::vector<std::string> held_;
  size_t bytes_ = 0;
};

}  // namespace pgsluice
