// Typed setting values; see value_parsers.h.
#include "pooler/config/value_parsers.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <set>

#include "pooler/base/syslog_facility.h"
#include "pooler/base/usable_cpus.h"

namespace pgsluice {

std::string_view to_string(PoolMode mode) {
  switch (mode) {
    case PoolMode::session:
      return "session";
    case PoolMode::transaction:
      return "transaction";
    case PoolMode::statement:
      return "statement";
  }
  return "unknown";
}

std::string_view to_string(AuthType type) {
  switch (type) {
    case AuthType::trust:
      return "trust";
    case AuthType::plain:
      return "plain";
    case AuthType::md5:
      return "md5";
    case AuthType::scram_sha_256:
      return "scram-sha-256";
    case AuthType::cert:
      return "cert";
    case AuthType::hba:
      return "hba";
  }
  return "unknown";
}

std::string_view to_string(SslMode mode) {
  switch (mode) {
    case SslMode::disable:
      return "disable";
    case SslMode::allow:
      return "allow";
    case SslMode::prefer:
      return "prefer";
    case SslMode::require:
      return "require";
    case SslMode::verify_ca:
      return "verify-ca";
    case SslMode::verify_full:
      return "verify-full";
  }
  return "unknown";
}

int default_workers() {
  // Half the CPUs the process may use, at least one: a pooler's peers (its clients or PostgreSQL,
  // and the kernel's network work, most of a pooled transaction's CPU) share its host, and a
  // worker per CPU made every transaction dearer there without more throughput: on a 2-CPU
  // machine running PostgreSQL and pgbench too, workers = 2 cost 5-15 % more pooler CPU per
  // transaction than workers = 1 at 20 to 1,000 clients for the same TPS (docs/design.md, "Worker
  // threads"). A host that is the pooler's own raises it.
  return std::clamp(usable_cpus() / 2, 1, 64);
}

std::string quoted(std::string_view value) {
  return "'" + std::string(value) + "'";
}

std::string parse_bool(std::string_view value, bool& out) {
  const std::string v = ascii_lower(trim(value));
  if (v == "1" || v == "yes" || v == "on" || v == "true") {
    out = true;
  } else if (v == "0" || v == "no" || v == "off" || v == "false") {
    out = false;
  } else {
    return "invalid value " + quoted(value) +
           ": expected a boolean (0/1, yes/no, on/off, true/false)";
  }
  return {};
}

// A positive duration shorter than a millisecond becomes 1 ms rather than 0, because 0 means
// "disabled" for most timeouts.
std::string parse_duration(std::string_view value, Duration& out) {
  const std::string_view v = trim(value);
  const std::string err = "invalid value " + quoted(value) +
                          ": expected a duration in seconds (\"120\", \"0.5\") or with a unit "
                          "(us, ms, s, min, h, d)";
  double number = 0;
  const char* end = v.data() + v.size();
  auto [ptr, ec] = std::from_chars(v.data(), end, number, std::chars_format::fixed);
  if (v.empty() || ec != std::errc{} || !std::isfinite(number)) return err;
  std::string unit = ascii_lower(trim(std::string_view(ptr, static_cast<size_t>(end - ptr))));
  double ms_per_unit = 0;
  if (unit.empty() || unit == "s") {
    ms_per_unit = 1000;
  } else if (unit == "us") {
    ms_per_unit = 0.001;
  } else if (unit == "ms") {
    ms_per_unit = 1;
  } else if (unit == "min") {
    ms_per_unit = 60'000;
  } else if (unit == "h") {
    ms_per_unit = 3'600'000;
  } else if (unit == "d") {
    ms_per_unit = 86'400'000;
  } else {
    return err;
  }
  if (number < 0) return "invalid value " + quoted(value) + ": a duration cannot be negative";
  const double ms = number * ms_per_unit;
  constexpr double kMaxMs = 100.0 * 365 * 86'400'000;  // a century: anything longer is a typo
  if (ms > kMaxMs) return "invalid value " + quoted(value) + ": duration too long";
  int64_t rounded = std::llround(ms);
  if (rounded == 0 && ms > 0) rounded = 1;
  out = Duration(rounded);
  return {};
}

namespace {
constexpr std::pair<std::string_view, TargetSessionAttrs> kTargetSessionAttrs[] = {
    {"any", TargetSessionAttrs::any},
    {"read-write", TargetSessionAttrs::read_write},
    {"read-only", TargetSessionAttrs::read_only},
    {"primary", TargetSessionAttrs::primary},
    {"standby", TargetSessionAttrs::standby},
    {"prefer-standby", TargetSessionAttrs::prefer_standby},
};
constexpr std::pair<std::string_view, LoadBalanceHosts> kLoadBalanceHosts[] = {
    {"round-robin", LoadBalanceHosts::round_robin},
    {"random", LoadBalanceHosts::random},
    {"disable", LoadBalanceHosts::disable},
};
}  // namespace

std::string parse_target_session_attrs(std::string_view value, TargetSessionAttrs& out) {
  const std::string v = ascii_lower(trim(value));
  for (const auto& [name, attrs] : kTargetSessionAttrs) {
    if (v == name) {
      out = attrs;
      return {};
    }
  }
  return "invalid value " + quoted(value) +
         ": expected any, read-write, read-only, primary, standby or prefer-standby";
}

std::string parse_load_balance_hosts(std::string_view value, LoadBalanceHosts& out) {
  const std::string v = ascii_lower(trim(value));
  for (const auto& [name, mode] : kLoadBalanceHosts) {
    if (v == name) {
      out = mode;
      return {};
    }
  }
  return "invalid value " + quoted(value) + ": expected round-robin, random or disable";
}

std::string_view to_string(TargetSessionAttrs attrs) {
  for (const auto& [name, a] : kTargetSessionAttrs) {
    if (a == attrs) return name;
  }
  return "any";
}

std::string_view to_string(LoadBalanceHosts mode) {
  for (const auto& [name, m] : kLoadBalanceHosts) {
    if (m == mode) return name;
  }
  return "round-robin";
}

std::string parse_port_list(std::string_view value, std::vector<int>& out) {
  std::vector<int> ports;
  for (const std::string& item : split_list(value)) {
    int port = 0;
    if (std::string err = parse_int(item, 1, 65535, port); !err.empty()) return err;
    ports.push_back(port);
  }
  if (ports.empty()) return "invalid value " + quoted(value) + ": expected a port number";
  out = std::move(ports);
  return {};
}

std::string parse_pool_mode(std::string_view value, PoolMode& out) {
  const std::string v = ascii_lower(trim(value));
  if (v == "session") {
    out = PoolMode::session;
  } else if (v == "transaction") {
    out = PoolMode::transaction;
  } else if (v == "statement") {
    out = PoolMode::statement;
  } else {
    return "invalid value " + quoted(value) + ": expected session, transaction or statement";
  }
  return {};
}

std::string parse_auth_type(std::string_view value, AuthType& out) {
  // auth_type values PgBouncer has and pgsluice does not (yet).
  static const std::set<std::string_view> kUnsupportedAuthTypes = {"any", "ldap", "pam"};
  const std::string v = ascii_lower(trim(value));
  if (v == "trust") {
    out = AuthType::trust;
  } else if (v == "plain") {
    out = AuthType::plain;
  } else if (v == "md5") {
    out = AuthType::md5;
  } else if (v == "scram-sha-256") {
    out = AuthType::scram_sha_256;
  } else if (v == "cert") {
    out = AuthType::cert;
  } else if (v == "hba") {
    out = AuthType::hba;
  } else if (kUnsupportedAuthTypes.contains(v)) {
    return quoted(v) +
           " is a PgBouncer authentication method pgsluice does not support yet (use trust, "
           "plain, md5, scram-sha-256, cert or hba)";
  } else {
    return "invalid value " + quoted(value) +
           ": expected trust, plain, md5, scram-sha-256, cert or hba";
  }
  return {};
}

std::string parse_sslmode(std::string_view value, SslMode& out) {
  const std::string v = ascii_lower(trim(value));
  if (v == "disable") {
    out = SslMode::disable;
  } else if (v == "allow") {
    out = SslMode::allow;
  } else if (v == "prefer") {
    out = SslMode::prefer;
  } else if (v == "require") {
    out = SslMode::require;
  } else if (v == "verify-ca") {
    out = SslMode::verify_ca;
  } else if (v == "verify-full") {
    out = SslMode::verify_full;
  } else {
    return "invalid value " + quoted(value) +
           ": expected disable, allow, prefer, require, verify-ca or verify-full";
  }
  return {};
}

std::string parse_workers(std::string_view value, int& out) {
  // pgsluice's own key: "auto" and 0 both mean the default (default_workers).
  int n = 0;
  if (ascii_lower(trim(value)) == "auto") {
    n = 0;
  } else if (std::string err = parse_int(value, 0, 64, n); !err.empty()) {
    return err + " or auto";
  }
  out = n == 0 ? default_workers() : n;
  return {};
}

std::string parse_protocol_version(std::string_view value, int& minor) {
  const std::string v = ascii_lower(trim(value));
  if (v == "3.0") {
    minor = 0;
  } else if (v == "3.2" || v == "latest") {
    minor = 2;
  } else {
    return "invalid value " + quoted(value) + ": expected 3.0, 3.2 or latest";
  }
  return {};
}

std::string print_protocol_version(int minor) {
  return "3." + std::to_string(minor);
}

std::string parse_ssl_negotiation(std::string_view value, bool& direct) {
  const std::string v = ascii_lower(trim(value));
  if (v != "postgres" && v != "direct") {
    return "invalid value " + quoted(value) + ": expected postgres or direct";
  }
  direct = v == "direct";
  return {};
}

std::string parse_dheparams(std::string_view value, std::string& out) {
  const std::string v = ascii_lower(trim(value));
  if (v == "legacy") {
    return "legacy (1024-bit DH) is refused, as PgBouncer 1.25 refuses it: use auto or none";
  }
  if (v != "auto" && v != "none") {
    return "invalid value " + quoted(value) + ": expected auto or none";
  }
  out = v;
  return {};
}

std::string parse_syslog_facility(std::string_view value, std::string& out) {
  const std::string v = ascii_lower(trim(value));
  if (syslog_facility_code(v) < 0) {
    return "invalid value " + quoted(value) +
           ": expected auth, authpriv, daemon, user or local0 to local7";
  }
  out = v;
  return {};
}

std::string parse_verbose_level(std::string_view value, std::string& out) {
  const std::string v = ascii_lower(trim(value));
  if (v != "trace" && v != "debug" && v != "info" && v != "warn" && v != "error") {
    return "invalid value " + quoted(value) + ": expected trace, debug, info, warn or error";
  }
  out = v;
  return {};
}

std::string parse_verbose_count(std::string_view value, std::optional<int>& out) {
  int n = 0;
  std::string err = parse_int(value, 0, 1000, n);
  if (err.empty()) out = n;
  return err;
}

std::string print_verbose_count(const std::optional<int>& count) {
  return std::to_string(count.value_or(0));
}

std::string parse_session_verify(std::string_view value, SessionVerifyMode& out) {
  auto mode = parse_session_verify_mode(value);
  if (!mode) return "expected off, sample or always";
  out = *mode;
  return {};
}

std::string print_seconds(Duration d) {
  const auto ms = d.count();
  if (ms % 1000 == 0) return std::to_string(ms / 1000);
  // %g as fmt's {:g}, the pooler's other printer of fractions: six significant digits.
  char text[32];
  std::snprintf(text, sizeof text, "%g", static_cast<double>(ms) / 1000.0);
  return text;
}

std::string parse_file_mode(std::string_view value, int& out) {
  std::string_view v = trim(value);
  int base = 10;
  if (v.size() > 2 && v[0] == '0' && (v[1] == 'x' || v[1] == 'X')) {
    base = 16;
    v.remove_prefix(2);
  } else if (v.size() > 1 && v[0] == '0') {
    base = 8;
    v.remove_prefix(1);
  }
  int parsed = 0;
  const char* end = v.data() + v.size();
  auto [ptr, ec] = std::from_chars(v.data(), end, parsed, base);
  if (v.empty() || ec != std::errc() || ptr != end || parsed < 0 || parsed > 07777) {
    return "invalid value " + quoted(value) + ": expected a file mode such as 0777";
  }
  out = parsed;
  return {};
}

std::string print_file_mode(int mode) {
  char text[16];
  std::snprintf(text, sizeof text, "0%o", static_cast<unsigned>(mode));
  return text;
}

std::string print_bool(bool b) {
  return b ? "1" : "0";
}

std::string join_list(const std::vector<std::string>& items) {
  std::string out;
  for (const auto& i : items) {
    if (!out.empty()) out += ",";
    out += i;
  }
  return out;
}

}  // namespace pgsluice
