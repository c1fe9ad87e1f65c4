// Tests of the auth_file (userlist.txt) parser: quoting, comments, secrets of every kind, and
// errors with their line numbers.
#include "pooler/auth/auth_file.h"

#include <gtest/gtest.h>

#include <string>

namespace pgsluice {
namespace {

TEST(AuthFileTest, PlainMd5AndScramSecrets) {
  AuthFileResult r = parse_auth_file_text(
      "\"alice\" \"secret\"\n"
      "\"bob\" \"md5a3556571e93b0d20722ba62be61e8c2d\"\n"
      "\"carol\" \"SCRAM-SHA-256$4096:c2FsdA==$c3RvcmVka2V5:c2VydmVya2V5\"\n",
      "userlist.txt");
  EXPECT_TRUE(r.errors.empty());
  ASSERT_EQ(r.secrets.size(), 3u);
  EXPECT_EQ(r.secrets.at("alice"), "secret");
  EXPECT_EQ(r.secrets.at("bob"), "md5a3556571e93b0d20722ba62be61e8c2d");
  EXPECT_EQ(r.secrets.at("carol"), "SCRAM-SHA-256$4096:c2FsdA==$c3RvcmVka2V5:c2VydmVya2V5");
}

TEST(AuthFileTest, DoubledQuoteIsALiteralQuote) {
  AuthFileResult r =
      parse_auth_file_text("\"we\"\"ird\" \"pa\"\"ss \"\"word\"\"\"\n", "userlist.txt");
  EXPECT_TRUE(r.errors.empty());
  EXPECT_EQ(r.secrets.at("we\"ird"), "pa\"ss \"word\"");
}

TEST(AuthFileTest, CommentsBlankLinesAndWhitespace) {
  AuthFileResult r = parse_auth_file_text(
      "; comment\n"
      "# another\n"
      "\n"
      "   \t\n"
      "  \"u1\"\t\t\"p1\"  \r\n"
      "\"u2\" \"\"\n",
      "userlist.txt");
  EXPECT_TRUE(r.errors.empty());
  EXPECT_EQ(r.secrets.at("u1"), "p1");
  EXPECT_EQ(r.secrets.at("u2"), "");  // an empty secret: the user has no password
}

TEST(AuthFileTest, ExtraQuotedFieldsAreIgnored) {
  // PostgreSQL's old pg_auth file had a third field; PgBouncer ignores it.
  AuthFileResult r = parse_auth_file_text("\"u\" \"p\" \"\"\n", "userlist.txt");
  EXPECT_TRUE(r.errors.empty());
  EXPECT_EQ(r.secrets.at("u"), "p");
}

TEST(AuthFileTest, LaterLineWins) {
  AuthFileResult r = parse_auth_file_text("\"u\" \"one\"\n\"u\" \"two\"\n", "userlist.txt");
  EXPECT_EQ(r.secrets.at("u"), "two");
}

TEST(AuthFileTest, ErrorsNameTheLine) {
  AuthFileResult r = parse_auth_file_text(
      "\"ok\" \"fine\"\n"
      "bare words\n"
      "\"unterminated\n"
      "\"nosecret\"\n"
      "\"u\" \"p\" trailing\n"
      "\"u2\"\"p2\"\n"
      "\"u3\" \"unterminated secret\n"
      "\"\" \"p\"\n"
      "\"good\" \"still loaded\"\n",
      "list.txt");
  ASSERT_EQ(r.errors.size(), 7u);
  EXPECT_EQ(r.errors[0].rfind("list.txt:2: ", 0), 0u) << r.errors[0];
  EXPECT_EQ(r.errors[1].rfind("list.txt:3: ", 0), 0u) << r.errors[1];
  EXPECT_EQ(r.errors[2].rfind("list.txt:4: ", 0), 0u) << r.errors[2];
  EXPECT_EQ(r.errors[3].rfind("list.txt:5: ", 0), 0u) << r.errors[3];
  EXPECT_EQ(r.errors[4].rfind("list.txt:6: ", 0), 0u) << r.errors[4];
  EXPECT_EQ(r.errors[5].rfind("list.txt:7: ", 0), 0u) << r.errors[5];
  EXPECT_EQ(r.errors[6].rfind("list.txt:8: ", 0), 0u) << r.errors[6];
  EXPECT_EQ(r.secrets.size(), 2u);
  EXPECT_EQ(r.secrets.at("good"), "still loaded");
}

TEST(AuthFileTest, MalformedScramVerifierIsAnError) {
  AuthFileResult r =
      parse_auth_file_text("\n\"u\" \"SCRAM-SHA-256$notanumber:salt$a:b\"\n", "userlist.txt");
  ASSERT_EQ(r.errors.size(), 1u);
  EXPECT_EQ(r.errors[0].rfind("userlist.txt:2: ", 0), 0u) << r.errors[0];
  EXPECT_TRUE(r.secrets.empty());
  r = parse_auth_file_text("\"u\" \"SCRAM-SHA-256$4096:salt$onlyonekey\"\n", "userlist.txt");
  EXPECT_EQ(r.errors.size(), 1u);
}

TEST(AuthFileTest, NoTrailingNewline) {
  AuthFileResult r = parse_auth_file_text("\"u\" \"p\"", "userlist.txt");
  EXPECT_TRUE(r.errors.empty());
  EXPECT_EQ(r.secrets.at("u"), "p");
}

TEST(AuthFileTest, MissingFile) {
  AuthFileResult r = load_auth_file("/nonexistent/userlist.txt");
  ASSERT_EQ(r.errors.size(), 1u);
  EXPECT_EQ(r.errors[0].rfind("/nonexistent/userlist.txt: ", 0), 0u) << r.errors[0];
  EXPECT_TRUE(r.secrets.empty());
}

TEST(AuthFileTest, ExampleFileLoads) {
  AuthFileResult r = load_auth_file(PGSLUICE_SOURCE_DIR "/conf/userlist.txt");
  for (const auto& e : r.errors) ADD_FAILURE() << e;
  EXPECT_GE(r.secrets.size(), 3u);
}

}  // namespace
}  // namespace pgsluice
