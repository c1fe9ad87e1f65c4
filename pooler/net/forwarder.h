// Forwarding from one connection's input to the other's output, the same both ways (client to
// server, server to client): complete messages that lie back to back in the input are copied
// in one append, and a message larger than kPassthroughThreshold that has not fully arrived
// is streamed in pieces instead of being buffered whole (a big CopyData, Bind or DataRow).
// Header-inline: it runs for every forwarded message.
#pragma once

#include <algorithm>
#include <cstddef>
#include <string>
#include <string_view>

#include "pgsluice/protocol/frame.h"

namespace pgsluice {

// A message larger than this that has not fully arrived is streamed rather than waited for.
inline constexpr size_t kPassthroughThreshold = 64 * 1024;

// The output is passed at each call, not kept: a server's client can change in the middle of a
// read (released at a ReadyForQuery, linked to the next waiting client).
class Forwarder {
 public:
  // A complete message, whose bytes stay in the input until flush().
  void add(std::string_view wire, std::string* out) {
    if (begin_ != nullptr && begin_ + size_ == wire.data()) {
      size_ += wire.size();
      return;
    }
    flush(out);
    begin_ = wire.data();
    size_ = wire.size();
  }
  // Appends the collected messages to `out` (null: dropped, a server whose client has gone);
  // before anything is written to `out` another way.
  void flush(std::string* out) {
    if (size_ > 0 && out != nullptr) out->append(begin_, size_);
    begin_ = nullptr;
    size_ = 0;
  }
  // Passes on what has arrived of a streamed message (`remaining` bytes still to go); false
  // when nothing more has arrived.
  bool stream(protocol::FrameReader& in, size_t& remaining, std::string* out) {
    size_t n = std::min(remaining, in.unread_size());
    if (n == 0) return false;
    flush(out);
    if (out != nullptr) out->append(in.unread().substr(0, n));
    in.skip(n);
    remaining -= n;
    return true;
  }

 private:
  const char* begin_ = nullptr;
  size_t size_ = 0;
};

}  // namespace pgsluice
