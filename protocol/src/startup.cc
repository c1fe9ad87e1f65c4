// The startup phase: parsing the untyped packets a client opens with, and deciding which protocol
// version a connection speaks (3.0 or 3.2) and whether to send NegotiateProtocolVersion.
#include "pgsluice/protocol/startup.h"

#include <algorithm>

#include "ascii.h"
#include "parse_helpers.h"
#include "pgsluice/protocol/backend.h"
#include "pgsluice/protocol/bytes.h"

namespace pgsluice::protocol {

namespace {

constexpr size_t kMinCancelKeyLength = 4;
constexpr std::string_view kProtocolOptionPrefix = "_pq_.";

int32_t minor_of(int32_t version) {
  return version & 0xffff;
}
int32_t major_of(int32_t version) {
  return (version >> 16) & 0xffff;
}

}  // namespace

std::string_view StartupPacket::parameter(std::string_view name) const {
  for (const auto& [key, value] : parameters) {
    if (key == name) return value;
  }
  return {};
}

Parsed<StartupPacket> parse_startup_packet(std::string_view body) {
  ByteReader r(body);
  StartupPacket packet;
  int32_t code = 0;
  if (!r.read_i32(code)) return ParseError::truncated;

  switch (code) {
    case kSSLRequestCode:
    case kGSSENCRequestCode:
      packet.kind =
          code == kSSLRequestCode ? StartupKind::ssl_request : StartupKind::gssenc_request;
      packet.version = code;
      if (!r.at_end()) return ParseError::trailing_bytes;
      return packet;
    case kCancelRequestCode: {
      packet.kind = StartupKind::cancel_request;
      packet.version = code;
      if (!r.read_i32(packet.cancel_pid)) return ParseError::truncated;
      // Protocol 3.2 made the key variable length; the packet length is the only delimiter, so
      // the key is the rest of the packet: 4 bytes (3.0) up to 256 bytes.
      if (r.remaining() < kMinCancelKeyLength) return ParseError::truncated;
      if (r.remaining() > kMaxCancelKeyLength) return ParseError::bad_value;
      (void)r.read_bytes(r.remaining(), packet.cancel_key);
      return packet;
    }
    default:
      break;
  }

  if (major_of(code) != 3) return ParseError::bad_value;
  packet.kind = StartupKind::startup_message;
  packet.version = code;
  for (;;) {
    std::string_view name;
    // The list ends with an extra NUL; a packet that simply stops is missing that terminator.
    if (!r.read_cstring(name)) return ParseError::missing_terminator;
    if (name.empty()) break;
    std::string_view value;
    if (!r.read_cstring(value)) return cstring_error(r);
    packet.parameters.emplace_back(name, value);
  }
  if (!r.at_end()) return ParseError::trailing_bytes;
  return packet;
}

VersionNegotiation negotiate_protocol_version(const StartupPacket& packet,
                                              int32_t newest_supported) {
  VersionNegotiation result;
  const int32_t requested_minor = minor_of(packet.version);
  const int32_t supported_minor = minor_of(newest_supported);

  for (const auto& [name, value] : packet.parameters) {
    // The pooler implements no protocol extension, so every _pq_. option is unrecognized; the
    // client learns that from NegotiateProtocolVersion instead of a failed connection.
    if (name.starts_with(kProtocolOptionPrefix)) result.unrecognized_options.push_back(name);
  }

  int32_t accepted_minor = std::min(requested_minor, supported_minor);
  bool negotiate = requested_minor > supported_minor || !result.unrecognized_options.empty();
  if (accepted_minor == 1) {
    // Why: 3.1 was never a PostgreSQL protocol version (PostgreSQL 18 skips it as
    // PG_PROTOCOL_RESERVED_31 because old pgbouncer deployments used that number), so the pooler
    // has no 3.1 semantics to offer. It answers as a server that knows nothing newer than 3.0
    // would: speak 3.0 and say so with NegotiateProtocolVersion (newest minor 0), which a
    // client that asked for 3.1 must accept.
    accepted_minor = 0;
    negotiate = true;
  }

  result.accepted_version = (3 << 16) | accepted_minor;
  result.send_negotiate = negotiate;
  result.newest_minor = accepted_minor;
  return result;
}

ServerVersionAnswer accept_server_negotiation(int32_t requested,
                                              const NegotiateProtocolVersion& answer) {
  ServerVersionAnswer result;
  const int32_t minor = minor_of(answer.newest_version);
  if (major_of(answer.newest_version) != 3) {
    result.error = "the server sent NegotiateProtocolVersion for protocol " +
                   std::to_string(major_of(answer.newest_version)) + "." + std::to_string(minor) +
                   ", not 3.x";
  } else if (minor >= minor_of(requested)) {
    result.error = "the server sent NegotiateProtocolVersion for protocol 3." +
                   std::to_string(minor) + ", not below the 3." +
                   std::to_string(minor_of(requested)) + " pgsluice asked for";
  } else if (minor == 1) {
    result.error = "the server offered protocol 3.1, which PostgreSQL never defined";
  } else if (!answer.unrecognized_options.empty()) {
    // pgsluice sends no _pq_. option to servers: naming one is a confused or hostile server.
    result.error = "the server named protocol option \"" +
                   std::string(answer.unrecognized_options.front()) +
                   "\" as unrecognized, which pgsluice did not send";
  }
  result.version = (3 << 16) | minor;
  return result;
}

bool parse_startup_options(std::string_view options,
                           std::vector<std::pair<std::string, std::string>>& settings) {
  // Split into words; a backslash makes the next character literal (PostgreSQL's
  // pg_split_opts rule), so "-c search_path=a,\ b" keeps its space.
  std::vector<std::string> words;
  std::string word;
  bool in_word = false;
  for (size_t i = 0; i < options.size(); ++i) {
    char c = options[i];
    if (c == '\\' && i + 1 < options.size()) {
      word.push_back(options[++i]);
      in_word = true;
    } else if (ascii::is_space(c)) {
      if (in_word) words.push_back(std::move(word));
      word.clear();
      in_word = false;
    } else {
      word.push_back(c);
      in_word = true;
    }
  }
  if (in_word) words.push_back(std::move(word));

  auto add = [&settings](std::string_view assignment) {
    size_t eq = assignment.find('=');
    if (eq == std::string_view::npos || eq == 0) return false;
    std::string name(assignment.substr(0, eq));
    for (char& ch : name) {
      if (ch == '-') ch = '_';  // "--search-path=x" means search_path, as in postgres
    }
    settings.emplace_back(std::move(name), std::string(assignment.substr(eq + 1)));
    return true;
  };
  for (size_t i = 0; i < words.size(); ++i) {
    std::string_view w = words[i];
    if (w == "-c") {
      if (i + 1 >= words.size() || !add(words[++i])) return false;
    } else if (w.starts_with("-c")) {
      if (!add(w.substr(2))) return false;
    } else if (w.starts_with("--")) {
      if (!add(w.substr(2))) return false;
    } else {
      return false;
    }
  }
  return true;
}

namespace {
// PostgreSQL's parse_bool_with_len: `value` is a prefix of `word` (case-insensitive), at least
// `min_len` characters long.
bool bool_prefix(std::string_view value, std::string_view word, size_t min_len = 1) {
  if (value.size() < min_len || value.size() > word.size()) return false;
  for (size_t i = 0; i < value.size(); ++i) {
    if (ascii::lower(value[i]) != word[i]) return false;
  }
  return true;
}
}  // namespace

std::optional<ReplicationMode> parse_replication_parameter(std::string_view value) {
  // "database" is compared exactly, before the boolean forms, as PostgreSQL does.
  if (value == "database") return ReplicationMode::logical;
  if (value == "1") return ReplicationMode::physical;
  if (value == "0") return ReplicationMode::none;
  if (bool_prefix(value, "true") || bool_prefix(value, "yes") || bool_prefix(value, "on", 2)) {
    return ReplicationMode::physical;
  }
  if (bool_prefix(value, "false") || bool_prefix(value, "no") || bool_prefix(value, "off", 2)) {
    return ReplicationMode::none;
  }
  return std::nullopt;
}

std::string_view to_string(ReplicationMode mode) {
  switch (mode) {
    case ReplicationMode::none:
      return "none";
    case ReplicationMode::physical:
      return "physical";
    case ReplicationMode::logical:
      return "logical";
  }
  return "?";
}

}  // namespace pgsluice::protocol
