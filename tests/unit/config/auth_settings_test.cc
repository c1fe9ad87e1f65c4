// The authentication keys of the configuration: auth_type = hba with auth_hba_file, and
// auth_user / auth_query / auth_dbname / auth_query_cache_ttl in the main section and on
// [databases] lines.
#include <gtest/gtest.h>

#include "pooler/config/config.h"

namespace pgsluice {
namespace {

TEST(TlsSettings, DirectNegotiationNeedsARequiringSslmode) {
  // libpq's rule for sslnegotiation=direct: no plaintext fallback, so prefer/allow make no sense.
  ConfigLoadResult r =
      load_config_string("[pgsluice]\nserver_tls_sslnegotiation = direct\n", "a.ini");
  ASSERT_EQ(r.errors.size(), 1u);
  EXPECT_EQ(r.errors[0].to_string(),
            "a.ini: server_tls_sslnegotiation: server_tls_sslnegotiation = direct needs "
            "server_tls_sslmode require, verify-ca or verify-full");
  r = load_config_string(
      "[pgsluice]\nserver_tls_sslnegotiation = direct\nserver_tls_sslmode = verify-ca\n", "a.ini");
  ASSERT_TRUE(r.errors.empty());
  EXPECT_TRUE(r.config->settings.server_tls_direct);
  r = load_config_string("[pgsluice]\n", "a.ini");
  EXPECT_FALSE(r.config->settings.server_tls_direct);
  EXPECT_EQ(r.config->settings.server_max_protocol_minor, 2);
}

TEST(AuthSettings, HbaNeedsAFile) {
  ConfigLoadResult r = load_config_string("[pgsluice]\nauth_type = hba\n", "a.ini");
  ASSERT_EQ(r.errors.size(), 1u);
  EXPECT_EQ(r.errors[0].to_string(), "a.ini: auth_type: auth_type = hba needs auth_hba_file");

  r = load_config_string("[pgsluice]\nauth_type = HBA\nauth_hba_file = /etc/hba.conf\n", "a.ini");
  ASSERT_TRUE(r.errors.empty());
  EXPECT_EQ(r.config->settings.auth_type, AuthType::hba);
  EXPECT_EQ(r.config->settings.auth_hba_file, "/etc/hba.conf");
  EXPECT_EQ(to_string(AuthType::hba), "hba");
  EXPECT_TRUE(r.config->warnings.empty());
}

TEST(AuthSettings, AuthQueryDefaultsArePgBouncers) {
  ConfigLoadResult r = load_config_string("[pgsluice]\n", "a.ini");
  ASSERT_TRUE(r.errors.empty());
  const Settings& s = r.config->settings;
  EXPECT_EQ(s.auth_user, "");
  EXPECT_EQ(s.auth_query,
            "SELECT rolname, CASE WHEN rolvaliduntil < now() THEN NULL ELSE rolpassword END FROM "
            "pg_authid WHERE rolname=$1 AND rolcanlogin");
  EXPECT_EQ(s.auth_dbname, "");
  EXPECT_EQ(s.auth_query_cache_ttl, std::chrono::seconds(60));
}

TEST(AuthSettings, MainSectionAndDatabaseLines) {
  ConfigLoadResult r = load_config_string(
      "[databases]\n"
      "app = host=h auth_user=lookup auth_dbname=postgres "
      "auth_query='SELECT usename, passwd FROM pg_shadow WHERE usename=$1'\n"
      "[pgsluice]\n"
      "auth_user = pgbouncer\n"
      "auth_query = SELECT u, p FROM users WHERE u = $1\n"
      "auth_dbname = authdb\n"
      "auth_query_cache_ttl = 5s\n",
      "a.ini");
  ASSERT_TRUE(r.errors.empty()) << r.errors[0].to_string();
  EXPECT_TRUE(r.config->warnings.empty());
  const Settings& s = r.config->settings;
  EXPECT_EQ(s.auth_user, "pgbouncer");
  EXPECT_EQ(s.auth_query, "SELECT u, p FROM users WHERE u = $1");
  EXPECT_EQ(s.auth_dbname, "authdb");
  EXPECT_EQ(s.auth_query_cache_ttl, std::chrono::seconds(5));
  const DatabaseEntry& db = r.config->databases.at("app");
  EXPECT_EQ(db.auth_user, "lookup");
  EXPECT_EQ(db.auth_dbname, "postgres");
  EXPECT_EQ(db.auth_query, "SELECT usename, passwd FROM pg_shadow WHERE usename=$1");
}

TEST(AuthSettings, BadTtlIsAnError) {
  ConfigLoadResult r = load_config_string("[pgsluice]\nauth_query_cache_ttl = soon\n", "a.ini");
  ASSERT_EQ(r.errors.size(), 1u);
  EXPECT_EQ(r.errors[0].line, 2);
  EXPECT_EQ(r.errors[0].key, "auth_query_cache_ttl");
}

}  // namespace
}  // namespace pgsluice
