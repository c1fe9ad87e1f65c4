// Framing: cutting a byte stream into startup packets and typed messages, and the FrameReader
// buffer that holds bytes between socket reads.
#include "pgsluice/protocol/frame.h"

#include <algorithm>
#include <cstring>
#include <new>

#include "pgsluice/protocol/bytes.h"

namespace pgsluice::protocol {

namespace {

// The smallest startup packet is a length word and a 4-byte code (SSLRequest, GSSENCRequest);
// anything shorter cannot even say what it is.
constexpr uint32_t kMinStartupPacketLength = 8;
constexpr size_t kMinGrowth = 4096;

class HeapStore final : public BufferStore {
 public:
  char* allocate(size_t& size) override { return static_cast<char*>(::operator new(size)); }
  void release(char* data, size_t /*size*/) noexcept override { ::operator delete(data); }
};

}  // namespace

BufferStore& BufferStore::heap() {
  // Never destroyed: a reader in an object destroyed at exit may still give its buffer back.
  static auto* store = new HeapStore;
  return *store;
}

HeaderResult peek_header(std::string_view buf, FramePhase phase, uint32_t max_length) {
  HeaderResult result;
  switch (phase) {
    case FramePhase::startup: {
      if (buf.size() < 4) return result;  // need_more
      const uint32_t length = load_u32(buf.data());
      result.header.type = 0;
      result.header.length = length;
      const uint32_t limit = std::min(max_length, kMaxStartupPacketLength);
      if (length < kMinStartupPacketLength) {
        result.status = FrameStatus::error;
        result.error = ParseError::bad_length;
      } else if (length > limit) {
        result.status = FrameStatus::error;
        result.error = ParseError::too_long;
      } else {
        result.status = FrameStatus::complete;
      }
      return result;
    }
    case FramePhase::regular: {
      if (buf.size() < 5) return result;  // need_more
      const char type = buf[0];
      const uint32_t length = load_u32(buf.data() + 1);
      result.header.type = type;
      result.header.length = length;
      if (type == 0) {
        // No message has type byte 0, and MessageHeader uses 0 to mean "startup packet": letting
        // it through would make header_size() and wire_size() describe a different framing.
        result.status = FrameStatus::error;
        result.error = ParseError::unknown_type;
      } else if (length < 4) {
        result.status = FrameStatus::error;
        result.error = ParseError::bad_length;
      } else if (length > max_length) {
        // Also catches lengths with the top bit set (>= 2^31) under the default limit, which
        // would be negative as the protocol's signed Int32.
        result.status = FrameStatus::error;
        result.error = ParseError::too_long;
      } else {
        result.status = FrameStatus::complete;
      }
      return result;
    }
  }
  return result;
}

FrameResult next_message(std::string_view buf, FramePhase phase, uint32_t max_length) {
  FrameResult result;
  const HeaderResult head = peek_header(buf, phase, max_length);
  if (head.status != FrameStatus::complete) {
    result.status = head.status;
    result.error = head.error;
    return result;
  }
  const size_t wire_size = head.header.wire_size();
  if (buf.size() < wire_size) return result;  // need_more
  result.status = FrameStatus::complete;
  result.message.type = head.header.type;
  result.message.wire = buf.substr(0, wire_size);
  result.message.body = buf.substr(head.header.header_size(), head.header.body_size());
  return result;
}

FrameReader::FrameReader(FramePhase phase, uint32_t max_length, BufferStore& store)
    : phase_(phase), max_length_(max_length), store_(store) {}

FrameReader::~FrameReader() {
  if (data_ != nullptr) store_.release(data_, capacity_);
}

char* FrameReader::writable(size_t min_free) {
  if (writable_size() >= min_free) return data_ + end_;
  // Moving the unread bytes to the front is cheaper than growing when that makes enough room.
  if (start_ > 0) {
    compact();
    if (writable_size() >= min_free) return data_ + end_;
  }
  reallocate(std::max({end_ + min_free, capacity_ * 2, kMinGrowth}));
  return data_ + end_;
}

void FrameReader::reallocate(size_t size) {
  size_t got = size;
  char* fresh = store_.allocate(got);
  const size_t unread = end_ - start_;
  if (unread > 0) std::memcpy(fresh, data_ + start_, unread);
  if (data_ != nullptr) store_.release(data_, capacity_);
  data_ = fresh;
  capacity_ = got;
  start_ = 0;
  end_ = unread;
}

void FrameReader::commit(size_t count) {
  end_ += std::min(count, writable_size());
}

void FrameReader::append(std::string_view data) {
  if (data.empty()) return;
  std::memcpy(writable(data.size()), data.data(), data.size());
  commit(data.size());
}

FrameResult FrameReader::next() {
  FrameResult result = next_message(unread(), phase_, max_length_);
  if (result.status == FrameStatus::complete) start_ += result.message.wire.size();
  return result;
}

void FrameReader::skip(size_t count) {
  start_ += std::min(count, unread_size());
}

std::string_view FrameReader::unread() const {
  return std::string_view(data_ + start_, end_ - start_);
}

void FrameReader::compact() {
  if (start_ == 0) return;
  const size_t unread = end_ - start_;
  if (unread > 0) std::memmove(data_, data_ + start_, unread);
  start_ = 0;
  end_ = unread;
}

void FrameReader::shrink_if_idle(size_t keep_capacity) {
  if (unread_size() != 0) return;
  start_ = 0;
  end_ = 0;
  if (capacity_ <= keep_capacity) return;
  if (keep_capacity > 0) {
    reallocate(keep_capacity);
    return;
  }
  store_.release(data_, capacity_);
  data_ = nullptr;
  capacity_ = 0;
}

}  // namespace pgsluice::protocol
