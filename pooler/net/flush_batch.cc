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
    if (ring_ != nullptr) send_through_ring();
    // running_ may lose entries (forget) while a flush's error callback runs; index, not iterate.
    for (size_t i = 0; i < running_.size(); ++i) {
      if (Channel* channel = running_[i]) channel->flush_batched();
    }
    running_.clear();
  }
  running_now_ = false;
}

void FlushBatch::send_through_ring() {
  const size_t capacity = ring_->capacity();
  for (size_t start = 0; start < running_.size(); start += capacity) {
    const size_t end = std::min(running_.size(), start + capacity);
    for (size_t i = start; i < end; ++i) {
      int fd;
      const char* data;
      size_t size;
      if (running_[i] != nullptr && running_[i]->take_ring_send(&fd, &data, &size)) {
        ring_->add(fd, data, size, i);
      }
    }
    // Every result is booked before any owner hears of one: an owner's call may touch another
    // channel of the submission (close it, add output), which must see its send already booked.
    ring_sent_.clear();
    const bool ok = ring_->run([this](size_t i, ssize_t result) {
      running_[i]->ring_sent(result);
      ring_sent_.push_back(i);
    });
    for (size_t i : ring_sent_) {
      // forget() nulls a channel deleted by an earlier owner's call.
      if (Channel* channel = running_[i]) {
        running_[i] = nullptr;
        channel->finish_ring_send();
      }
    }
    if (!ok) {
      ring_.reset();  // what it did not send, flush_batched sends
      return;
    }
  }
}

}  // namespace pgsluice
