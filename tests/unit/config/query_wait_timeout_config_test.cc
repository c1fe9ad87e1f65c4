// query_wait_timeout on [databases] and [users] lines (PgBouncer 1.26, #1449): parsed as a
// duration, -1 meaning "not set", and resolved user over database over main section.
#include <gtest/gtest.h>

#include <string>

#include "pooler/config/config.h"
#include "tests/unit/config/load_ok.h"

namespace pgsluice {
namespace {

using std::chrono::milliseconds;

constexpr const char* kConfig =
    "[pgsluice]\n"
    "query_wait_timeout = 60\n"
    "[databases]\n"
    "quick = host=h query_wait_timeout=2\n"
    "patient = host=h query_wait_timeout=0\n"
    "unset = host=h query_wait_timeout=-1\n"
    "plain = host=h\n"
    "[users]\n"
    "hurried = query_wait_timeout=500ms\n"
    "unhurried = query_wait_timeout=0\n"
    "undecided = query_wait_timeout=-1\n"
    "other = pool_mode=session\n";

TEST(QueryWaitTimeoutConfig, DatabaseAndUserLinesAreParsed) {
  auto c = load_ok(kConfig);
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->databases.at("quick").query_wait_timeout, milliseconds(2000));
  EXPECT_EQ(c->databases.at("patient").query_wait_timeout, milliseconds(0));
  EXPECT_FALSE(c->databases.at("unset").query_wait_timeout.has_value());  // -1: not set
  EXPECT_FALSE(c->databases.at("plain").query_wait_timeout.has_value());
  EXPECT_EQ(c->users.at("hurried").query_wait_timeout, milliseconds(500));
  EXPECT_EQ(c->users.at("unhurried").query_wait_timeout, milliseconds(0));
  EXPECT_FALSE(c->users.at("undecided").query_wait_timeout.has_value());
  EXPECT_FALSE(c->users.at("other").query_wait_timeout.has_value());
  EXPECT_TRUE(c->warnings.empty());
}

TEST(QueryWaitTimeoutConfig, UserOverDatabaseOverMainSection) {
  auto c = load_ok(kConfig);
  ASSERT_NE(c, nullptr);
  const DatabaseEntry quick = *c->find_database("quick");
  const DatabaseEntry patient = *c->find_database("patient");
  const DatabaseEntry unset = *c->find_database("unset");
  const DatabaseEntry plain = *c->find_database("plain");
  // The user's, wherever it connects, 0 included (no limit even where the database has one).
  EXPECT_EQ(c->query_wait_timeout_for(quick, "hurried"), milliseconds(500));
  EXPECT_EQ(c->query_wait_timeout_for(plain, "hurried"), milliseconds(500));
  EXPECT_EQ(c->query_wait_timeout_for(quick, "unhurried"), milliseconds(0));
  // Without one of the user's: the database's, 0 included.
  EXPECT_EQ(c->query_wait_timeout_for(quick, "other"), milliseconds(2000));
  EXPECT_EQ(c->query_wait_timeout_for(quick, "undecided"), milliseconds(2000));
  EXPECT_EQ(c->query_wait_timeout_for(quick, "nobody"), milliseconds(2000));
  EXPECT_EQ(c->query_wait_timeout_for(patient, "nobody"), milliseconds(0));
  // Neither: the main section's.
  EXPECT_EQ(c->query_wait_timeout_for(unset, "nobody"), milliseconds(60'000));
  EXPECT_EQ(c->query_wait_timeout_for(plain, "undecided"), milliseconds(60'000));
}

TEST(QueryWaitTimeoutConfig, BadValuesAreErrorsOfTheirLine) {
  for (const std::string text : {"[databases]\nx = host=h query_wait_timeout=soon\n",
                                 "[users]\nx = query_wait_timeout=-5\n"}) {
    ConfigLoadResult r = load_config_string(text, "test.ini");
    ASSERT_EQ(r.errors.size(), 1u) << text;
    EXPECT_EQ(r.errors[0].line, 2) << text;
    EXPECT_NE(r.errors[0].message.find("query_wait_timeout"), std::string::npos)
        << r.errors[0].message;
  }
}

}  // namespace
}  // namespace pgsluice
