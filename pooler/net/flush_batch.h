// The writes of one loop turn, sent together at its end.
//
// A channel's flush() of small output (under 16 kB) does not send at once when its loop has a
// FlushBatch: it joins the batch, and the worker sends every joined channel's output after the
// turn's I/O callbacks (a uv_check) and before it waits for events again (its uv_prepare). The
// turn's reads all happen before its writes: a peer woken by one reply no longer preempts the
// pooler before the turn's next read (issue 17: "writes gathered to the end of a loop turn";
// docs/profile.md 0j).
#pragma once

#include <cstddef>
#include <memory>
#include <vector>

#include "pooler/net/send_ring.h"

namespace pgsluice {

class Channel;

class FlushBatch {
 public:
  void add(Channel* channel) { channels_.push_back(channel); }
  // A channel that goes away, or moves to another loop, before the batch ran.
  void forget(const Channel* channel);
  // Sends every joined channel's output; channels that join while it runs are sent too.
  void run();
  [[nodiscard]] bool empty() const { return channels_.empty(); }
  // Sends through `ring` from now on (null: one send() per channel).
  void use_ring(std::unique_ptr<SendRing> ring) { ring_ = std::move(ring); }
  [[nodiscard]] bool has_ring() const { return ring_ != nullptr; }

 private:
  // Sends what running_'s channels hold (TLS: their ciphertext) in ring submissions; those it
  // sent leave running_ (null), the rest (a TLS handshake or failure, sends in pieces, a failed
  // ring) stay for flush_batched.
  void send_through_ring();

  std::unique_ptr<SendRing> ring_;
  std::vector<size_t> ring_sent_;  // send_through_ring: indexes into running_ of one submission
  std::vector<Channel*> channels_;
  std::vector<Channel*> running_;
  bool running_now_ = false;
};

}  // namespace pgsluice
