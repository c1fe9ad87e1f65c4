// The typed value parsers and printers on their own: ranges and their bounds, every spelling of a
// boolean and a duration unit, rejected values leaving the target unchanged, and the exact
// messages that config errors show after "file:line: key: ".
#include "pooler/config/value_parsers.h"

#include <gtest/gtest.h>

#include <cstdint>

#include "pooler/base/text.h"

namespace pgsluice {
namespace {

using std::chrono::milliseconds;

TEST(ValueParsers, IntBoundsAreInclusive) {
  int n = -1;
  EXPECT_EQ(parse_int(" 1 ", 1, 65535, n), "");
  EXPECT_EQ(n, 1);
  EXPECT_EQ(parse_int("65535", 1, 65535, n), "");
  EXPECT_EQ(n, 65535);
  EXPECT_EQ(parse_int("0", 1, 65535, n),
            "invalid value '0': expected an integer between 1 and 65535");
  EXPECT_EQ(parse_int("65536", 1, 65535, n),
            "invalid value '65536': expected an integer between 1 and 65535");
  EXPECT_EQ(n, 65535);  // unchanged on error
}

TEST(ValueParsers, IntRejectsNonNumbers) {
  int n = 7;
  EXPECT_EQ(parse_int("", 0, 10, n), "invalid value '': expected an integer");
  EXPECT_EQ(parse_int("12abc", 0, 100, n), "invalid value '12abc': expected an integer");
  EXPECT_EQ(parse_int("lots", 0, 10, n), "invalid value 'lots': expected an integer");
  // Out of the type's range is a range error, not a garbage one.
  EXPECT_EQ(parse_int("99999999999", 0, 10, n),
            "invalid value '99999999999': expected an integer between 0 and 10");
  EXPECT_EQ(n, 7);
}

TEST(ValueParsers, UnsignedIntUpToItsMaximum) {
  uint32_t n = 0;
  EXPECT_EQ(parse_int<uint32_t>("4294967295", 1, UINT32_MAX, n), "");
  EXPECT_EQ(n, UINT32_MAX);
  EXPECT_NE(parse_int<uint32_t>("4294967296", 1, UINT32_MAX, n), "");
  EXPECT_NE(parse_int<uint32_t>("-1", 1, UINT32_MAX, n), "");
  EXPECT_EQ(n, UINT32_MAX);
}

TEST(ValueParsers, Booleans) {
  for (const char* yes : {"1", "yes", "On", "TRUE", " true "}) {
    bool b = false;
    EXPECT_EQ(parse_bool(yes, b), "") << yes;
    EXPECT_TRUE(b) << yes;
  }
  for (const char* no : {"0", "no", "OFF", "false"}) {
    bool b = true;
    EXPECT_EQ(parse_bool(no, b), "") << no;
    EXPECT_FALSE(b) << no;
  }
  bool b = true;
  EXPECT_EQ(parse_bool("2", b),
            "invalid value '2': expected a boolean (0/1, yes/no, on/off, true/false)");
  EXPECT_TRUE(b);
}

TEST(ValueParsers, DurationUnits) {
  Duration d{};
  const std::pair<const char*, int64_t> cases[] = {
      {"120", 120'000}, {"0.5", 500},      {"0", 0},           {"250ms", 250}, {"2 s", 2000},
      {"1min", 60'000}, {"1H", 3'600'000}, {"1d", 86'400'000}, {"1500us", 2},  {"1us", 1}};
  for (const auto& [text, ms] : cases) {
    EXPECT_EQ(parse_duration(text, d), "") << text;
    EXPECT_EQ(d.count(), ms) << text;
  }
}

TEST(ValueParsers, BadDurations) {
  Duration d = milliseconds(42);
  const std::string expected_form =
      ": expected a duration in seconds (\"120\", \"0.5\") or with a unit (us, ms, s, min, h, d)";
  EXPECT_EQ(parse_duration("soon", d), "invalid value 'soon'" + expected_form);
  EXPECT_EQ(parse_duration("5 weeks", d), "invalid value '5 weeks'" + expected_form);
  EXPECT_EQ(parse_duration("", d), "invalid value ''" + expected_form);
  EXPECT_EQ(parse_duration("-1", d), "invalid value '-1': a duration cannot be negative");
  EXPECT_EQ(parse_duration("36600d", d), "invalid value '36600d': duration too long");
  EXPECT_EQ(d.count(), 42);
}

TEST(ValueParsers, Enums) {
  PoolMode mode = PoolMode::session;
  EXPECT_EQ(parse_pool_mode("Transaction", mode), "");
  EXPECT_EQ(mode, PoolMode::transaction);
  EXPECT_EQ(parse_pool_mode("statement", mode), "");
  EXPECT_EQ(mode, PoolMode::statement);
  EXPECT_EQ(to_string(mode), "statement");
  EXPECT_EQ(parse_pool_mode("bulk", mode),
            "invalid value 'bulk': expected session, transaction or statement");
  EXPECT_EQ(mode, PoolMode::statement);

  AuthType type = AuthType::md5;
  EXPECT_EQ(parse_auth_type("SCRAM-SHA-256", type), "");
  EXPECT_EQ(type, AuthType::scram_sha_256);
  EXPECT_EQ(parse_auth_type("PAM", type),
            "'pam' is a PgBouncer authentication method pgsluice does not support yet (use trust, "
            "plain, md5, scram-sha-256, cert or hba)");
  EXPECT_EQ(type, AuthType::scram_sha_256);

  SslMode ssl = SslMode::disable;
  EXPECT_EQ(parse_sslmode("verify-full", ssl), "");
  EXPECT_EQ(ssl, SslMode::verify_full);
  EXPECT_EQ(parse_sslmode("verify_full", ssl),
            "invalid value 'verify_full': expected disable, allow, prefer, require, verify-ca or "
            "verify-full");
}

TEST(ValueParsers, WorkersAndVerboseLevel) {
  int workers = 3;
  EXPECT_EQ(parse_workers("AUTO", workers), "");
  EXPECT_EQ(workers, default_workers());
  EXPECT_EQ(parse_workers("0", workers), "");
  EXPECT_EQ(workers, default_workers());
  EXPECT_EQ(parse_workers("64", workers), "");
  EXPECT_EQ(workers, 64);
  EXPECT_EQ(parse_workers("65", workers),
            "invalid value '65': expected an integer between 0 and 64 or auto");
  EXPECT_EQ(workers, 64);

  std::string level = "info";
  EXPECT_EQ(parse_verbose_level("DEBUG", level), "");
  EXPECT_EQ(level, "debug");
  EXPECT_EQ(parse_verbose_level("loud", level),
            "invalid value 'loud': expected trace, debug, info, warn or error");
  EXPECT_EQ(level, "debug");

  std::optional<int> count;
  EXPECT_EQ(print_verbose_count(count), "0");
  EXPECT_EQ(parse_verbose_count("2", count), "");
  EXPECT_EQ(count, 2);
  EXPECT_EQ(print_verbose_count(count), "2");
  EXPECT_NE(parse_verbose_count("-1", count), "");
  EXPECT_EQ(count, 2);
}

TEST(ValueParsers, ProtocolVersionAndSslNegotiation) {
  int minor = 2;
  EXPECT_EQ(parse_protocol_version("3.0", minor), "");
  EXPECT_EQ(minor, 0);
  EXPECT_EQ(print_protocol_version(minor), "3.0");
  EXPECT_EQ(parse_protocol_version("LATEST", minor), "");
  EXPECT_EQ(minor, 2);
  EXPECT_EQ(print_protocol_version(minor), "3.2");
  EXPECT_EQ(parse_protocol_version("3.1", minor),
            "invalid value '3.1': expected 3.0, 3.2 or latest");
  EXPECT_EQ(minor, 2);

  std::string dh;
  EXPECT_EQ(parse_dheparams(" None ", dh), "");
  EXPECT_EQ(dh, "none");
  EXPECT_EQ(parse_dheparams("auto", dh), "");
  EXPECT_EQ(dh, "auto");
  EXPECT_EQ(parse_dheparams("legacy", dh),
            "legacy (1024-bit DH) is refused, as PgBouncer 1.25 refuses it: use auto or none");
  EXPECT_EQ(parse_dheparams("2048", dh), "invalid value '2048': expected auto or none");
  EXPECT_EQ(dh, "auto");

  bool direct = false;
  EXPECT_EQ(parse_ssl_negotiation("Direct", direct), "");
  EXPECT_TRUE(direct);
  EXPECT_EQ(parse_ssl_negotiation("postgres", direct), "");
  EXPECT_FALSE(direct);
  EXPECT_EQ(parse_ssl_negotiation("requiredirect", direct),
            "invalid value 'requiredirect': expected postgres or direct");
}

TEST(ValueParsers, PrintersAsPgBouncer) {
  EXPECT_EQ(print_seconds(milliseconds(120'000)), "120");
  EXPECT_EQ(print_seconds(milliseconds(1500)), "1.5");
  EXPECT_EQ(print_seconds(milliseconds(1)), "0.001");
  EXPECT_EQ(print_seconds(milliseconds(0)), "0");
  EXPECT_EQ(print_bool(true), "1");
  EXPECT_EQ(print_bool(false), "0");
  EXPECT_EQ(join_list({"a", "b"}), "a,b");
  EXPECT_EQ(join_list({}), "");
}

TEST(ValueParsers, FileModesAsStrtolBaseZero) {
  // PgBouncer reads unix_socket_mode with strtol(…, 0): a leading 0 is octal.
  int mode = 0;
  EXPECT_EQ(parse_file_mode("0777", mode), "");
  EXPECT_EQ(mode, 0777);
  EXPECT_EQ(parse_file_mode(" 0600 ", mode), "");
  EXPECT_EQ(mode, 0600);
  EXPECT_EQ(parse_file_mode("511", mode), "");
  EXPECT_EQ(mode, 0777);
  EXPECT_EQ(parse_file_mode("0x1ff", mode), "");
  EXPECT_EQ(mode, 0777);
  EXPECT_EQ(parse_file_mode("0", mode), "");
  EXPECT_EQ(mode, 0);
  for (const char* bad : {"", "0789", "rwx", "-1", "077777", "0x"}) {
    mode = 0644;
    EXPECT_NE(parse_file_mode(bad, mode), "") << bad;
    EXPECT_EQ(mode, 0644) << bad;
  }
  EXPECT_EQ(print_file_mode(0777), "0777");
  EXPECT_EQ(print_file_mode(0), "00");
}

TEST(TextHelpers, ListsTrimAndCase) {
  EXPECT_EQ(split_list(" a, b ,,c,"), (std::vector<std::string>{"a", "b", "c"}));
  EXPECT_TRUE(split_list("").empty());
  EXPECT_EQ(trim("\t x y \r\n"), "x y");
  EXPECT_EQ(ascii_lower("Query_Wait_TIMEOUT"), "query_wait_timeout");
  EXPECT_TRUE(iequals("DateStyle", "datestyle"));
  EXPECT_FALSE(iequals("DateStyle", "datestyl"));
  EXPECT_FALSE(is_space('x'));
  EXPECT_TRUE(is_space('\v'));
}

}  // namespace
}  // namespace pgsluice
