// auth_ident_file: the pg_ident.conf parser (PgBouncer 1.25's subset) and map lookups, and the
// hba rules' map= option that names a map.
#include <gtest/gtest.h>

#include "pooler/auth/hba.h"
#include "pooler/auth/ident.h"

namespace pgsluice {
namespace {

std::shared_ptr<const IdentMaps> parse_ident_ok(const std::string& text) {
  IdentLoadResult r = parse_ident_text(text, "/etc/pgsluice/ident.conf");
  for (const auto& e : r.errors) ADD_FAILURE() << e;
  return r.maps;
}

std::string parse_ident_error(const std::string& text) {
  IdentLoadResult r = parse_ident_text(text, "/etc/pgsluice/ident.conf");
  EXPECT_EQ(r.maps, nullptr);
  EXPECT_EQ(r.errors.size(), 1u);
  return r.errors.empty() ? std::string() : r.errors.front();
}

TEST(AuthIdent, MapsNamesAndTheAllKeyword) {
  // PgBouncer's own test file: quoted names lose nothing but their quotes.
  auto maps = parse_ident_ok(
      "# MAPNAME  SYSTEM-USERNAME  PG-USERNAME\n"
      "test\t\tpgbouncer.acme.org\tsomeuser\n"
      "test\t\tpgbouncer.acme.org\tanotheruser\n"
      "\n"
      "test2\t\t\"bouncer\"\t\tall   # any user\n"
      "test2\t\tpgbouncer.acme.org\t\"anotheruser\"\n"
      "quoted  ops  \"all\"\n");
  ASSERT_NE(maps, nullptr);
  EXPECT_TRUE(maps->permits("test", "pgbouncer.acme.org", "someuser"));
  EXPECT_TRUE(maps->permits("test", "pgbouncer.acme.org", "anotheruser"));
  EXPECT_FALSE(maps->permits("test", "pgbouncer.acme.org", "bouncer"));
  EXPECT_FALSE(maps->permits("test", "bouncer", "someuser"));
  EXPECT_TRUE(maps->permits("test2", "bouncer", "someuser"));
  EXPECT_TRUE(maps->permits("test2", "bouncer", "postgres"));
  EXPECT_FALSE(maps->permits("test2", "pgbouncer.acme.org", "someuser"));
  EXPECT_TRUE(maps->permits("test2", "pgbouncer.acme.org", "anotheruser"));
  // A quoted "all" is a user named all.
  EXPECT_TRUE(maps->permits("quoted", "ops", "all"));
  EXPECT_FALSE(maps->permits("quoted", "ops", "app"));
  // No such map permits nothing.
  EXPECT_FALSE(maps->permits("nomap", "bouncer", "bouncer"));
  EXPECT_TRUE(maps->has("test2"));
  EXPECT_FALSE(maps->has("nomap"));
}

TEST(AuthIdent, BadLinesMakeTheFileInvalid) {
  EXPECT_EQ(parse_ident_error("map os\n"),
            "/etc/pgsluice/ident.conf:1: expected MAPNAME SYSTEM-USERNAME PG-USERNAME");
  EXPECT_EQ(parse_ident_error("ok a b\nmap os pg extra\n"),
            "/etc/pgsluice/ident.conf:2: expected MAPNAME SYSTEM-USERNAME PG-USERNAME");
  EXPECT_EQ(parse_ident_error("map os a,b\n"),
            "/etc/pgsluice/ident.conf:1: a field of an ident map line cannot be a list");
  EXPECT_EQ(parse_ident_error("map /^(.*)@example\\.com$ \\1\n"),
            "/etc/pgsluice/ident.conf:1: regular expressions are not supported in "
            "SYSTEM-USERNAME (as in PgBouncer)");
  EXPECT_EQ(parse_ident_error("map os +admins\n"),
            "/etc/pgsluice/ident.conf:1: group membership and regular expressions are not "
            "supported in PG-USERNAME");
  EXPECT_EQ(parse_ident_error("map \"os pg\n"),
            "/etc/pgsluice/ident.conf:1: unterminated quoted string");
}

TEST(AuthIdent, HbaMapOption) {
  HbaLoadResult r = parse_hba_text(
      "local all all peer map=mymap\nhostssl p0 all 0.0.0.0/0 cert map=test\n"
      "local all all peer\n",
      "/etc/pgsluice/hba.conf");
  ASSERT_TRUE(r.errors.empty()) << r.errors.front();
  ASSERT_EQ(r.rules->rules().size(), 3u);
  EXPECT_EQ(r.rules->rules()[0].map, "mymap");
  EXPECT_EQ(r.rules->rules()[1].map, "test");
  EXPECT_EQ(r.rules->rules()[2].map, "");
}

}  // namespace
}  // namespace pgsluice
