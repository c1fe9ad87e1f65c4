// Tests of the configuration loader: every key, defaults, durations, booleans, errors with their
// exact line numbers, PgBouncer-only keys as warnings, [databases] and [users] lines, and the
// example files in conf/.
#include "pooler/config/config.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <string>

#include "pooler/base/usable_cpus.h"
#include "pooler/config/server_address.h"
#include "tests/unit/config/load_ok.h"

namespace pgsluice {
namespace {

using std::chrono::milliseconds;

// Loads `text` and expects exactly one error.
ConfigError load_error(const std::string& text) {
  ConfigLoadResult r = load_config_string(text, "test.ini");
  EXPECT_EQ(r.config, nullptr);
  EXPECT_EQ(r.errors.size(), 1u);
  if (r.errors.size() != 1) {
    for (const auto& e : r.errors) ADD_FAILURE() << "error: " << e.to_string();
  }
  return r.errors.empty() ? ConfigError{} : r.errors.front();
}

bool contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

TEST(ConfigTest, EmptyFileGivesDefaults) {
  auto c = load_ok("");
  ASSERT_NE(c, nullptr);
  const Settings& s = c->settings;
  EXPECT_EQ(s.listen_addr, "127.0.0.1");
  EXPECT_EQ(s.listen_port, 6432);
  EXPECT_EQ(s.unix_socket_dir, "");
  EXPECT_EQ(s.auth_type, AuthType::md5);
  EXPECT_EQ(s.pool_mode, PoolMode::session);
  EXPECT_EQ(s.default_pool_size, 20);
  EXPECT_EQ(s.max_client_conn, 100);
  EXPECT_EQ(s.server_reset_query, "DISCARD ALL");
  EXPECT_EQ(s.query_wait_timeout, milliseconds(120000));
  EXPECT_EQ(s.login_notify_message, "");  // PgBouncer's default: no NOTICE
  EXPECT_EQ(s.server_connect_timeout, milliseconds(15000));
  EXPECT_EQ(s.server_login_retry, milliseconds(15000));
  EXPECT_EQ(s.client_login_timeout, milliseconds(60000));
  EXPECT_TRUE(s.ignore_startup_parameters.empty());
  EXPECT_FALSE(s.application_name_add_host);
  EXPECT_EQ(s.max_packet_size, 2147483647u);
  EXPECT_TRUE(s.log_connections);
  EXPECT_TRUE(s.log_disconnections);
  EXPECT_TRUE(s.log_pooler_errors);
  EXPECT_EQ(s.workers, default_workers());  // half the usable CPUs
  EXPECT_EQ(s.verbose_level, "info");
  EXPECT_TRUE(c->databases.empty());
  EXPECT_FALSE(c->fallback_database.has_value());
  EXPECT_TRUE(c->warnings.empty());
  EXPECT_EQ(c->path, "test.ini");
}

TEST(ConfigTest, EveryImplementedKey) {
  auto c = load_ok(
      "[pgsluice]\n"
      "listen_addr = *\n"
      "listen_port = 7432\n"
      "unix_socket_dir = /tmp\n"
      "auth_type = scram-sha-256\n"
      "auth_file = /etc/pgsluice/userlist.txt\n"
      "pool_mode = transaction\n"
      "default_pool_size = 7\n"
      "max_client_conn = 5000\n"
      "server_reset_query = DISCARD ALL; SELECT 1\n"
      "query_wait_timeout = 30\n"
      "server_connect_timeout = 2.5\n"
      "server_login_retry = 500ms\n"
      "client_login_timeout = 1min\n"
      "ignore_startup_parameters = extra_float_digits, search_path ,options\n"
      "application_name_add_host = 1\n"
      "login_notify_message = Connected through pgsluice; report issues to #db\n"
      "max_packet_size = 1048576\n"
      "log_connections = 0\n"
      "log_disconnections = no\n"
      "log_pooler_errors = off\n"
      "logfile = /var/log/pgsluice.log\n"
      "pidfile = /run/pgsluice.pid\n"
      "admin_users = admin, root\n"
      "stats_users = monitor\n"
      "workers = 3\n"
      "verbose_level = DEBUG\n");
  ASSERT_NE(c, nullptr);
  const Settings& s = c->settings;
  EXPECT_EQ(s.listen_addr, "*");
  EXPECT_EQ(s.listen_port, 7432);
  EXPECT_EQ(s.unix_socket_dir, "/tmp");
  EXPECT_EQ(s.auth_type, AuthType::scram_sha_256);
  EXPECT_EQ(s.auth_file, "/etc/pgsluice/userlist.txt");
  EXPECT_EQ(s.pool_mode, PoolMode::transaction);
  EXPECT_EQ(s.default_pool_size, 7);
  EXPECT_EQ(s.max_client_conn, 5000);
  // No inline comments, as PgBouncer: the ';' is part of the value.
  EXPECT_EQ(s.server_reset_query, "DISCARD ALL; SELECT 1");
  EXPECT_EQ(s.query_wait_timeout, milliseconds(30000));
  EXPECT_EQ(s.server_connect_timeout, milliseconds(2500));
  EXPECT_EQ(s.server_login_retry, milliseconds(500));
  EXPECT_EQ(s.client_login_timeout, milliseconds(60000));
  EXPECT_EQ(s.ignore_startup_parameters,
            (std::vector<std::string>{"extra_float_digits", "search_path", "options"}));
  EXPECT_TRUE(s.application_name_add_host);
  EXPECT_EQ(s.login_notify_message, "Connected through pgsluice; report issues to #db");
  EXPECT_EQ(s.max_packet_size, 1048576u);
  EXPECT_FALSE(s.log_connections);
  EXPECT_FALSE(s.log_disconnections);
  EXPECT_FALSE(s.log_pooler_errors);
  EXPECT_EQ(s.logfile, "/var/log/pgsluice.log");
  EXPECT_EQ(s.pidfile, "/run/pgsluice.pid");
  EXPECT_EQ(s.admin_users, (std::vector<std::string>{"admin", "root"}));
  EXPECT_EQ(s.stats_users, (std::vector<std::string>{"monitor"}));
  EXPECT_EQ(s.workers, 3);
  EXPECT_EQ(s.verbose_level, "debug");
  EXPECT_TRUE(c->warnings.empty());
}

TEST(ConfigTest, PgBouncerSectionIsAnAlias) {
  auto c = load_ok("[pgbouncer]\nlisten_port = 6000\n");
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->settings.listen_port, 6000);
}

TEST(ConfigTest, KeysAreCaseInsensitive) {
  auto c = load_ok("[PgSluice]\nListen_Port = 6001\nPOOL_MODE = Transaction\n");
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->settings.listen_port, 6001);
  EXPECT_EQ(c->settings.pool_mode, PoolMode::transaction);
}

TEST(ConfigTest, CommentsBlankLinesAndIndentation) {
  auto c = load_ok(
      "; a comment\n"
      "# another comment\n"
      "\n"
      "   [pgsluice]\n"
      "\t  listen_port = 6002\r\n"
      "    ; indented comment\n"
      "  default_pool_size=3\n");
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->settings.listen_port, 6002);
  EXPECT_EQ(c->settings.default_pool_size, 3);
}

TEST(ConfigTest, LastValueWins) {
  auto c = load_ok("[pgsluice]\nlisten_port = 1000\nlisten_port = 2000\n");
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->settings.listen_port, 2000);
}

TEST(ConfigTest, EmptyStringAndListValues) {
  auto c = load_ok("[pgsluice]\nserver_reset_query =\nadmin_users = ,\nlisten_addr = \n");
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->settings.server_reset_query, "");
  EXPECT_TRUE(c->settings.admin_users.empty());
  EXPECT_EQ(c->settings.listen_addr, "");
}

TEST(ConfigTest, Durations) {
  struct Case {
    const char* text;
    long long ms;
  };
  const Case cases[] = {
      {"120", 120000}, {"0", 0},         {"0.5", 500},    {"1.25", 1250},   {"100ms", 100},
      {"3s", 3000},    {"5min", 300000}, {"2h", 7200000}, {"1d", 86400000}, {"1 min", 60000},
      {"1500us", 2},   {"10 MS", 10},    {"0.0001", 1},   {"0ms", 0},
  };
  for (const Case& c : cases) {
    auto config = load_ok(std::string("[pgsluice]\nquery_wait_timeout = ") + c.text + "\n");
    ASSERT_NE(config, nullptr) << c.text;
    EXPECT_EQ(config->settings.query_wait_timeout.count(), c.ms) << c.text;
  }
}

TEST(ConfigTest, BadDurations) {
  for (const char* bad : {"abc", "-1", "10 parsecs", "1e3", "", "5m", "inf", "nan", "1e400"}) {
    ConfigError e = load_error(std::string("[pgsluice]\n\nserver_login_retry = ") + bad + "\n");
    EXPECT_EQ(e.line, 3) << bad;
    EXPECT_EQ(e.key, "server_login_retry") << bad;
    EXPECT_TRUE(contains(e.message, std::string("'") + bad + "'")) << e.message;
  }
}

TEST(ConfigTest, Booleans) {
  for (const char* yes : {"1", "yes", "on", "true", "YES", "True"}) {
    auto c = load_ok(std::string("[pgsluice]\napplication_name_add_host = ") + yes + "\n");
    ASSERT_NE(c, nullptr);
    EXPECT_TRUE(c->settings.application_name_add_host) << yes;
  }
  for (const char* no : {"0", "no", "off", "false", "OFF"}) {
    auto c = load_ok(std::string("[pgsluice]\nlog_connections = ") + no + "\n");
    ASSERT_NE(c, nullptr);
    EXPECT_FALSE(c->settings.log_connections) << no;
  }
  ConfigError e = load_error("[pgsluice]\nlog_connections = maybe\n");
  EXPECT_EQ(e.line, 2);
  EXPECT_EQ(e.key, "log_connections");
  EXPECT_TRUE(contains(e.message, "'maybe'"));
}

TEST(ConfigTest, BadIntegers) {
  struct Case {
    const char* line;
    const char* key;
    const char* value;
  };
  const Case cases[] = {
      {"listen_port = abc", "listen_port", "abc"},
      {"listen_port = 0", "listen_port", "0"},
      {"listen_port = 65536", "listen_port", "65536"},
      {"listen_port = 12x", "listen_port", "12x"},
      {"default_pool_size = 0", "default_pool_size", "0"},
      {"default_pool_size = -3", "default_pool_size", "-3"},
      {"max_client_conn = 99999999999999999999", "max_client_conn", "99999999999999999999"},
      {"max_packet_size = -1", "max_packet_size", "-1"},
      {"max_packet_size = 4294967296", "max_packet_size", "4294967296"},
      {"workers = many", "workers", "many"},
      {"workers = 100000", "workers", "100000"},
  };
  for (const Case& c : cases) {
    ConfigError e = load_error(std::string("; header\n[pgsluice]\n") + c.line + "\n");
    EXPECT_EQ(e.file, "test.ini");
    EXPECT_EQ(e.line, 3) << c.line;
    EXPECT_EQ(e.key, c.key) << c.line;
    EXPECT_TRUE(contains(e.message, std::string("'") + c.value + "'")) << e.message;
  }
}

TEST(ConfigTest, MaxPacketSizeUpperBound) {
  auto c = load_ok("[pgsluice]\nmax_packet_size = 4294967295\n");
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->settings.max_packet_size, 4294967295u);
}

TEST(ConfigTest, WorkersAuto) {
  // Half the usable CPUs, at least one (value_parsers.cc, default_workers).
  const int half = std::max(1, usable_cpus() / 2);
  for (const char* v : {"auto", "0", "AUTO"}) {
    auto c = load_ok(std::string("[pgsluice]\nworkers = ") + v + "\n");
    ASSERT_NE(c, nullptr);
    EXPECT_EQ(c->settings.workers, half) << v;
    EXPECT_GE(c->settings.workers, 1);
  }
}

TEST(ConfigTest, BadVerboseLevel) {
  ConfigError e = load_error("[pgsluice]\nverbose_level = loud\n");
  EXPECT_EQ(e.line, 2);
  EXPECT_EQ(e.key, "verbose_level");
  EXPECT_TRUE(contains(e.message, "'loud'"));
}

TEST(ConfigTest, AuthTypes) {
  const std::pair<const char*, AuthType> cases[] = {{"trust", AuthType::trust},
                                                    {"plain", AuthType::plain},
                                                    {"md5", AuthType::md5},
                                                    {"scram-sha-256", AuthType::scram_sha_256},
                                                    {"SCRAM-SHA-256", AuthType::scram_sha_256}};
  for (const auto& [text, type] : cases) {
    auto c = load_ok(std::string("[pgsluice]\nauth_type = ") + text + "\n");
    ASSERT_NE(c, nullptr);
    EXPECT_EQ(c->settings.auth_type, type) << text;
  }
  EXPECT_EQ(to_string(AuthType::scram_sha_256), "scram-sha-256");
  EXPECT_EQ(to_string(AuthType::trust), "trust");
}

TEST(ConfigTest, PgBouncerAuthTypesNotSupported) {
  for (const char* v : {"any", "pam", "ldap"}) {
    ConfigError e = load_error(std::string("[pgsluice]\nauth_type = ") + v + "\n");
    EXPECT_EQ(e.line, 2);
    EXPECT_EQ(e.key, "auth_type");
    EXPECT_TRUE(contains(e.message, std::string("'") + v + "'")) << e.message;
    EXPECT_TRUE(contains(e.message, "not support yet")) << e.message;
  }
  ConfigError e = load_error("[pgsluice]\nauth_type = kerberos\n");
  EXPECT_TRUE(contains(e.message, "'kerberos'"));
}

TEST(ConfigTest, TlsSettings) {
  ConfigLoadResult r = load_config_string(
      "[pgsluice]\nauth_type = cert\nclient_tls_sslmode = verify-full\n"
      "client_tls_key_file = /k\nclient_tls_cert_file = /c\nclient_tls_ca_file = /ca\n"
      "client_tls_protocols = tlsv1.2,tlsv1.3\nclient_tls_ciphers = secure\n"
      "server_tls_sslmode = Verify-CA\nserver_tls_ca_file = /sca\n",
      "tls.ini");
  for (const auto& e : r.errors) ADD_FAILURE() << e.to_string();
  ASSERT_NE(r.config, nullptr);
  const Settings& s = r.config->settings;
  EXPECT_TRUE(r.config->warnings.empty());
  EXPECT_EQ(s.auth_type, AuthType::cert);
  EXPECT_EQ(s.client_tls.sslmode, SslMode::verify_full);
  EXPECT_EQ(s.client_tls.key_file, "/k");
  EXPECT_EQ(s.client_tls.cert_file, "/c");
  EXPECT_EQ(s.client_tls.ca_file, "/ca");
  EXPECT_EQ(s.client_tls.protocols, "tlsv1.2,tlsv1.3");
  EXPECT_EQ(s.client_tls.ciphers, "secure");
  EXPECT_EQ(s.server_tls.sslmode, SslMode::verify_ca);
  EXPECT_EQ(s.server_tls.ca_file, "/sca");
  // PgBouncer's defaults.
  Settings defaults;
  EXPECT_EQ(defaults.client_tls.sslmode, SslMode::disable);
  EXPECT_EQ(defaults.server_tls.sslmode, SslMode::prefer);

  ConfigError e = load_error("[pgsluice]\nserver_tls_sslmode = sometimes\n");
  EXPECT_EQ(e.key, "server_tls_sslmode");
  EXPECT_TRUE(contains(e.message, "verify-full")) << e.message;
}

TEST(ConfigTest, PoolModes) {
  auto c = load_ok("[pgsluice]\npool_mode = session\n");
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->settings.pool_mode, PoolMode::session);
  EXPECT_EQ(to_string(PoolMode::transaction), "transaction");
  // Statement pooling, in the main section, a [databases] line and a [users] line.
  c = load_ok(
      "[databases]\nx = host=a pool_mode=statement\n[users]\nbob = pool_mode=statement\n"
      "[pgsluice]\npool_mode = statement\n");
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->settings.pool_mode, PoolMode::statement);
  EXPECT_EQ(c->databases.at("x").pool_mode, PoolMode::statement);
  EXPECT_EQ(c->users.at("bob").pool_mode, PoolMode::statement);
  ConfigError e = load_error("[pgsluice]\npool_mode = sometimes\n");
  EXPECT_EQ(e.line, 2);
  EXPECT_EQ(e.key, "pool_mode");
  EXPECT_TRUE(contains(e.message, "'sometimes'"));
}

TEST(ConfigTest, UnknownKeyIsAnError) {
  ConfigError e = load_error("[pgsluice]\nlisten_port = 6432\n\nlisten_prot = 6432\n");
  EXPECT_EQ(e.file, "test.ini");
  EXPECT_EQ(e.line, 4);
  EXPECT_EQ(e.key, "listen_prot");
  EXPECT_EQ(e.to_string(), "test.ini:4: listen_prot: unknown setting");
}

TEST(ConfigTest, PgBouncerOnlyKeysAreWarnings) {
  auto c = load_ok(
      "[pgbouncer]\n"
      "pkt_buf = 4096\n"
      "sbuf_loopcnt = 5\n"
      "\n"
      "DNS_MAX_TTL = 15\n"
      "listen_port = 6543\n");
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->settings.listen_port, 6543);
  ASSERT_EQ(c->warnings.size(), 3u);
  EXPECT_TRUE(contains(c->warnings[0], "test.ini:2:")) << c->warnings[0];
  EXPECT_TRUE(contains(c->warnings[0], "pkt_buf")) << c->warnings[0];
  EXPECT_TRUE(contains(c->warnings[0], "does not implement yet")) << c->warnings[0];
  EXPECT_TRUE(contains(c->warnings[1], "test.ini:3:")) << c->warnings[1];
  EXPECT_TRUE(contains(c->warnings[1], "sbuf_loopcnt"));
  EXPECT_TRUE(contains(c->warnings[2], "test.ini:5:")) << c->warnings[2];
  EXPECT_TRUE(contains(c->warnings[2], "dns_max_ttl"));
}

TEST(ConfigTest, AllErrorsAreReportedWithTheirLines) {
  ConfigLoadResult r = load_config_string(
      "[pgsluice]\n"
      "listen_port = x\n"
      "default_pool_size = 5\n"
      "bogus = 1\n"
      "pool_mode = sometimes\n",
      "multi.ini");
  EXPECT_EQ(r.config, nullptr);
  ASSERT_EQ(r.errors.size(), 3u);
  EXPECT_EQ(r.errors[0].line, 2);
  EXPECT_EQ(r.errors[1].line, 4);
  EXPECT_EQ(r.errors[2].line, 5);
  EXPECT_EQ(r.errors[0].file, "multi.ini");
}

TEST(ConfigTest, UnknownSectionIsAnError) {
  ConfigError e = load_error("[pgsluice]\nlisten_port = 1\n[replicas]\nfoo = bar\n");
  EXPECT_EQ(e.line, 3);
  EXPECT_EQ(e.key, "replicas");
  EXPECT_TRUE(contains(e.message, "unknown section"));
}

TEST(ConfigTest, EmptyUnknownSectionIsAnError) {
  ConfigError e = load_error("[pgsluice]\n\n[extras]\n");
  EXPECT_EQ(e.line, 3);
}

TEST(ConfigTest, KeyOutsideSectionIsAnError) {
  ConfigError e = load_error("; no section yet\nlisten_port = 6432\n");
  EXPECT_EQ(e.line, 2);
  EXPECT_EQ(e.key, "listen_port");
}

TEST(ConfigTest, SyntaxErrors) {
  ConfigError e = load_error("[pgsluice]\nlisten_port 6432\n");
  EXPECT_EQ(e.line, 2);
  EXPECT_TRUE(contains(e.message, "syntax error"));
  e = load_error("[pgsluice\nlisten_port = 6432\n");
  EXPECT_EQ(e.line, 1);
  EXPECT_TRUE(contains(e.message, "']'"));
  e = load_error("[pgsluice]\n= 5\n");
  EXPECT_EQ(e.line, 2);
}

TEST(ConfigTest, LongLinesAreNotCut) {
  // inih's default 200-byte line limit must not apply.
  const std::string query(500, 'x');
  auto c = load_ok("[pgsluice]\nserver_reset_query = " + query + "\n[databases]\n" +
                   "db = host=h connect_query='" + query + "' password=secret\n");
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->settings.server_reset_query, query);
  EXPECT_EQ(c->databases.at("db").connect_query, query);
  EXPECT_EQ(c->databases.at("db").password, "secret");
}

TEST(ConfigTest, LineNumbersAfterLongLines) {
  const std::string query(1000, 'y');
  ConfigError e = load_error("[pgsluice]\nserver_reset_query = " + query + "\n\nbad_key = 1\n");
  EXPECT_EQ(e.line, 4);
}

TEST(ConfigTest, MissingFile) {
  ConfigLoadResult r = load_config_file("/nonexistent/pgsluice.ini");
  EXPECT_EQ(r.config, nullptr);
  ASSERT_EQ(r.errors.size(), 1u);
  EXPECT_EQ(r.errors[0].file, "/nonexistent/pgsluice.ini");
  EXPECT_EQ(r.errors[0].line, 0);
  EXPECT_TRUE(contains(r.errors[0].to_string(), "/nonexistent/pgsluice.ini: "));
  EXPECT_FALSE(contains(r.errors[0].to_string(), ":0:"));
}

TEST(ConfigTest, ErrorToString) {
  EXPECT_EQ((ConfigError{"a.ini", 3, "k", "bad"}).to_string(), "a.ini:3: k: bad");
  EXPECT_EQ((ConfigError{"a.ini", 0, "", "missing"}).to_string(), "a.ini: missing");
  EXPECT_EQ((ConfigError{"a.ini", 7, "", "oops"}).to_string(), "a.ini:7: oops");
  EXPECT_EQ((ConfigError{"", 0, "k", "m"}).to_string(), "k: m");
}

TEST(ConfigTest, DatabaseLines) {
  auto c = load_ok(
      "[databases]\n"
      "app = host=db.example.com port=5433 dbname=app_prod user=app password=s3cret "
      "pool_size=12 pool_mode=transaction client_encoding=UTF8 datestyle=ISO timezone=UTC "
      "application_name=web connect_query='SELECT 1'\n"
      "local = dbname=postgres\n");
  ASSERT_NE(c, nullptr);
  ASSERT_EQ(c->databases.size(), 2u);
  const DatabaseEntry& app = c->databases.at("app");
  EXPECT_EQ(app.name, "app");
  EXPECT_EQ(app.host, "db.example.com");
  EXPECT_EQ(app.port, 5433);
  EXPECT_EQ(app.dbname, "app_prod");
  EXPECT_EQ(app.user, "app");
  EXPECT_EQ(app.password, "s3cret");
  EXPECT_EQ(app.pool_size, 12);
  EXPECT_EQ(app.pool_mode, PoolMode::transaction);
  EXPECT_EQ(app.client_encoding, "UTF8");
  EXPECT_EQ(app.datestyle, "ISO");
  EXPECT_EQ(app.timezone, "UTC");
  EXPECT_EQ(app.application_name, "web");
  EXPECT_EQ(app.connect_query, "SELECT 1");
  EXPECT_EQ(app.line, 2);
  const DatabaseEntry& local = c->databases.at("local");
  EXPECT_EQ(local.host, "");  // the Unix socket
  EXPECT_EQ(local.port, 5432);
  EXPECT_EQ(local.dbname, "postgres");
  EXPECT_FALSE(local.pool_size.has_value());
  EXPECT_FALSE(local.pool_mode.has_value());
  EXPECT_EQ(local.line, 3);
}

TEST(ConfigTest, DatabaseQuotedValues) {
  auto c = load_ok(
      "[databases]\n"
      "q = password='it''s a secret' user='we\\'re' connect_query='SET x = ''a b''; SELECT 1' "
      "host='' application_name = 'spaced out'\n");
  ASSERT_NE(c, nullptr);
  const DatabaseEntry& q = c->databases.at("q");
  EXPECT_EQ(q.password, "it's a secret");
  EXPECT_EQ(q.user, "we're");
  EXPECT_EQ(q.connect_query, "SET x = 'a b'; SELECT 1");
  EXPECT_EQ(q.host, "");
  EXPECT_EQ(q.application_name, "spaced out");
  // Not an inline comment: PgBouncer has none, so ";c" is a (bad) parameter.
  ConfigError e = load_error("[databases]\nsemi = password=a;b ;c\n");
  EXPECT_EQ(e.line, 2);
  EXPECT_EQ(e.key, "semi");
}

TEST(ConfigTest, DatabaseLineErrors) {
  ConfigError e = load_error("[databases]\nok = host=a\nbad = host=a frobnicate=1\n");
  EXPECT_EQ(e.line, 3);
  EXPECT_EQ(e.key, "bad");
  EXPECT_TRUE(contains(e.message, "frobnicate"));
  e = load_error("[databases]\nx = port=abc\n");
  EXPECT_EQ(e.line, 2);
  EXPECT_TRUE(contains(e.message, "'abc'"));
  e = load_error("[databases]\nx = pool_size=0\n");
  EXPECT_TRUE(contains(e.message, "pool_size"));
  e = load_error("[databases]\nx = pool_mode=sometimes\n");
  EXPECT_TRUE(contains(e.message, "sometimes"));
  e = load_error("[databases]\nx = password='unterminated\n");
  EXPECT_TRUE(contains(e.message, "unterminated"));
  e = load_error("[databases]\nx = host\n");
  EXPECT_TRUE(contains(e.message, "syntax error"));
  e = load_error("[databases]\npgbouncer = host=a\n");
  EXPECT_TRUE(contains(e.message, "reserved"));
}

TEST(ConfigTest, MultiHostEntries) {
  // libpq's multi-host form with PgBouncer 1.25's load_balance_hosts and libpq's
  // target_session_attrs.
  auto c = load_ok(
      "[databases]\n"
      "rw = host=a,b,/tmp port=5432,5433,5434 target_session_attrs=read-write\n"
      "ro = host=a,b port=6000 target_session_attrs=prefer-standby load_balance_hosts=random\n"
      "one = host=a\n");
  ASSERT_NE(c, nullptr);
  EXPECT_TRUE(c->warnings.empty());
  const DatabaseEntry& rw = c->databases.at("rw");
  EXPECT_EQ(rw.target_session_attrs, TargetSessionAttrs::read_write);
  EXPECT_EQ(rw.load_balance_hosts, LoadBalanceHosts::round_robin);  // PgBouncer's default
  std::vector<ServerAddress> hosts = ServerAddress::all_from(rw);
  ASSERT_EQ(hosts.size(), 3u);
  EXPECT_EQ(hosts[0].to_string(), "a:5432");
  EXPECT_EQ(hosts[1].to_string(), "b:5433");
  EXPECT_EQ(hosts[2].to_string(), "/tmp/.s.PGSQL.5434");
  const DatabaseEntry& ro = c->databases.at("ro");
  EXPECT_EQ(ro.target_session_attrs, TargetSessionAttrs::prefer_standby);
  EXPECT_EQ(ro.load_balance_hosts, LoadBalanceHosts::random);
  hosts = ServerAddress::all_from(ro);
  ASSERT_EQ(hosts.size(), 2u);
  EXPECT_EQ(hosts[1].to_string(), "b:6000");  // one port for every host
  EXPECT_EQ(ServerAddress::all_from(c->databases.at("one")).size(), 1u);

  EXPECT_TRUE(contains(load_error("[databases]\nx = host=a,b port=1,2,3\n").message,
                       "port: 3 ports for 2 hosts"));
  EXPECT_TRUE(contains(load_error("[databases]\nx = host=a target_session_attrs=master\n").message,
                       "target_session_attrs: invalid value 'master'"));
  EXPECT_TRUE(contains(load_error("[databases]\nx = host=a load_balance_hosts=yes\n").message,
                       "expected round-robin, random or disable"));
  EXPECT_TRUE(contains(load_error("[databases]\nx = host=a port=5432,x\n").message, "port:"));
}

TEST(ConfigTest, FallbackDatabase) {
  auto c = load_ok("[databases]\nexact = host=h1\n* = host=h2 port=6000\n");
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->databases.count("*"), 0u);
  ASSERT_TRUE(c->fallback_database.has_value());
  auto exact = c->find_database("exact");
  ASSERT_TRUE(exact.has_value());
  EXPECT_EQ(exact->host, "h1");
  auto other = c->find_database("other");
  ASSERT_TRUE(other.has_value());
  EXPECT_EQ(other->name, "other");
  EXPECT_EQ(other->dbname, "other");
  EXPECT_EQ(other->host, "h2");
  EXPECT_EQ(other->port, 6000);
}

TEST(ConfigTest, FallbackWithFixedDbname) {
  auto c = load_ok("[databases]\n* = dbname=shared\n");
  ASSERT_NE(c, nullptr);
  auto db = c->find_database("anything");
  ASSERT_TRUE(db.has_value());
  EXPECT_EQ(db->name, "anything");
  EXPECT_EQ(db->dbname, "shared");
}

TEST(ConfigTest, NoFallbackMeansUnknownDatabase) {
  auto c = load_ok("[databases]\nonly = host=h\n");
  ASSERT_NE(c, nullptr);
  EXPECT_FALSE(c->find_database("missing").has_value());
  // The dbname of an explicit entry stays as written (empty: the same as its name).
  EXPECT_EQ(c->find_database("only")->dbname, "");
}

TEST(ConfigTest, DatabaseNamesKeepTheirCase) {
  auto c = load_ok("[databases]\nMyDB = host=h\n");
  ASSERT_NE(c, nullptr);
  EXPECT_TRUE(c->find_database("MyDB").has_value());
  EXPECT_FALSE(c->find_database("mydb").has_value());
}

TEST(ConfigTest, UserEntriesAndPoolModeResolution) {
  auto c = load_ok(
      "[pgsluice]\npool_mode = session\ndefault_pool_size = 9\n"
      "[databases]\n"
      "tx = pool_mode=transaction pool_size=4\n"
      "plain = host=h\n"
      "[users]\n"
      "batch = pool_mode=session\n"
      "web = pool_mode=transaction max_user_connections=5\n");
  ASSERT_NE(c, nullptr);
  ASSERT_EQ(c->users.size(), 2u);
  EXPECT_EQ(c->users.at("batch").pool_mode, PoolMode::session);
  EXPECT_EQ(c->users.at("web").line, 9);
  const DatabaseEntry tx = *c->find_database("tx");
  const DatabaseEntry plain = *c->find_database("plain");
  EXPECT_EQ(c->pool_mode_for(tx, "batch"), PoolMode::session);        // the user's
  EXPECT_EQ(c->pool_mode_for(tx, "someone"), PoolMode::transaction);  // the database's
  EXPECT_EQ(c->pool_mode_for(plain, "web"), PoolMode::transaction);
  EXPECT_EQ(c->pool_mode_for(plain, "someone"), PoolMode::session);  // the settings'
  EXPECT_EQ(c->pool_size_for(tx), 4);
  EXPECT_EQ(c->pool_size_for(plain), 9);
  EXPECT_TRUE(c->warnings.empty());
  EXPECT_EQ(c->users.at("web").max_user_connections, 5);
}

TEST(ConfigTest, UserLineErrors) {
  ConfigError e = load_error("[users]\nbob = pool_mode=sometimes\n");
  EXPECT_EQ(e.line, 2);
  EXPECT_EQ(e.key, "bob");
  e = load_error("[users]\nbob = color=blue\n");
  EXPECT_TRUE(contains(e.message, "color"));
}

TEST(ConfigTest, PeersSection) {
  auto c = load_ok(
      "[pgsluice]\npeer_id = 2\ndefault_pool_size = 7\n"
      "[peers]\n"
      "1 = host=/tmp/pgsluice-1\n"
      "2 = host=10.0.0.2 port=6000 pool_size=3\n"
      "65535 = host=peer.example.com port=7000\n"
      "3 = host=/old\n"
      "3 = host='/new dir' port=6433\n");  // the later line wins, as in PgBouncer
  ASSERT_NE(c, nullptr);
  EXPECT_TRUE(c->warnings.empty());
  EXPECT_EQ(c->settings.peer_id, 2);
  ASSERT_EQ(c->peers.size(), 4u);
  const PeerEntry& one = c->peers.at(1);
  EXPECT_EQ(one.id, 1);
  EXPECT_EQ(one.host, "/tmp/pgsluice-1");
  EXPECT_EQ(one.port, 6432);  // PgBouncer's default port for peers
  EXPECT_FALSE(one.pool_size.has_value());
  EXPECT_EQ(c->pool_size_for(one), 7);  // default_pool_size
  EXPECT_EQ(one.line, 5);
  const PeerEntry& two = c->peers.at(2);  // its own entry is allowed (one [peers] for all)
  EXPECT_EQ(two.host, "10.0.0.2");
  EXPECT_EQ(two.port, 6000);
  EXPECT_EQ(c->pool_size_for(two), 3);
  EXPECT_EQ(c->peers.at(65535).host, "peer.example.com");
  EXPECT_EQ(c->peers.at(3).host, "/new dir");
  EXPECT_EQ(c->peers.at(3).port, 6433);
  // Peering is off by default, and [peers] may be empty.
  auto plain = load_ok("[peers]\n");
  ASSERT_NE(plain, nullptr);
  EXPECT_EQ(plain->settings.peer_id, 0);
  EXPECT_TRUE(plain->peers.empty());
}

TEST(ConfigTest, PeersSectionErrors) {
  const std::pair<const char*, const char*> cases[] = {
      {"0 = host=/tmp/a\n", "between 1 and 65535"},
      {"65536 = host=/tmp/a\n", "between 1 and 65535"},
      {"one = host=/tmp/a\n", "expected an integer"},
      {"1 = port=6000\n", "host was not provided for peer 1"},
      {"1 = host=/tmp/a port=0\n", "port"},
      {"1 = host=/tmp/a port=x\n", "port"},
      {"1 = host=/tmp/a pool_size=0\n", "pool_size"},
      {"1 = host=/tmp/a dbname=app\n", "unknown peer parameter 'dbname'"},
      {"1 = host='/tmp/a\n", "unterminated"},
      {"1 = host=@pgsluice\n", "abstract"},
  };
  for (const auto& [line, message] : cases) {
    ConfigError e = load_error(std::string("[peers]\n") + line);
    EXPECT_EQ(e.line, 2) << line;
    EXPECT_TRUE(contains(e.message, message)) << line << " -> " << e.to_string();
  }
  for (const char* value : {"-1", "65536", "x"}) {
    ConfigError e = load_error(std::string("[pgsluice]\npeer_id = ") + value + "\n");
    EXPECT_EQ(e.key, "peer_id") << value;
  }
}

TEST(ConfigTest, ByteOrderMarkIsSkipped) {
  auto c = load_ok("\xEF\xBB\xBF[pgsluice]\nlisten_port = 6010\n");
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->settings.listen_port, 6010);
}

class TempFile {
 public:
  TempFile(const std::string& name, const std::string& text) : path_(testing::TempDir() + name) {
    std::ofstream(path_) << text;
  }
  ~TempFile() { std::remove(path_.c_str()); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

TEST(ConfigTest, IncludeDirective) {
  TempFile inner("pgsluice_inner.ini", "listen_port = 6020\n\nbad_key = 1\n");
  ConfigLoadResult r = load_config_string(
      "[pgsluice]\n%include " + inner.path() + "\ndefault_pool_size = 2\n", "outer.ini");
  ASSERT_EQ(r.errors.size(), 1u);
  EXPECT_EQ(r.errors[0].file, inner.path());
  EXPECT_EQ(r.errors[0].line, 3);
  EXPECT_EQ(r.errors[0].key, "bad_key");

  TempFile good("pgsluice_good.ini", "listen_port = 6021\n[databases]\nd = host=x\n");
  auto c = load_ok("[pgsluice]\n%include " + good.path() + "\n[users]\nu = pool_mode=session\n");
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->settings.listen_port, 6021);
  EXPECT_EQ(c->databases.count("d"), 1u);
  EXPECT_EQ(c->users.count("u"), 1u);
}

TEST(ConfigTest, IncludeMissingFile) {
  ConfigError e = load_error("[pgsluice]\n\n%include /nonexistent/extra.ini\n");
  EXPECT_EQ(e.line, 3);
  EXPECT_EQ(e.key, "%include");
  EXPECT_TRUE(contains(e.message, "/nonexistent/extra.ini"));
}

TEST(ConfigTest, IncludeRecursionIsBounded) {
  TempFile self("pgsluice_self.ini", "");
  std::ofstream(self.path()) << "%include " << self.path() << "\n";
  ConfigLoadResult r = load_config_file(self.path());
  ASSERT_EQ(r.errors.size(), 1u);
  EXPECT_TRUE(contains(r.errors[0].message, "nested"));
}

TEST(ConfigTest, LoadFromFile) {
  TempFile f("pgsluice_file.ini", "[pgsluice]\nlisten_port = 6030\nnope = 1\n");
  ConfigLoadResult r = load_config_file(f.path());
  ASSERT_EQ(r.errors.size(), 1u);
  EXPECT_EQ(r.errors[0].to_string(), f.path() + ":3: nope: unknown setting");
}

TEST(ConfigTest, ExampleConfigLoadsWithoutWarnings) {
  ConfigLoadResult r = load_config_file(PGSLUICE_SOURCE_DIR "/conf/pgsluice.ini");
  for (const auto& e : r.errors) ADD_FAILURE() << e.to_string();
  ASSERT_NE(r.config, nullptr);
  EXPECT_TRUE(r.config->warnings.empty());
  EXPECT_FALSE(r.config->databases.empty());
  EXPECT_TRUE(r.config->fallback_database.has_value());
}

TEST(ConfigTest, PgBouncerConfigLoadsWithWarnings) {
  ConfigLoadResult r = load_config_file(PGSLUICE_SOURCE_DIR "/conf/pgbouncer-compat.ini");
  for (const auto& e : r.errors) ADD_FAILURE() << e.to_string();
  ASSERT_NE(r.config, nullptr);
  const Config& c = *r.config;
  // The PgBouncer keys of the file pgsluice does not implement (the socket options are now, and
  // server_round_robin, log_stats, syslog… since): autodb_idle_timeout, suspend_timeout, the
  // three dns_* ones, pkt_buf and sbuf_loopcnt at least.
  EXPECT_GE(c.warnings.size(), 7u);
  for (const auto& w : c.warnings) {
    EXPECT_TRUE(contains(w, "pgbouncer-compat.ini:")) << w;
    EXPECT_TRUE(contains(w, "does not implement yet")) << w;
  }
  EXPECT_EQ(c.settings.listen_port, 6432);
  EXPECT_EQ(c.settings.pool_mode, PoolMode::transaction);
  EXPECT_FALSE(c.databases.empty());
}

TEST(ConfigTest, ServerTlsChangedOnlyWhenServersWouldLogInDifferently) {
  // RELOAD / SET replace the servers only then (Worker::apply_config).
  Settings was;
  was.server_tls.sslmode = SslMode::disable;
  Settings now = was;
  now.server_tls.ca_file = "/etc/ca.pem";  // TLS off before and after: nothing to replace
  EXPECT_FALSE(server_tls_changed(was, now));
  now.server_tls.sslmode = SslMode::require;
  EXPECT_TRUE(server_tls_changed(was, now));
  EXPECT_TRUE(server_tls_changed(now, was));  // and back
  was = now;
  EXPECT_FALSE(server_tls_changed(was, now));
  now.query_timeout = milliseconds(5);  // not a TLS setting
  EXPECT_FALSE(server_tls_changed(was, now));
  now.server_tls.protocols = "tlsv1.3";
  EXPECT_TRUE(server_tls_changed(was, now));
  now = was;
  now.server_tls_direct = true;
  EXPECT_TRUE(server_tls_changed(was, now));
  now = was;
  now.client_tls.sslmode = SslMode::require;  // the client side is not the servers'
  EXPECT_FALSE(server_tls_changed(was, now));
}

}  // namespace
}  // namespace pgsluice
