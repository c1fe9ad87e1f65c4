// Fuzz target: the SQL tokenizer and the session-state prefilter (sql_lexer.h). Tokens must be
// non-empty, in order, inside the input and never overlapping; the tokenizer always advances.
#include <cstdint>
#include <string_view>

#include "fuzz_check.h"
#include "pgsluice/protocol/sql_lexer.h"

using namespace pgsluice::protocol;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view sql(reinterpret_cast<const char*>(data), size);
  SqlTokenizer tokenizer(sql);
  SqlToken token;
  size_t previous_end = 0;
  size_t count = 0;
  while (tokenizer.next(token)) {
    FUZZ_CHECK(!token.text.empty());
    FUZZ_CHECK(token.offset >= previous_end);
    FUZZ_CHECK(token.offset + token.text.size() <= sql.size());
    FUZZ_CHECK(token.text.data() == sql.data() + token.offset);
    FUZZ_CHECK(tokenizer.position() >= token.offset + token.text.size());
    previous_end = token.offset + token.text.size();
    FUZZ_CHECK(++count <= sql.size());
    if (token.kind == SqlTokenKind::punct) FUZZ_CHECK(token.text.size() == 1);
    if (token.kind == SqlTokenKind::word) {
      (void)is_known_safe_builtin(token.text);
      (void)is_paren_keyword(token.text);
      (void)iequals_keyword(token.text, "set");
    }
  }
  FUZZ_CHECK(!tokenizer.next(token));  // stays at the end
  // The quick pass may clear only what the token pass clears (prefilter_quick_scan.cc).
  FUZZ_CHECK(may_change_session_state(sql) == may_change_session_state_by_tokens(sql));
  return 0;
}
