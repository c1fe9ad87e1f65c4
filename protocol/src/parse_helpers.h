// What every message parser of the protocol library (frontend, backend, startup) decides the same
// way: which error an unreadable C string is, whether a body ended where it should, and how much
// a count read from the wire may reserve.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "pgsluice/protocol/bytes.h"
#include "pgsluice/protocol/result.h"

namespace pgsluice::protocol {

// A C string that cannot be read: nothing left means the field is missing altogether, bytes
// without a NUL mean the terminator is.
inline ParseError cstring_error(const ByteReader& r) {
  return r.remaining() == 0 ? ParseError::truncated : ParseError::missing_terminator;
}

// A message whose fields were all read: bytes left over are an error.
inline ParseError finish(const ByteReader& r) {
  return r.at_end() ? ParseError::ok : ParseError::trailing_bytes;
}

// A count read from the wire (already checked non-negative) must not size an allocation beyond
// what the body can hold.
inline size_t bounded_reserve(int64_t count, size_t remaining, size_t min_item_size) {
  return std::min(static_cast<size_t>(count), remaining / min_item_size);
}

}  // namespace pgsluice::protocol
