// Bounds-checked big-endian reading and writing of the protocol's field types
// (Int8/16/32, String = NUL-terminated, Byten). Every read reports failure instead of over-reading.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

namespace pgsluice::protocol {

class ByteReader {
 public:
  explicit ByteReader(std::string_view data) : data_(data) {}

  [[nodiscard]] bool read_u8(uint8_t& out);
  [[nodiscard]] bool read_i16(int16_t& out);
  [[nodiscard]] bool read_i32(int32_t& out);
  [[nodiscard]] bool read_u32(uint32_t& out);
  // A NUL-terminated string; `out` excludes the terminator. Fails when no NUL is left.
  // Inline: every Query's SQL is read with it (and link-time optimisation left it a call).
  [[nodiscard]] bool read_cstring(std::string_view& out) {
    if (pos_ >= data_.size()) return false;  // memchr is not given an empty view's null data
    const char* start = data_.data() + pos_;
    const void* nul = std::memchr(start, '\0', data_.size() - pos_);
    if (nul == nullptr) return false;
    const auto length = static_cast<size_t>(static_cast<const char*>(nul) - start);
    out = std::string_view(start, length);
    pos_ += length + 1;
    return true;
  }
  [[nodiscard]] bool read_bytes(size_t count, std::string_view& out);

  [[nodiscard]] size_t remaining() const { return data_.size() - pos_; }
  [[nodiscard]] bool at_end() const { return pos_ == data_.size(); }
  [[nodiscard]] size_t position() const { return pos_; }
  // The unread rest, without consuming it.
  [[nodiscard]] std::string_view rest() const { return data_.substr(pos_); }

 private:
  std::string_view data_;
  size_t pos_ = 0;
};

void put_u8(std::string& out, uint8_t v);
void put_i16(std::string& out, int16_t v);
void put_i32(std::string& out, int32_t v);
void put_u32(std::string& out, uint32_t v);
void put_cstring(std::string& out, std::string_view s);  // appends s and a NUL
void put_bytes(std::string& out, std::string_view s);

// Reads a big-endian 32-bit word from the first four bytes of p (caller guarantees four bytes).
// Inline: FrameReader::peek reads every message's length with it.
inline uint32_t load_u32(const char* p) {
  const auto* u = reinterpret_cast<const unsigned char*>(p);
  return (uint32_t{u[0]} << 24) | (uint32_t{u[1]} << 16) | (uint32_t{u[2]} << 8) | uint32_t{u[3]};
}
void store_u32(char* p, uint32_t v);

}  // namespace pgsluice::protocol
