// The error values every parser in the protocol library returns: a malformed message is a value,
// never an exception, a crash or an over-read.
#pragma once

#include <string_view>
#include <utility>

namespace pgsluice::protocol {

enum class ParseError {
  ok,
  truncated,           // the body ends before a field it announces
  missing_terminator,  // a C string without its NUL byte
  bad_length,          // a length word below 4 (or below the fixed part of the message)
  too_long,            // a length word above the configured maximum message size
  unknown_type,        // a message type byte the receiving side does not accept
  bad_value,           // a field with a value the protocol does not allow
  trailing_bytes,      // bytes left after the last field
};

std::string_view to_string(ParseError error);

// The outcome of one parse: a value or the reason there is none.
template <class T>
struct Parsed {
  ParseError error = ParseError::ok;
  T value{};

  Parsed() = default;
  Parsed(T v) : value(std::move(v)) {}  // NOLINT(google-explicit-constructor)
  Parsed(ParseError e) : error(e) {}    // NOLINT(google-explicit-constructor)

  [[nodiscard]] bool ok() const { return error == ParseError::ok; }
  explicit operator bool() const { return ok(); }
};

}  // namespace pgsluice::protocol
