// Fuzz target: the session-state classifier (session_state.h): the lexer prefilter, libpg_query
// and the lexer fallback, the fingerprint and the verdict cache. Invariants: spans lie inside the
// input; the prefilter never hides anything (when it clears a text, the full classification
// without it finds nothing either); a cached verdict equals a fresh one.
// libpg_query itself is a prebuilt library without sanitizers or coverage; inputs are capped
// at 4 KB (fuzz/run passes -max_len) to keep its parser fast.
#include <cstdint>
#include <string>
#include <string_view>

#include "fuzz_check.h"
#include "pgsluice/protocol/session_state.h"
#include "pgsluice/protocol/sql_lexer.h"

using namespace pgsluice::protocol;

namespace {

void check_spans(const Classification& c, size_t size) {
  for (const auto& f : c.findings) FUZZ_CHECK(f.span.offset + f.span.length <= size);
  for (const auto& o : c.opaque_calls) FUZZ_CHECK(o.span.offset + o.span.length <= size);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > 4096) return 0;
  const std::string_view sql(reinterpret_cast<const char*>(data), size);
  const bool flagged = may_change_session_state(sql);

  const Classification full = classify_sql(sql, Prefilter::skip);
  check_spans(full, size);
  const Classification normal = classify_sql(sql, Prefilter::use);
  check_spans(normal, size);
  if (!flagged) {
    FUZZ_CHECK(normal.source == VerdictSource::prefilter && normal.empty());
    if (!full.findings.empty()) {
      std::fprintf(stderr, "prefilter hid: %s\n", describe(full).c_str());
    }
    FUZZ_CHECK(full.findings.empty());
  }
  const std::string verdict = describe(normal);

  static SessionStateClassifier cache(8);
  const std::string first = describe(cache.classify(sql));
  const std::string second = describe(cache.classify(sql));
  FUZZ_CHECK(first == verdict && second == verdict);

  const StatementFingerprint fp = fingerprint_sql(sql);
  (void)fp;
  return 0;
}
