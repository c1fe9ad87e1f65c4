// Typed parsers and printers for setting values, one per kind of value (integer with a range,
// boolean, duration, enum, list), shared by the main section, [databases] and [users] lines and
// the admin console's SET. A parser returns an error message, empty on success, and leaves `out`
// unchanged on error; its messages are the ones config errors show after "file:line: key: ".
// Printers print as PgBouncer's SHOW CONFIG does.
#pragma once

#include <charconv>
#include <string>
#include <string_view>
#include <vector>

#include "pooler/base/text.h"
#include "pooler/config/config.h"

namespace pgsluice {

// 'value', as error messages quote the text they reject.
std::string quoted(std::string_view value);

template <typename Int>
std::string parse_int(std::string_view value, Int min, Int max, Int& out) {
  const std::string_view v = trim(value);
  Int parsed{};
  const char* end = v.data() + v.size();
  auto [ptr, ec] = std::from_chars(v.data(), end, parsed);
  if (v.empty() || ec == std::errc::invalid_argument || ptr != end) {
    return "invalid value " + quoted(value) + ": expected an integer";
  }
  if (ec == std::errc::result_out_of_range || parsed < min || parsed > max) {
    return "invalid value " + quoted(value) + ": expected an integer between " +
           std::to_string(min) + " and " + std::to_string(max);
  }
  out = parsed;
  return {};
}

// 0/1, yes/no, on/off, true/false, in any case.
std::string parse_bool(std::string_view value, bool& out);
// Seconds with an optional fraction, as PgBouncer ("120", "0.5"), or a number with a unit: us,
// ms, s, min, h, d (as PostgreSQL's GUC units).
std::string parse_duration(std::string_view value, Duration& out);
std::string parse_pool_mode(std::string_view value, PoolMode& out);
std::string parse_target_session_attrs(std::string_view value, TargetSessionAttrs& out);
std::string parse_load_balance_hosts(std::string_view value, LoadBalanceHosts& out);
// port=5432 or port=5432,5433,5434 (libpq's multi-host form), each 1..65535.
std::string parse_port_list(std::string_view value, std::vector<int>& out);
std::string parse_auth_type(std::string_view value, AuthType& out);
std::string parse_sslmode(std::string_view value, SslMode& out);
// 0..64 or auto; 0 and auto become default_workers().
std::string parse_workers(std::string_view value, int& out);
// "3.0", "3.2" or "latest" (libpq's max_protocol_version values) into the minor version.
std::string parse_protocol_version(std::string_view value, int& minor);
std::string print_protocol_version(int minor);
// "postgres" (false) or "direct" (true): libpq's sslnegotiation values.
std::string parse_ssl_negotiation(std::string_view value, bool& direct);
// client_tls_dheparams: none or auto. PgBouncer documents legacy (1024-bit DH) too but refuses it
// at startup; so does this, saying why.
std::string parse_dheparams(std::string_view value, std::string& out);
// One of PgBouncer's syslog facility names. PgBouncer takes another name as daemon; here it is
// an error, as every bad value.
std::string parse_syslog_facility(std::string_view value, std::string& out);
std::string parse_verbose_level(std::string_view value, std::string& out);
// PgBouncer's verbose: a count, 0 and up; printed as 0 when unset (its default).
std::string parse_verbose_count(std::string_view value, std::optional<int>& out);
std::string print_verbose_count(const std::optional<int>& count);
std::string parse_session_verify(std::string_view value, SessionVerifyMode& out);
// A file mode as PgBouncer reads unix_socket_mode (C's strtol base 0: "0777" octal, "511"
// decimal, "0x1ff"), 0 to 07777; printed back in octal with a leading 0.
std::string parse_file_mode(std::string_view value, int& out);
std::string print_file_mode(int mode);

// Whole seconds, else seconds with a fraction ("1.5").
std::string print_seconds(Duration d);
std::string print_bool(bool b);                                // 0 or 1
std::string join_list(const std::vector<std::string>& items);  // comma-separated

}  // namespace pgsluice
