// simple_set_literal, is_deterministic_setting and SetValueCache (pooler/session_state/
// set_literal.h): the SETs whose value the pooler may know without reading it back, and nothing
// else.
#include "pooler/session_state/set_literal.h"

#include <gtest/gtest.h>

#include <optional>
#include <string>

namespace pgsluice {
namespace {

TEST(SimpleSetLiteral, GivesWhatTheGrammarHandsTheSetting) {
  struct Case {
    const char* sql;
    const char* name;
    std::optional<std::string> value;
  };
  const Case cases[] = {
      {"SET work_mem = '64MB'", "work_mem", "64MB"},
      {"set WORK_MEM to '64MB';", "work_mem", "64MB"},
      {"SET SESSION work_mem = '64MB'  ; ", "work_mem", "64MB"},
      {"SET /* c */ statement_timeout -- x\n = 5000", "statement_timeout", "5000"},
      {"SET statement_timeout = 0", "statement_timeout", "0"},
      {"SET random_page_cost = 1.10", "random_page_cost", "1.10"},
      {"SET enable_seqscan = OFF", "enable_seqscan", "off"},
      {"SET enable_seqscan TO on", "enable_seqscan", "on"},
      {"SET client_min_messages = 'WARNING'", "client_min_messages", "WARNING"},
      {"SET x = 'it''s'", "x", "it's"},
      {"SET x = ''", "x", ""},
      // Read back instead:
      {"SET work_mem = DEFAULT", "work_mem", std::nullopt},
      {"SET LOCAL work_mem = '1MB'", "work_mem", std::nullopt},
      {"SET work_mem = '1MB'", "maintenance_work_mem", std::nullopt},      // not the finding's name
      {"SET statement_timeout = 007", "statement_timeout", std::nullopt},  // printed back as 7
      {"SET statement_timeout = -1", "statement_timeout", std::nullopt},
      {"SET statement_timeout = 1e3", "statement_timeout", std::nullopt},
      {"SET statement_timeout = 12345678901", "statement_timeout", std::nullopt},
      {"SET x = E'a\\nb'", "x", std::nullopt},
      {"SET x = 'a\\b'", "x", std::nullopt},
      {"SET x = 'a''", "x", std::nullopt},  // left open
      {"SET x = \"Quoted\"", "x", std::nullopt},
      {"SET x = $$v$$", "x", std::nullopt},
      {"SET search_path = a, b", "search_path", std::nullopt},
      {"SET work_mem = '1MB'; SELECT 1", "work_mem", std::nullopt},
      {"SET my.setting = 'v'", "my.setting", std::nullopt},
      {"SET TIME ZONE 'UTC'", "timezone", std::nullopt},
      {"SET SESSION AUTHORIZATION bob", "session_authorization", std::nullopt},
      {"SET work_mem", "work_mem", std::nullopt},
      {"RESET work_mem", "work_mem", std::nullopt},
      {"SET work_mem = éé", "work_mem", std::nullopt},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(simple_set_literal(c.sql, c.name), c.value) << c.sql;
  }
}

TEST(SimpleSetLiteral, DeterministicSettingsAreTheNumericAndEnumOnes) {
  EXPECT_TRUE(is_deterministic_setting("work_mem"));
  EXPECT_TRUE(is_deterministic_setting("statement_timeout"));
  EXPECT_TRUE(is_deterministic_setting("enable_seqscan"));
  EXPECT_TRUE(is_deterministic_setting("client_min_messages"));
  EXPECT_TRUE(is_deterministic_setting("random_page_cost"));
  // Strings and lists (search_path quotes a literal as one name), the socket's, the
  // transaction's, extensions' and the reported ones: read back.
  EXPECT_FALSE(is_deterministic_setting("search_path"));
  EXPECT_FALSE(is_deterministic_setting("default_text_search_config"));
  EXPECT_FALSE(is_deterministic_setting("tcp_keepalives_idle"));
  EXPECT_FALSE(is_deterministic_setting("transaction_isolation"));
  EXPECT_FALSE(is_deterministic_setting("max_stack_depth"));
  EXPECT_FALSE(is_deterministic_setting("my.setting"));
  EXPECT_FALSE(is_deterministic_setting("timezone"));
  EXPECT_FALSE(is_deterministic_setting("WORK_MEM"));  // callers give the lowercase name
}

TEST(SetValueCache, RemembersByVersionNameAndLiteral) {
  SetValueCache cache;
  EXPECT_EQ(cache.find("15.18", "work_mem", "65536"), nullptr);
  cache.learn("15.18", "work_mem", "65536", "64MB");
  ASSERT_NE(cache.find("15.18", "work_mem", "65536"), nullptr);
  EXPECT_EQ(*cache.find("15.18", "work_mem", "65536"), "64MB");
  EXPECT_EQ(cache.find("15.18", "work_mem", "64MB"), nullptr);
  EXPECT_EQ(cache.find("15.18", "maintenance_work_mem", "65536"), nullptr);
  EXPECT_EQ(cache.find("16.4", "work_mem", "65536"), nullptr);
  cache.learn("15.18", "work_mem", "65536", "64MB");
  EXPECT_EQ(cache.size(), 1U);
}

TEST(SetValueCache, StopsLearningWhenFull) {
  SetValueCache cache;
  for (size_t i = 0; i < SetValueCache::kMaxEntries + 10; ++i) {
    cache.learn("15", "work_mem", std::to_string(i), std::to_string(i) + "kB");
  }
  EXPECT_EQ(cache.size(), SetValueCache::kMaxEntries);
  EXPECT_NE(cache.find("15", "work_mem", "0"), nullptr);
  EXPECT_EQ(cache.find("15", "work_mem", std::to_string(SetValueCache::kMaxEntries)), nullptr);
}

}  // namespace
}  // namespace pgsluice
