// The type bytes of the PostgreSQL frontend/backend protocol (3.0 and 3.2), named as the protocol
// documentation names the messages. Some bytes mean different messages in each direction.
#pragma once

#include <cstdint>
#include <string_view>

namespace pgsluice::protocol {

enum class Direction { frontend, backend };

namespace frontend {
inline constexpr char kBind = 'B';
inline constexpr char kClose = 'C';
inline constexpr char kCopyData = 'd';
inline constexpr char kCopyDone = 'c';
inline constexpr char kCopyFail = 'f';
inline constexpr char kDescribe = 'D';
inline constexpr char kExecute = 'E';
inline constexpr char kFlush = 'H';
inline constexpr char kFunctionCall = 'F';
inline constexpr char kParse = 'P';
// PasswordMessage, SASLInitialResponse, SASLResponse and GSSResponse share 'p'; the
// authentication exchange in progress says which one it is.
inline constexpr char kPasswordMessage = 'p';
inline constexpr char kQuery = 'Q';
inline constexpr char kSync = 'S';
inline constexpr char kTerminate = 'X';
}  // namespace frontend

namespace backend {
inline constexpr char kAuthentication = 'R';
inline constexpr char kBackendKeyData = 'K';
inline constexpr char kBindComplete = '2';
inline constexpr char kCloseComplete = '3';
inline constexpr char kCommandComplete = 'C';
inline constexpr char kCopyData = 'd';
inline constexpr char kCopyDone = 'c';
inline constexpr char kCopyInResponse = 'G';
inline constexpr char kCopyOutResponse = 'H';
inline constexpr char kCopyBothResponse = 'W';
inline constexpr char kDataRow = 'D';
inline constexpr char kEmptyQueryResponse = 'I';
inline constexpr char kErrorResponse = 'E';
inline constexpr char kFunctionCallResponse = 'V';
inline constexpr char kNegotiateProtocolVersion = 'v';
inline constexpr char kNoData = 'n';
inline constexpr char kNoticeResponse = 'N';
inline constexpr char kNotificationResponse = 'A';
inline constexpr char kParameterDescription = 't';
inline constexpr char kParameterStatus = 'S';
inline constexpr char kParseComplete = '1';
inline constexpr char kPortalSuspended = 's';
inline constexpr char kReadyForQuery = 'Z';
inline constexpr char kRowDescription = 'T';
}  // namespace backend

// The message's documented name ("Parse", "ReadyForQuery"), or an empty view for an unknown byte.
std::string_view message_name(Direction direction, char type);
// Whether `type` is a message this direction may send once the startup phase is over.
bool is_known_message(Direction direction, char type);

}  // namespace pgsluice::protocol
