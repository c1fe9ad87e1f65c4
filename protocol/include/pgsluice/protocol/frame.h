// Cutting a byte stream into protocol messages. Bytes arrive in arbitrary pieces; complete
// messages come out as views into the buffer (no copy); a partial message waits for more bytes.
// The startup phase has no type byte (StartupMessage, SSLRequest, GSSENCRequest, CancelRequest);
// every later message is a type byte followed by a length that counts itself but not the type.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "pgsluice/protocol/bytes.h"
#include "pgsluice/protocol/result.h"

namespace pgsluice::protocol {

enum class FramePhase { startup, regular };

inline constexpr uint32_t kDefaultMaxMessageLength = 0x7fffffff;
// PostgreSQL itself refuses startup packets above 10000 bytes (MAX_STARTUP_PACKET_LENGTH).
inline constexpr uint32_t kMaxStartupPacketLength = 10000;
// ... and messages during authentication above 65535 (PG_MAX_AUTH_TOKEN_LENGTH): before login
// nobody is known, so nobody may make the pooler buffer more.
inline constexpr uint32_t kMaxAuthMessageLength = 65535;

struct MessageHeader {
  char type = 0;        // 0 for a startup-phase packet
  uint32_t length = 0;  // the length word: counts itself and the body, not the type byte
  [[nodiscard]] size_t header_size() const { return type == 0 ? 4 : 5; }
  [[nodiscard]] size_t wire_size() const { return (type == 0 ? 0 : 1) + size_t{length}; }
  [[nodiscard]] size_t body_size() const { return size_t{length} - 4; }
};

struct Message {
  char type = 0;          // 0 for a startup-phase packet
  std::string_view body;  // after the length word
  std::string_view wire;  // the whole message as it arrived: type, length and body
};

enum class FrameStatus { complete, need_more, error };

struct HeaderResult {
  FrameStatus status = FrameStatus::need_more;
  MessageHeader header;
  ParseError error = ParseError::ok;
};

struct FrameResult {
  FrameStatus status = FrameStatus::need_more;
  Message message;
  ParseError error = ParseError::ok;
};

// Looks at the header at the start of `buf` only: enough to decide to forward a long message in
// pieces without waiting for all of it. A length below 4 is bad_length; above `max_length`,
// too_long (in the startup phase the limit is min(max_length, kMaxStartupPacketLength)).
HeaderResult peek_header(std::string_view buf, FramePhase phase, uint32_t max_length);

// The complete message at the start of `buf`, if all of it is there.
FrameResult next_message(std::string_view buf, FramePhase phase, uint32_t max_length);

// Where a FrameReader's buffer memory comes from. The default is the C++ heap; the pooler gives
// its channels slabs of their own (pooler/base/io_buffers.h), so that the read buffers of a
// login burst leave no holes in malloc's heap between what lives on (issue 17).
class BufferStore {
 public:
  virtual ~BufferStore() = default;
  // At least `size` bytes; `size` becomes what the block holds. Throws std::bad_alloc.
  virtual char* allocate(size_t& size) = 0;
  // A block of this store with the size allocate() gave it.
  virtual void release(char* data, size_t size) noexcept = 0;
  // operator new and delete.
  static BufferStore& heap();
};

// A growable input buffer with a read cursor: the socket writes into writable(), commit() makes
// those bytes readable, next() hands out complete messages as views. Views stay valid until the
// next call of writable(), append() or compact().
class FrameReader {
 public:
  explicit FrameReader(FramePhase phase = FramePhase::regular,
                       uint32_t max_length = kDefaultMaxMessageLength,
                       BufferStore& store = BufferStore::heap());
  FrameReader(const FrameReader&) = delete;
  FrameReader& operator=(const FrameReader&) = delete;
  ~FrameReader();

  // At least `min_free` writable bytes at the end of the buffer (compacting or growing it).
  char* writable(size_t min_free);
  [[nodiscard]] size_t writable_size() const { return capacity_ - end_; }
  void commit(size_t count);
  void append(std::string_view data);  // writable + copy + commit, for tests and synthesized input

  // The next complete message, advancing past it; need_more leaves the cursor where it was.
  FrameResult next();
  // The header of the next message without consuming anything. Inline for the forwarding loops,
  // which peek at every message and once more at the end of every read: a regular-phase header
  // that is all there and valid, or too few bytes for one, is decided here; everything else (the
  // startup phase, a bad header) by peek_header, which gives these two the same answers.
  HeaderResult peek() const {
    if (phase_ == FramePhase::regular) {
      if (unread_size() < 5) return {};  // need_more
      const char* p = data_ + start_;
      const uint32_t length = load_u32(p + 1);
      if (p[0] != 0 && length >= 4 && length <= max_length_) {
        return {.status = FrameStatus::complete, .header = {.type = p[0], .length = length}};
      }
    }
    return peek_header(unread(), phase_, max_length_);
  }
  // The message whose complete header peek() just gave, when all of it has arrived
  // (header.wire_size() <= unread_size(), which the caller has checked), advancing past it.
  // The forwarding loops peek at every message first: next() would read the header twice.
  Message take(const MessageHeader& header) {
    const char* wire = data_ + start_;
    start_ += header.wire_size();
    return Message{.type = header.type,
                   .body = std::string_view(wire + header.header_size(), header.body_size()),
                   .wire = std::string_view(wire, header.wire_size())};
  }
  // Consumes `count` unread bytes (a message forwarded in pieces).
  void skip(size_t count);
  // Un-takes the message take() just returned (nothing read or compacted since): it is read
  // again later (a client's Bind that waits for the pooler's check of its statement).
  void give_back(const Message& message) { start_ -= message.wire.size(); }

  [[nodiscard]] std::string_view unread() const;
  [[nodiscard]] size_t unread_size() const { return end_ - start_; }
  [[nodiscard]] FramePhase phase() const { return phase_; }
  void set_phase(FramePhase phase) { phase_ = phase; }
  [[nodiscard]] uint32_t max_length() const { return max_length_; }
  void set_max_length(uint32_t max_length) { max_length_ = max_length; }
  // Moves unread bytes to the front; invalidates views handed out before.
  void compact();
  // Releases memory of a large buffer once it is empty, so that an idle connection stays small.
  void shrink_if_idle(size_t keep_capacity);
  [[nodiscard]] size_t capacity() const { return capacity_; }

 private:
  // A buffer of at least `size` bytes holding the unread bytes at its front.
  void reallocate(size_t size);

  FramePhase phase_;
  uint32_t max_length_;
  BufferStore& store_;
  char* data_ = nullptr;
  size_t capacity_ = 0;
  size_t start_ = 0;  // first unread byte
  size_t end_ = 0;    // one past the last received byte
};

}  // namespace pgsluice::protocol
