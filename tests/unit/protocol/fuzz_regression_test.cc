// Inputs found by the libFuzzer targets in fuzz/ that once broke a parser: each stays here as a
// test, so that the bug cannot come back unnoticed (the sanitizer build runs these under ASan and
// UBSan, which is what caught them).
#include <gtest/gtest.h>

#include <string>
#include <string_view>

#include "pgsluice/protocol/session_state.h"
#include "pgsluice/protocol/sql_lexer.h"

namespace pgsluice::protocol {
namespace {

// fuzz_session_state: SQL that libpg_query refuses and that starts with ".name(" made the lexer
// fallback read the schema name from before the start of its token vector.
TEST(FuzzRegression, LexerFallbackCallAfterLeadingDot) {
  const std::string found(
      "\x2e\xba\xb3\xba\xbc\x49\xdf\x8f"
      "gactc(1_olk)rg_a");
  for (const Prefilter prefilter : {Prefilter::use, Prefilter::skip}) {
    const Classification c = classify_sql(found, prefilter);
    if (prefilter == Prefilter::skip) {
      EXPECT_EQ(c.source, VerdictSource::lexer_fallback);
    }
    (void)describe(c);
  }
  // The call is still reported (as an opaque call of ".gactc" with the bytes before it).
  const Classification c = classify_sql(found, Prefilter::skip);
  EXPECT_FALSE(c.opaque_calls.empty()) << describe(c);
}

}  // namespace
}  // namespace pgsluice::protocol
