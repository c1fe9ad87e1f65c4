// The SQLSTATE codes the pooler itself sends, named as in PostgreSQL's errcodes.txt.
#pragma once

namespace pgsluice::sqlstate {

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
inline constexpr const char* kProgramLimitExceeded = "54000";
inline constexpr const char* kInternalError = "XX000";

}  // namespace pgsluice::sqlstate
