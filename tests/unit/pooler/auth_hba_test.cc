// auth_hba_file: the pg_hba.conf parser (PgBouncer's subset) and first-match evaluation.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>

#include <map>

#include "pooler/auth/hba.h"

namespace pgsluice {
namespace {

sockaddr_storage ip(const char* text) {
  sockaddr_storage s{};
  auto* in = reinterpret_cast<sockaddr_in*>(&s);
  if (inet_pton(AF_INET, text, &in->sin_addr) == 1) {
    in->sin_family = AF_INET;
    return s;
  }
  auto* in6 = reinterpret_cast<sockaddr_in6*>(&s);
  EXPECT_EQ(inet_pton(AF_INET6, text, &in6->sin6_addr), 1) << text;
  in6->sin6_family = AF_INET6;
  return s;
}

std::shared_ptr<const HbaRules> parse_hba_ok(const std::string& text,
                                             const std::map<std::string, std::string>& files = {}) {
  HbaFileReader reader = [&files](const std::string& path, std::string& out, std::string& err) {
    auto it = files.find(path);
    if (it == files.end()) {
      err = "cannot open file: No such file or directory";
      return false;
    }
    out = it->second;
    return true;
  };
  HbaLoadResult r = parse_hba_text(text, "/etc/pgsluice/hba.conf", reader);
  for (const auto& e : r.errors) ADD_FAILURE() << e;
  return r.rules;
}

std::string parse_error(const std::string& text) {
  HbaLoadResult r = parse_hba_text(text, "/etc/pgsluice/hba.conf", [](auto&, auto&, auto& err) {
    err = "cannot open file: No such file or directory";
    return false;
  });
  EXPECT_EQ(r.rules, nullptr);
  EXPECT_EQ(r.errors.size(), 1u);
  return r.errors.empty() ? std::string() : r.errors.front();
}

// The line of the matching rule, 0 for none.
int match(const HbaRules& rules, const char* addr, const char* db, const char* user,
          bool tls = false, bool physical_replication = false) {
  sockaddr_storage s = ip(addr);
  HbaConnection c{.local = false,
                  .tls = tls,
                  .address = reinterpret_cast<const sockaddr*>(&s),
                  .database = db,
                  .user = user,
                  .physical_replication = physical_replication};
  const HbaRule* r = rules.match(c);
  return r == nullptr ? 0 : r->line;
}

int match_local(const HbaRules& rules, const char* db, const char* user) {
  HbaConnection c{.local = true, .tls = false, .address = nullptr, .database = db, .user = user};
  const HbaRule* r = rules.match(c);
  return r == nullptr ? 0 : r->line;
}

TEST(AuthHba, FirstMatchWins) {
  auto rules = parse_hba_ok(
      "# TYPE DATABASE USER ADDRESS METHOD\n"
      "host    app      bob   10.0.0.0/8   reject\n"
      "host    app      all   10.0.0.0/8   scram-sha-256\n"
      "host    all      all   0.0.0.0/0    md5\n");
  ASSERT_NE(rules, nullptr);
  ASSERT_EQ(rules->rules().size(), 3u);
  EXPECT_EQ(match(*rules, "10.1.2.3", "app", "bob"), 2);
  EXPECT_EQ(rules->rules()[0].method, HbaMethod::reject);
  EXPECT_EQ(match(*rules, "10.1.2.3", "app", "alice"), 3);
  EXPECT_EQ(match(*rules, "192.168.0.1", "app", "bob"), 4);
  EXPECT_EQ(match(*rules, "::1", "app", "bob"), 0);  // no IPv6 rule
}

TEST(AuthHba, ConnectionTypes) {
  auto rules = parse_hba_ok(
      "local     all all                peer\n"
      "hostssl   all all 127.0.0.1/32   cert\n"
      "hostnossl all all 127.0.0.1/32   reject\n");
  ASSERT_NE(rules, nullptr);
  EXPECT_EQ(match_local(*rules, "app", "app"), 1);
  EXPECT_EQ(match(*rules, "127.0.0.1", "app", "app", /*tls=*/true), 2);
  EXPECT_EQ(match(*rules, "127.0.0.1", "app", "app", /*tls=*/false), 3);
  EXPECT_EQ(rules->rules()[0].method, HbaMethod::peer);
  EXPECT_EQ(rules->rules()[1].clientcert, HbaClientCert::verify_full);  // cert implies it
}

TEST(AuthHba, ListsKeywordsAndQuotes) {
  auto rules = parse_hba_ok(
      "host app,\"all\" u1, u2 127.0.0.1/32 trust\n"  // a quoted all is a database named all
      "host sameuser all 127.0.0.1/32 md5\n"
      "host \"my db\" \"Mixed Case\" 127.0.0.1/32 password # comment\n"
      "host replication all 127.0.0.1/32 trust\n");
  ASSERT_NE(rules, nullptr);
  EXPECT_EQ(match(*rules, "127.0.0.1", "app", "u1"), 1);
  EXPECT_EQ(match(*rules, "127.0.0.1", "all", "u2"), 1);
  EXPECT_EQ(match(*rules, "127.0.0.1", "other", "u1"), 0);
  EXPECT_EQ(match(*rules, "127.0.0.1", "carol", "carol"), 2);
  EXPECT_EQ(match(*rules, "127.0.0.1", "my db", "Mixed Case"), 3);
  EXPECT_EQ(match(*rules, "127.0.0.1", "my db", "mixed case"), 0);  // names are case-sensitive
  EXPECT_EQ(match(*rules, "127.0.0.1", "replication", "x"), 0);     // only physical replication
  EXPECT_EQ(rules->rules()[2].method, HbaMethod::password);
}

// PostgreSQL's check_db, which PgBouncer's hba_eval follows: a physical walsender (no database)
// matches only the `replication` keyword; a logical one (replication=database) is matched by its
// database like any connection, and the keyword never matches it.
TEST(AuthHba, ReplicationKeyword) {
  auto rules = parse_hba_ok(
      "host all         bob  127.0.0.1/32 reject\n"
      "host replication bob  127.0.0.1/32 trust\n"
      "host replication,app carol 127.0.0.1/32 md5\n"
      "host \"replication\" all 127.0.0.1/32 password\n");
  ASSERT_NE(rules, nullptr);
  const bool physical = true;
  // `all` on line 1 does not catch bob's physical connection; line 2 does.
  EXPECT_EQ(match(*rules, "127.0.0.1", "replication", "bob", false, physical), 2);
  EXPECT_EQ(match(*rules, "127.0.0.1", "app", "bob", false, physical), 2);  // any dbname
  EXPECT_EQ(match(*rules, "127.0.0.1", "app", "bob"), 1);                   // normal or logical
  EXPECT_EQ(match(*rules, "127.0.0.1", "app", "carol", false, physical), 3);
  EXPECT_EQ(match(*rules, "127.0.0.1", "app", "carol"), 3);  // by the name app
  // The keyword is no database name; a quoted "replication" is, and never a physical match.
  EXPECT_EQ(match(*rules, "127.0.0.1", "replication", "carol"), 4);
  EXPECT_EQ(match(*rules, "127.0.0.1", "x", "dave", false, physical), 0);
  EXPECT_EQ(match(*rules, "127.0.0.1", "x", "dave"), 0);
}

TEST(AuthHba, AddressForms) {
  auto rules = parse_hba_ok(
      "host all a 192.168.1.0 255.255.255.0 trust\n"
      "host all b 2001:db8::/32 trust\n"
      "host all c all trust\n"
      "host all d 10.0.0.1/32 trust\n"
      "host all e ::ffff:0:0/96 trust\n");
  ASSERT_NE(rules, nullptr);
  EXPECT_EQ(match(*rules, "192.168.1.77", "x", "a"), 1);
  EXPECT_EQ(match(*rules, "192.168.2.77", "x", "a"), 0);
  EXPECT_EQ(match(*rules, "2001:db8:1::5", "x", "b"), 2);
  EXPECT_EQ(match(*rules, "2001:db9::5", "x", "b"), 0);
  EXPECT_EQ(match(*rules, "8.8.8.8", "x", "c"), 3);
  EXPECT_EQ(match(*rules, "::1", "x", "c"), 3);
  EXPECT_EQ(match(*rules, "10.0.0.1", "x", "d"), 4);
  EXPECT_EQ(match(*rules, "10.0.0.2", "x", "d"), 0);
  // A listener on "::" sees IPv4 clients as ::ffff:a.b.c.d: they match IPv4 rules.
  EXPECT_EQ(match(*rules, "::ffff:10.0.0.1", "x", "d"), 4);
  // An IPv4 client matches no IPv6 rule, not even ::/0 or the mapped range (PostgreSQL,
  // PgBouncer).
  EXPECT_EQ(match(*rules, "1.2.3.4", "x", "e"), 0);
  auto any6 = parse_hba_ok("host all all ::/0 md5\nhost all all 0.0.0.0/0 trust\n");
  ASSERT_NE(any6, nullptr);
  EXPECT_EQ(match(*any6, "127.0.0.1", "x", "y"), 2);
  EXPECT_EQ(match(*any6, "::1", "x", "y"), 1);
}

TEST(AuthHba, HostBitsOutsideTheMaskAreIgnored) {
  auto rules = parse_hba_ok("host all all 10.1.2.3/8 trust\n");
  ASSERT_NE(rules, nullptr);
  EXPECT_EQ(match(*rules, "10.200.0.1", "x", "y"), 1);
}

TEST(AuthHba, AtFileListsRelativeToTheHbaFile) {
  auto rules = parse_hba_ok("host @dbs.txt @/abs/users.txt 127.0.0.1/32 scram-sha-256\n",
                            {{"/etc/pgsluice/dbs.txt", "app  # the app\nreports,\"odd name\"\n"},
                             {"/abs/users.txt", "alice\n@more.txt\n"},
                             {"/abs/more.txt", "bob"}});
  ASSERT_NE(rules, nullptr);
  EXPECT_EQ(match(*rules, "127.0.0.1", "app", "alice"), 1);
  EXPECT_EQ(match(*rules, "127.0.0.1", "reports", "bob"), 1);
  EXPECT_EQ(match(*rules, "127.0.0.1", "odd name", "bob"), 1);
  EXPECT_EQ(match(*rules, "127.0.0.1", "app", "carol"), 0);
  EXPECT_EQ(rules->rules()[0].method, HbaMethod::scram_sha_256);
}

TEST(AuthHba, LineContinuationKeepsTheFirstLineNumber) {
  auto rules =
      parse_hba_ok("\n# x\nhost all all \\\n 127.0.0.1/32 \\\n trust\nlocal all all reject\n");
  ASSERT_NE(rules, nullptr);
  ASSERT_EQ(rules->rules().size(), 2u);
  EXPECT_EQ(rules->rules()[0].line, 3);
  EXPECT_EQ(rules->rules()[1].line, 6);
}

TEST(AuthHba, ClientCertOption) {
  auto rules = parse_hba_ok(
      "hostssl all a 127.0.0.1/32 scram-sha-256 clientcert=verify-ca\n"
      "hostssl all b 127.0.0.1/32 md5 clientcert=verify-full\n");
  ASSERT_NE(rules, nullptr);
  EXPECT_EQ(rules->rules()[0].clientcert, HbaClientCert::verify_ca);
  EXPECT_EQ(rules->rules()[1].clientcert, HbaClientCert::verify_full);
}

TEST(AuthHba, ErrorsNameFileAndLine) {
  EXPECT_EQ(parse_error("\nhost all +admins 127.0.0.1/32 trust\n"),
            "/etc/pgsluice/hba.conf:2: \"+admins\": +group is not supported (as in PgBouncer: "
            "pgsluice does not know role membership)");
  EXPECT_EQ(parse_error("host all all db.example.com trust\n"),
            "/etc/pgsluice/hba.conf:1: invalid IP address \"db.example.com\" (host names are "
            "not supported, as in PgBouncer)");
  EXPECT_EQ(parse_error("host all all 127.0.0.1/33 trust\n"),
            "/etc/pgsluice/hba.conf:1: invalid CIDR mask in address \"127.0.0.1/33\"");
  EXPECT_EQ(parse_error("host all all 127.0.0.1 trust\n"),
            "/etc/pgsluice/hba.conf:1: invalid IP mask \"trust\" for address \"127.0.0.1\"");
  EXPECT_EQ(parse_error("host all all 127.0.0.1/32 ldap\n"),
            "/etc/pgsluice/hba.conf:1: authentication method \"ldap\" is not supported by "
            "pgsluice");
  EXPECT_EQ(parse_error("host all all 127.0.0.1/32 md6\n"),
            "/etc/pgsluice/hba.conf:1: invalid authentication method \"md6\"");
  EXPECT_EQ(parse_error("hots all all 127.0.0.1/32 md5\n"),
            "/etc/pgsluice/hba.conf:1: invalid connection type \"hots\": expected local, host, "
            "hostssl or hostnossl");
  EXPECT_EQ(parse_error("host all all 127.0.0.1/32\n"),
            "/etc/pgsluice/hba.conf:1: too few fields: expected host DATABASE USER ADDRESS "
            "METHOD");
  EXPECT_EQ(parse_error("host all all 10.0.0.0 255.0.0.0\n"),
            "/etc/pgsluice/hba.conf:1: missing authentication method");
  EXPECT_EQ(parse_error("host all all 127.0.0.1/32 md5 clientcert=verify-ca\n"),
            "/etc/pgsluice/hba.conf:1: clientcert can only be configured for \"hostssl\" rows");
  EXPECT_EQ(parse_error("local all all peer map=\n"),
            "/etc/pgsluice/hba.conf:1: authentication option \"map\" needs a map name");
  EXPECT_EQ(parse_error("host \"unterminated all 127.0.0.1/32 trust\n"),
            "/etc/pgsluice/hba.conf:1: unterminated quoted string");
  EXPECT_EQ(parse_error("host app, all 127.0.0.1/32 trust, \n"),
            "/etc/pgsluice/hba.conf:1: a list ends with ','");
  EXPECT_EQ(parse_error("host app,,b all 127.0.0.1/32 trust\n"),
            "/etc/pgsluice/hba.conf:1: empty name in a comma-separated list");
  // PgBouncer's reading (one list: app, all) leaves too few fields, and PgBouncer skips the
  // line; PostgreSQL would read app and all as two fields. An error, not either meaning.
  EXPECT_EQ(parse_error("host app , all 127.0.0.1/32 trust\n"),
            "/etc/pgsluice/hba.conf:1: too few fields: expected host DATABASE USER ADDRESS "
            "METHOD");
  EXPECT_EQ(parse_error("host samerole all 127.0.0.1/32 trust\n"),
            "/etc/pgsluice/hba.conf:1: \"samerole\" is not supported (as in PgBouncer: "
            "pgsluice does not know role membership)");
  EXPECT_EQ(parse_error("host all @missing.txt 127.0.0.1/32 trust\n"),
            "/etc/pgsluice/hba.conf:1: @missing.txt: /etc/pgsluice/missing.txt: cannot open "
            "file: No such file or directory");
  EXPECT_EQ(parse_error("host all all samenet trust\n"),
            "/etc/pgsluice/hba.conf:1: \"samenet\" is not supported (as in PgBouncer): use an "
            "IP address range");
}

// Lines PostgreSQL refuses and PgBouncer takes (its own test rules have each): taken, as
// PgBouncer reads them, with a warning where PostgreSQL would read them otherwise.
TEST(AuthHba, BlanksAroundListCommasKeepTheList) {
  auto rules = parse_hba_ok(
      "host  tmp1,all  user1,user2 , user3   16.0.0.0/8  md5\n"
      "host  a ,b      u4 ,u5                17.0.0.0/8  md5 # ,comment\n");
  ASSERT_NE(rules, nullptr);
  ASSERT_EQ(rules->rules().size(), 2u);
  EXPECT_EQ(match(*rules, "16.1.2.3", "x", "user3"), 1);
  EXPECT_EQ(match(*rules, "16.1.2.3", "x", "user1"), 1);
  EXPECT_EQ(match(*rules, "16.1.2.3", "x", "user4"), 0);
  EXPECT_EQ(match(*rules, "17.1.2.3", "b", "u5"), 2);
  EXPECT_EQ(match(*rules, "17.1.2.3", "a", "u4"), 2);
  EXPECT_EQ(match(*rules, "17.1.2.3", "c", "u4"), 0);
}

TEST(AuthHba, QuotedNamesWithDoubledQuotesBlanksAndCommasAndTheEmptyName) {
  auto rules = parse_hba_ok(
      "host \"q1\"\"q2\"  \"a , b\"  19.0.0.0/8  md5\n"
      "host \"\"  all  20.0.0.0/8  md5\n");
  ASSERT_NE(rules, nullptr);
  EXPECT_EQ(match(*rules, "19.0.0.1", "q1\"q2", "a , b"), 1);
  EXPECT_EQ(match(*rules, "19.0.0.1", "q1q2", "a , b"), 0);
  EXPECT_EQ(match(*rules, "19.0.0.1", "q1\"q2", "a"), 0);
  EXPECT_EQ(match(*rules, "20.0.0.1", "app", "app"), 0);  // "" is nobody's name
}

TEST(AuthHba, CertAndPeerOnAnyLineAsPgBouncerWithAWarning) {
  HbaLoadResult r = parse_hba_text(
      "host all all 19.0.0.0/8 cert\nhostnossl all all 0.0.0.0/0 peer\nlocal all all cert\n"
      "hostssl all all 0.0.0.0/0 cert\nlocal all all peer\n",
      "h");
  ASSERT_TRUE(r.errors.empty()) << r.errors.front();
  ASSERT_NE(r.rules, nullptr);
  ASSERT_EQ(r.rules->rules().size(), 5u);
  EXPECT_EQ(r.rules->rules()[0].method, HbaMethod::cert);
  EXPECT_EQ(r.rules->rules()[0].clientcert, HbaClientCert::verify_full);
  EXPECT_EQ(r.rules->rules()[1].method, HbaMethod::peer);
  // The line matches a connection without TLS (which the login then refuses).
  EXPECT_EQ(match(*r.rules, "19.0.0.1", "app", "app", /*tls=*/false), 1);
  ASSERT_EQ(r.warnings.size(), 3u);
  EXPECT_EQ(r.warnings[0],
            "h:1: cert on a host line (PostgreSQL allows it on hostssl only): a connection "
            "without TLS that matches it is refused, as in PgBouncer");
  EXPECT_EQ(r.warnings[1],
            "h:2: peer on a hostnossl line (PostgreSQL allows it on local only): a TCP "
            "connection that matches it is refused, as in PgBouncer");
  EXPECT_TRUE(r.warnings[2].starts_with("h:3: cert on a local line")) << r.warnings[2];
}

TEST(AuthHba, MapWithAnotherMethodHasNoEffectAsInPgBouncer) {
  HbaLoadResult r = parse_hba_text("host all all 127.0.0.1/32 md5 map=omicron\n", "h");
  ASSERT_TRUE(r.errors.empty()) << r.errors.front();
  ASSERT_EQ(r.warnings.size(), 1u);
  EXPECT_EQ(r.warnings[0],
            "h:1: map=omicron has no effect with md5 (only with peer and cert), as in PgBouncer");
}

TEST(AuthHba, EveryBadLineIsReportedAndNoRulesAreReturned) {
  HbaLoadResult r = parse_hba_text(
      "host all all 127.0.0.1/32 trust\nhost all all x trust\nlocal all all nope\n", "h");
  EXPECT_EQ(r.rules, nullptr);
  ASSERT_EQ(r.errors.size(), 2u);
  EXPECT_TRUE(r.errors[0].starts_with("h:2: ")) << r.errors[0];
  EXPECT_TRUE(r.errors[1].starts_with("h:3: ")) << r.errors[1];
}

TEST(AuthHba, EmptyFileRejectsEverything) {
  auto rules = parse_hba_ok("# nothing\n\n");
  ASSERT_NE(rules, nullptr);
  EXPECT_EQ(match(*rules, "127.0.0.1", "app", "app"), 0);
  EXPECT_EQ(match_local(*rules, "app", "app"), 0);
}

TEST(AuthHba, HostNames) {
  sockaddr_storage s = ip("127.0.0.1");
  EXPECT_EQ(hba_host_name(reinterpret_cast<sockaddr*>(&s)), "127.0.0.1");
  s = ip("::1");
  EXPECT_EQ(hba_host_name(reinterpret_cast<sockaddr*>(&s)), "::1");
  EXPECT_EQ(hba_host_name(nullptr), "[local]");
}

}  // namespace
}  // namespace pgsluice
