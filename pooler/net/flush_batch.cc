// Sending one loop turn's writes together; see flush_batch.h.
#include "pooler/net/flush_batch.h"

#include <algorithm>

#include "pooler/net/channel.h"

namespace pgsluice {

void FlushBatch::forget(const Channel* channel) {
  std::replace(channels_.begin(), channels_.end(), const_cast<Channel*>(channel),
               static_cast<Channel*>(nullptr));
  std::replace(running_.begin(), running_.end(), const_cast<Channel*>(channel),
               static_cast<Channel*>(nullptr));
}

void FlushBatch::run() {
  // A flush's callbacks may end in run() again (a world stop): the outer call sends the rest.
  if (running_now_) return;
  running_now_ = true;
  while (!channels_.empty()) {
    running_.swap(channels_);
    // running_ may lose entries (forget) while a flush's error callback runs; index, not iterate.
    for (size_t i = 0; i < running_.size(); ++i) {
      if (Channel* channel = running_[i]) channel->flush_batched();
    }
    running_.clear();
  }
  running_now_ = false;
}

}  // namespace pgsluice
