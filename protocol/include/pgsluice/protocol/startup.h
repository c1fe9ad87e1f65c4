// The startup phase: the packets a client sends before it has a type byte (StartupMessage,
// SSLRequest, GSSENCRequest, CancelRequest) and protocol version negotiation (3.0 and 3.2).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "pgsluice/protocol/result.h"

namespace pgsluice::protocol {

inline constexpr int32_t kProtocolVersion30 = (3 << 16) | 0;
inline constexpr int32_t kProtocolVersion32 = (3 << 16) | 2;
inline constexpr int32_t kSSLRequestCode = (1234 << 16) | 5679;
inline constexpr int32_t kGSSENCRequestCode = (1234 << 16) | 5680;
inline constexpr int32_t kCancelRequestCode = (1234 << 16) | 5678;
// A cancel key is 4 bytes in protocol 3.0 and up to 256 bytes in 3.2.
inline constexpr size_t kMaxCancelKeyLength = 256;

enum class StartupKind { startup_message, ssl_request, gssenc_request, cancel_request };

struct StartupPacket {
  StartupKind kind = StartupKind::startup_message;
  int32_t version = 0;  // the protocol version of a StartupMessage (major << 16 | minor)
  std::vector<std::pair<std::string_view, std::string_view>> parameters;  // in arrival order
  int32_t cancel_pid = 0;
  std::string_view cancel_key;

  // The value of a startup parameter ("user", "database", …), or an empty view.
  [[nodiscard]] std::string_view parameter(std::string_view name) const;
};

// `body` is the packet after its length word. A StartupMessage must end with the extra NUL after
// the last name/value pair; a major version other than 3 is bad_value.
Parsed<StartupPacket> parse_startup_packet(std::string_view body);

// What the pooler answers to a StartupMessage's version and its `_pq_.` options: the version the
// connection will speak, and whether (with which minor version and unknown options) a
// NegotiateProtocolVersion message must precede the authentication request.
struct VersionNegotiation {
  int32_t accepted_version = kProtocolVersion30;
  bool send_negotiate = false;
  int32_t newest_minor = 0;
  std::vector<std::string_view> unrecognized_options;
};
VersionNegotiation negotiate_protocol_version(const StartupPacket& packet,
                                              int32_t newest_supported = kProtocolVersion32);

// The other side of the negotiation: pgsluice asked a server for `requested` (3.0 or 3.2) and the
// server answered with NegotiateProtocolVersion. The version the connection speaks from then on,
// or an error message when the answer is not one a server may give (libpq's rules): another
// major version, a version at or above the one asked for (a NegotiateProtocolVersion is only
// for a downgrade), 3.1 (never a PostgreSQL protocol), or an option pgsluice never sent.
struct ServerVersionAnswer {
  int32_t version = kProtocolVersion30;
  std::string error;  // empty when the answer is acceptable
};
struct NegotiateProtocolVersion;
ServerVersionAnswer accept_server_negotiation(int32_t requested,
                                              const NegotiateProtocolVersion& answer);

// Splits a startup `options` value into name/value settings: "-c a=b", "-ca=b" and "--a=b",
// separated by spaces, with backslash escaping a space. Returns false on anything else.
bool parse_startup_options(std::string_view options,
                           std::vector<std::pair<std::string, std::string>>& settings);

// A StartupMessage's `replication` parameter: a walsender connection, physical (a boolean that
// is true) or logical ("database"), or none (a false boolean).
enum class ReplicationMode { none, physical, logical };

// As PostgreSQL reads it (parse_bool, then "database"): true, on, yes, 1 and their prefixes
// (case-insensitive, "o" alone is neither on nor off), false, off, no, 0; nullopt for anything
// else, which PostgreSQL refuses with 22023.
std::optional<ReplicationMode> parse_replication_parameter(std::string_view value);
// "none", "physical", "logical": PgBouncer's words in SHOW CLIENTS and SHOW SERVERS.
std::string_view to_string(ReplicationMode mode);

}  // namespace pgsluice::protocol
