#include "pooler/session_state/relay_queue.h"

namespace pgsluice {

RelayQueue::Offer RelayQueue::offer(std::string_view wire, bool deliverable, size_t unsent,
                                    size_t limit) {
  if (bytes_ + unsent + wire.size() > limit) return Offer::overflow;
  // Behind one that waits, a notification waits too: the order is PostgreSQL's.
  if (held_.empty() && deliverable) return Offer::send_now;
  held_.emplace_back(wire);
  bytes_ += wire.size();
  return Offer::queued;
}

void RelayQueue::drain_into(std::string& out) {
  for (const std::string& wire : held_) out.append(wire);
  clear();
}

void RelayQueue::clear() {
  held_.clear();
  bytes_ = 0;
}

}  // namespace pgsluice
