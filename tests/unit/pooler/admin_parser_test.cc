// The admin console's command grammar: case, quoting, the optional ';', SET's forms, and what
// is not a command.
#include <gtest/gtest.h>

#include "pooler/admin/parser.h"

namespace pgsluice {
namespace {

AdminCommand parse_ok(std::string_view sql) {
  AdminParseResult r = parse_admin_command(sql);
  EXPECT_TRUE(r.command.has_value()) << sql;
  return r.command.value_or(AdminCommand{});
}

TEST(AdminParser, VerbsAreCaseInsensitiveAndShowSubjectsUpperCased) {
  AdminCommand c = parse_ok("show pools");
  EXPECT_EQ(c.verb, "SHOW");
  EXPECT_EQ(c.arg, "POOLS");
  EXPECT_TRUE(c.has_arg);
  c = parse_ok("  Show   Stats_Totals ;  ");
  EXPECT_EQ(c.verb, "SHOW");
  EXPECT_EQ(c.arg, "STATS_TOTALS");
  c = parse_ok("RELOAD;");
  EXPECT_EQ(c.verb, "RELOAD");
  EXPECT_FALSE(c.has_arg);
}

TEST(AdminParser, DatabaseNamesKeepTheirCase) {
  AdminCommand c = parse_ok("pause MyDb");
  EXPECT_EQ(c.verb, "PAUSE");
  EXPECT_EQ(c.arg, "MyDb");
  c = parse_ok("KILL \"Odd Name\"\"x\"");
  EXPECT_EQ(c.arg, "Odd Name\"x");
  c = parse_ok("kill_client 42");
  EXPECT_EQ(c.verb, "KILL_CLIENT");
  EXPECT_EQ(c.arg, "42");
  c = parse_ok("shutdown wait_for_clients");
  EXPECT_EQ(c.arg, "WAIT_FOR_CLIENTS");
}

TEST(AdminParser, SetForms) {
  AdminCommand c = parse_ok("SET default_pool_size = 7");
  EXPECT_EQ(c.verb, "SET");
  EXPECT_EQ(c.set_key, "default_pool_size");
  EXPECT_EQ(c.set_value, "7");
  c = parse_ok("set Server_Reset_Query TO 'DISCARD ALL';");
  EXPECT_EQ(c.set_key, "server_reset_query");
  EXPECT_EQ(c.set_value, "DISCARD ALL");
  c = parse_ok("set query_wait_timeout=0.5");
  EXPECT_EQ(c.set_value, "0.5");
  c = parse_ok("set application_name = 'it''s'");
  EXPECT_EQ(c.set_value, "it's");
}

TEST(AdminParser, EmptyQueries) {
  for (std::string_view sql : {"", "   ", ";", "  ;  "}) {
    AdminParseResult r = parse_admin_command(sql);
    EXPECT_TRUE(r.empty) << "'" << sql << "'";
    EXPECT_FALSE(r.command.has_value());
  }
}

TEST(AdminParser, SyntaxErrors) {
  for (std::string_view sql : {"show pools stats", "show pools;;", "select 1+1;", "\"SHOW\" pools",
                               "set x", "set x = ", "set x = 'unterminated", "pause a b",
                               "show pools; show stats", "kill \"unterminated", "pause -x"}) {
    AdminParseResult r = parse_admin_command(sql);
    EXPECT_FALSE(r.command.has_value()) << sql;
    EXPECT_FALSE(r.empty) << sql;
  }
  // A word-shaped command parses; the command table (admin_commands.cc) decides if it exists.
  EXPECT_TRUE(parse_admin_command("select").command.has_value());
  EXPECT_TRUE(parse_admin_command("select 1;").command.has_value());
}

}  // namespace
}  // namespace pgsluice
