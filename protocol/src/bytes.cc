// Bounds-checked big-endian field reading and the matching appenders: the only place in the
// protocol library that touches raw byte order.
#include "pgsluice/protocol/bytes.h"

#include <cstring>

namespace pgsluice::protocol {

void store_u32(char* p, uint32_t v) {
  p[0] = static_cast<char>((v >> 24) & 0xff);
  p[1] = static_cast<char>((v >> 16) & 0xff);
  p[2] = static_cast<char>((v >> 8) & 0xff);
  p[3] = static_cast<char>(v & 0xff);
}

bool ByteReader::read_u8(uint8_t& out) {
  if (remaining() < 1) return false;
  out = static_cast<uint8_t>(data_[pos_]);
  pos_ += 1;
  return true;
}

bool ByteReader::read_i16(int16_t& out) {
  if (remaining() < 2) return false;
  const auto* u = reinterpret_cast<const unsigned char*>(data_.data() + pos_);
  out = static_cast<int16_t>(static_cast<uint16_t>((u[0] << 8) | u[1]));
  pos_ += 2;
  return true;
}

bool ByteReader::read_u32(uint32_t& out) {
  if (remaining() < 4) return false;
  out = load_u32(data_.data() + pos_);
  pos_ += 4;
  return true;
}

bool ByteReader::read_i32(int32_t& out) {
  uint32_t u = 0;
  if (!read_u32(u)) return false;
  out = static_cast<int32_t>(u);  // two's complement conversion, well defined since C++20
  return true;
}

bool ByteReader::read_bytes(size_t count, std::string_view& out) {
  if (count > remaining()) return false;
  out = data_.substr(pos_, count);
  pos_ += count;
  return true;
}

void put_u8(std::string& out, uint8_t v) {
  out.push_back(static_cast<char>(v));
}

void put_i16(std::string& out, int16_t v) {
  const auto u = static_cast<uint16_t>(v);
  out.push_back(static_cast<char>((u >> 8) & 0xff));
  out.push_back(static_cast<char>(u & 0xff));
}

void put_u32(std::string& out, uint32_t v) {
  char buf[4];
  store_u32(buf, v);
  out.append(buf, 4);
}

void put_i32(std::string& out, int32_t v) {
  put_u32(out, static_cast<uint32_t>(v));
}

void put_cstring(std::string& out, std::string_view s) {
  out.append(s);
  out.push_back('\0');
}

void put_bytes(std::string& out, std::string_view s) {
  out.append(s);
}

}  // namespace pgsluice::protocol
