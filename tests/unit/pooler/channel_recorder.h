// A ChannelOwner for the Channel tests: records what the channel reports; reads consume
// everything that arrived.
#pragma once

#include <string>

#include "pooler/net/channel.h"

namespace pgsluice::test_support {

class ChannelRecorder final : public ChannelOwner {
 public:
  void on_channel_readable(Channel& channel) override {
    received += channel.input().unread();
    channel.input().skip(channel.input().unread_size());
  }
  void on_channel_error(Channel&, int status) override {
    error = status;
    received_at_error = received;
  }
  void on_channel_drained(Channel&) override { ++drained; }
  void on_channel_closed(Channel&) override { ++closed; }

  std::string received;
  std::string received_at_error;  // what had arrived when the error came
  int error = 0;
  int drained = 0;
  int closed = 0;
};

}  // namespace pgsluice::test_support
