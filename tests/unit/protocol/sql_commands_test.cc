// The startup `options` value and the DEALLOCATE / DISCARD ALL recognizer, byte by byte.
#include <gtest/gtest.h>

#include "pgsluice/protocol/deallocate.h"
#include "pgsluice/protocol/startup.h"

namespace pgsluice::protocol {
namespace {

TEST(StartupOptions, DashCWithSpace) {
  std::vector<std::pair<std::string, std::string>> s;
  ASSERT_TRUE(parse_startup_options("-c search_path=foo -c geqo=off", s));
  ASSERT_EQ(s.size(), 2u);
  EXPECT_EQ(s[0], (std::pair<std::string, std::string>{"search_path", "foo"}));
  EXPECT_EQ(s[1], (std::pair<std::string, std::string>{"geqo", "off"}));
}

TEST(StartupOptions, DashCJoinedAndDoubleDash) {
  std::vector<std::pair<std::string, std::string>> s;
  ASSERT_TRUE(parse_startup_options("-cstatement_timeout=5s --work-mem=64MB", s));
  ASSERT_EQ(s.size(), 2u);
  EXPECT_EQ(s[0].first, "statement_timeout");
  EXPECT_EQ(s[0].second, "5s");
  EXPECT_EQ(s[1].first, "work_mem");  // dashes in a --name become underscores
  EXPECT_EQ(s[1].second, "64MB");
}

TEST(StartupOptions, BackslashEscapesSpace) {
  std::vector<std::pair<std::string, std::string>> s;
  ASSERT_TRUE(parse_startup_options(R"(-c search_path=a,\ b)", s));
  ASSERT_EQ(s.size(), 1u);
  EXPECT_EQ(s[0].second, "a, b");
}

TEST(StartupOptions, EmptyIsFine) {
  std::vector<std::pair<std::string, std::string>> s;
  EXPECT_TRUE(parse_startup_options("", s));
  EXPECT_TRUE(parse_startup_options("   ", s));
  EXPECT_TRUE(s.empty());
}

TEST(StartupOptions, RejectsOtherSwitches) {
  std::vector<std::pair<std::string, std::string>> s;
  EXPECT_FALSE(parse_startup_options("-d 5", s));
  EXPECT_FALSE(parse_startup_options("-c", s));
  EXPECT_FALSE(parse_startup_options("-c noequals", s));
  EXPECT_FALSE(parse_startup_options("-c =value", s));
  EXPECT_FALSE(parse_startup_options("plainword", s));
}

TEST(DeallocateCommand, Recognized) {
  using K = DeallocateCommand::Kind;
  EXPECT_EQ(parse_deallocate_command("DEALLOCATE pdo_stmt_1").kind, K::deallocate_name);
  EXPECT_EQ(parse_deallocate_command("  deallocate prepare \"Mixed\";").name, "Mixed");
  EXPECT_EQ(parse_deallocate_command("DEALLOCATE ALL").kind, K::deallocate_all);
  EXPECT_EQ(parse_deallocate_command("discard all;").kind, K::discard_all);
  EXPECT_EQ(parse_deallocate_command("DISCARD TEMP").kind, K::none);
  EXPECT_EQ(parse_deallocate_command("SELECT 1").kind, K::none);
  EXPECT_EQ(parse_deallocate_command("DEALLOCATE a; SELECT 1").kind, K::none);
  EXPECT_EQ(parse_deallocate_command("DEALLOCATE").kind, K::none);
  EXPECT_EQ(parse_deallocate_command("").kind, K::none);
}

TEST(DeallocateCommand, StartOfALongStatement) {
  // A statement that has not fully arrived streams only if it cannot be one of these.
  EXPECT_TRUE(starts_like_deallocate_command("  DISCARD ALL" + std::string(100, ' ')));
  EXPECT_TRUE(starts_like_deallocate_command("deallocate prep"));
  EXPECT_TRUE(starts_like_deallocate_command("\n\tDeAllocate"));
  EXPECT_FALSE(starts_like_deallocate_command("SELECT 'discard'"));
  EXPECT_FALSE(starts_like_deallocate_command("discarded"));
  EXPECT_FALSE(starts_like_deallocate_command(""));
  EXPECT_FALSE(starts_like_deallocate_command("   "));
  EXPECT_FALSE(starts_like_deallocate_command("D"));
  EXPECT_FALSE(starts_like_deallocate_command("SELECT 1"));
}

}  // namespace
}  // namespace pgsluice::protocol
