// Names of the protocol library's parse errors, for logs and test failure messages.
#include "pgsluice/protocol/result.h"

namespace pgsluice::protocol {

std::string_view to_string(ParseError error) {
  switch (error) {
    case ParseError::ok:
      return "ok";
    case ParseError::truncated:
      return "truncated";
    case ParseError::missing_terminator:
      return "missing_terminator";
    case ParseError::bad_length:
      return "bad_length";
    case ParseError::too_long:
      return "too_long";
    case ParseError::unknown_type:
      return "unknown_type";
    case ParseError::bad_value:
      return "bad_value";
    case ParseError::trailing_bytes:
      return "trailing_bytes";
  }
  return "unknown";
}

}  // namespace pgsluice::protocol
