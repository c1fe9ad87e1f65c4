// See link_wire.h.
#include "tests/unit/core/link_wire.h"

#include <cstdio>

namespace pgsluice::test_support::wire {

namespace {

uint32_t read_u32(std::string_view bytes, size_t at) {
  uint32_t v = 0;
  for (size_t i = 0; i < 4; ++i) v = (v << 8) | static_cast<unsigned char>(bytes[at + i]);
  return v;
}

void append_visible(std::string& out, std::string_view bytes) {
  for (unsigned char c : bytes) {
    if (c >= 0x20 && c < 0x7f && c != '\\') {
      out.push_back(static_cast<char>(c));
    } else {
      char hex[5];
      std::snprintf(hex, sizeof(hex), "\\x%02x", c);
      out += hex;
    }
  }
}

}  // namespace

std::string show_wire(std::string_view bytes, bool startup) {
  std::string out;
  if (startup && bytes.size() >= 4) {
    // A startup packet is its length word and body, without a type byte.
    const uint32_t length = read_u32(bytes, 0);
    if (length >= 4 && length <= bytes.size()) {
      out += "startup ";
      append_visible(out, bytes.substr(4, length - 4));
      out += "\n";
      bytes.remove_prefix(length);
    }
  }
  size_t at = 0;
  while (bytes.size() - at >= 5) {
    const uint32_t length = read_u32(bytes, at + 1);
    if (length < 4 || bytes.size() - at - 1 < length) break;
    out += bytes[at];
    out += " ";
    append_visible(out, bytes.substr(at + 5, length - 4));
    out += "\n";
    at += 1 + length;
  }
  if (at < bytes.size()) {
    out += "partial: ";
    append_visible(out, bytes.substr(at));
    out += "\n";
  }
  return out;
}

std::vector<Message> split(std::string_view bytes) {
  std::vector<Message> messages;
  size_t at = 0;
  while (bytes.size() - at >= 5) {
    const uint32_t length = read_u32(bytes, at + 1);
    if (length < 4 || bytes.size() - at - 1 < length) break;
    messages.push_back(Message{bytes[at], std::string(bytes.substr(at + 5, length - 4))});
    at += 1 + length;
  }
  return messages;
}

}  // namespace pgsluice::test_support::wire
