// The SQLSTATE codes the pooler itself sends, named as in PostgreSQL's errcodes.txt.
#pragma once

namespace pgsluice::sqlstate {

inline constexpr const char* kSuccessfulCompletion = "00000";
inline constexpr const char* kConnectionFailure = "08006";
inline constexpr const char* kConnectionException = "08000";
inline constexpr const char* kProtocolViolation = "08P01";
inline constexpr const char* kInvalidAuthorizationSpecification = "28000";
inline constexpr const char* kInvalidPassword = "28P01";
inline constexpr const char* kInvalidCatalogName = "3D000";
inline constexpr const char* kTooManyConnections = "53300";
inline constexpr const char* kQueryCanceled = "57014";
inline constexpr const char* kAdminShutdown = "57P01";
inline constexpr const char* kFeatureNotSupported = "0A000";
inline constexpr const char* kInvalidParameterValue = "22023";
inline constexpr const char* kProgramLimitExceeded = "54000";
inline constexpr const char* kInternalError = "XX000";
inline constexpr const char* kIdleInTransactionSessionTimeout = "25P03";
inline constexpr const char* kTransactionTimeout = "25P04";  // PostgreSQL 17
inline constexpr const char* kInFailedSqlTransaction = "25P02";
inline constexpr const char* kInvalidSqlStatementName = "26000";
inline constexpr const char* kInvalidCursorName = "34000";
inline constexpr const char* kInsufficientPrivilege = "42501";
inline constexpr const char* kSyntaxError = "42601";
inline constexpr const char* kDuplicatePreparedStatement = "42P05";
inline constexpr const char* kUndefinedObject = "42704";
inline constexpr const char* kObjectNotInPrerequisiteState = "55000";
inline constexpr const char* kCannotConnectNow = "57P03";
inline constexpr const char* kIdleSessionTimeout = "57P05";
inline constexpr const char* kIoError = "58030";
inline constexpr const char* kConfigFileError = "F0000";

}  // namespace pgsluice::sqlstate
