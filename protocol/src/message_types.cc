// The documented names of the protocol's message type bytes, per direction.
#include "pgsluice/protocol/message_types.h"

namespace pgsluice::protocol {

namespace {

std::string_view frontend_name(char type) {
  switch (type) {
    case frontend::kBind:
      return "Bind";
    case frontend::kClose:
      return "Close";
    case frontend::kCopyData:
      return "CopyData";
    case frontend::kCopyDone:
      return "CopyDone";
    case frontend::kCopyFail:
      return "CopyFail";
    case frontend::kDescribe:
      return "Describe";
    case frontend::kExecute:
      return "Execute";
    case frontend::kFlush:
      return "Flush";
    case frontend::kFunctionCall:
      return "FunctionCall";
    case frontend::kParse:
      return "Parse";
    // Also SASLInitialResponse, SASLResponse and GSSResponse: the byte alone cannot tell.
    case frontend::kPasswordMessage:
      return "PasswordMessage";
    case frontend::kQuery:
      return "Query";
    case frontend::kSync:
      return "Sync";
    case frontend::kTerminate:
      return "Terminate";
    default:
      return {};
  }
}

std::string_view backend_name(char type) {
  switch (type) {
    // The documentation names each authentication request separately (AuthenticationOk,
    // AuthenticationSASL, …); the code inside the body tells them apart, so the byte gets the
    // family name.
    case backend::kAuthentication:
      return "Authentication";
    case backend::kBackendKeyData:
      return "BackendKeyData";
    case backend::kBindComplete:
      return "BindComplete";
    case backend::kCloseComplete:
      return "CloseComplete";
    case backend::kCommandComplete:
      return "CommandComplete";
    case backend::kCopyData:
      return "CopyData";
    case backend::kCopyDone:
      return "CopyDone";
    case backend::kCopyInResponse:
      return "CopyInResponse";
    case backend::kCopyOutResponse:
      return "CopyOutResponse";
    case backend::kCopyBothResponse:
      return "CopyBothResponse";
    case backend::kDataRow:
      return "DataRow";
    case backend::kEmptyQueryResponse:
      return "EmptyQueryResponse";
    case backend::kErrorResponse:
      return "ErrorResponse";
    case backend::kFunctionCallResponse:
      return "FunctionCallResponse";
    case backend::kNegotiateProtocolVersion:
      return "NegotiateProtocolVersion";
    case backend::kNoData:
      return "NoData";
    case backend::kNoticeResponse:
      return "NoticeResponse";
    case backend::kNotificationResponse:
      return "NotificationResponse";
    case backend::kParameterDescription:
      return "ParameterDescription";
    case backend::kParameterStatus:
      return "ParameterStatus";
    case backend::kParseComplete:
      return "ParseComplete";
    case backend::kPortalSuspended:
      return "PortalSuspended";
    case backend::kReadyForQuery:
      return "ReadyForQuery";
    case backend::kRowDescription:
      return "RowDescription";
    default:
      return {};
  }
}

}  // namespace

std::string_view message_name(Direction direction, char type) {
  switch (direction) {
    case Direction::frontend:
      return frontend_name(type);
    case Direction::backend:
      return backend_name(type);
  }
  return {};
}

bool is_known_message(Direction direction, char type) {
  return !message_name(direction, type).empty();
}

}  // namespace pgsluice::protocol
