// Fuzz target: every frontend (client → server) message parser in frontend.h.
// Input: byte 0 picks the parser, the rest is the message body (after the length word). Every
// view a parser hands out must lie inside the body; where the pooler rewrites a message (Parse,
// Bind with a renamed statement, Describe, Execute, Close, Query), writing the parsed value back
// and parsing that again must give the same value.
#include <cstdint>
#include <string>
#include <string_view>

#include "fuzz_check.h"
#include "pgsluice/protocol/frame.h"
#include "pgsluice/protocol/frontend.h"
#include "pgsluice/protocol/writer.h"

using namespace pgsluice::protocol;
using pgsluice::fuzz::within;

namespace {

std::string_view g_body;

void in_body(std::string_view v) {
  FUZZ_CHECK(within(g_body.data(), g_body.size(), v.data(), v.size()));
}

// The body of the single message written into `out`.
std::string_view reframe(const std::string& out, char type) {
  const FrameResult r = next_message(out, FramePhase::regular, kDefaultMaxMessageLength);
  FUZZ_CHECK(r.status == FrameStatus::complete);
  FUZZ_CHECK(r.message.type == type);
  FUZZ_CHECK(r.message.wire.size() == out.size());
  return r.message.body;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const uint8_t which = data[0];
  const std::string_view body(reinterpret_cast<const char*>(data) + 1, size - 1);
  g_body = body;
  std::string out;
  switch (which % 12) {
    case 0: {
      const auto p = parse_query(body);
      if (!p) break;
      in_body(p.value.sql);
      write_query(out, p.value.sql);
      const auto q = parse_query(reframe(out, 'Q'));
      FUZZ_CHECK(q && q.value.sql == p.value.sql);
      break;
    }
    case 1: {
      const auto p = parse_parse(body);
      if (!p) break;
      in_body(p.value.statement);
      in_body(p.value.query);
      if (p.value.parameter_types.size() > 32767) break;  // not writable as an Int16 count
      write_parse(out, p.value.statement, p.value.query, p.value.parameter_types);
      const auto q = parse_parse(reframe(out, 'P'));
      FUZZ_CHECK(q && q.value.statement == p.value.statement && q.value.query == p.value.query &&
                 q.value.parameter_types == p.value.parameter_types);
      break;
    }
    case 2: {
      const auto p = parse_bind(body);
      if (!p) break;
      in_body(p.value.portal);
      in_body(p.value.statement);
      in_body(p.value.after_statement);
      for (const auto& v : p.value.parameters) {
        if (v) in_body(*v);
      }
      // The pooler renames the statement and copies the rest: the copy must parse the same.
      write_bind_renamed(out, p.value.portal, "S_renamed_1", p.value.after_statement);
      const auto q = parse_bind(reframe(out, 'B'));
      FUZZ_CHECK(q);
      FUZZ_CHECK(q.value.statement == "S_renamed_1" && q.value.portal == p.value.portal);
      FUZZ_CHECK(q.value.parameter_formats == p.value.parameter_formats);
      FUZZ_CHECK(q.value.parameters == p.value.parameters);
      FUZZ_CHECK(q.value.result_formats == p.value.result_formats);
      break;
    }
    case 3: {
      const auto p = parse_describe(body);
      if (!p) break;
      FUZZ_CHECK(p.value.kind == 'S' || p.value.kind == 'P');
      in_body(p.value.name);
      write_describe(out, p.value.kind, p.value.name);
      const auto q = parse_describe(reframe(out, 'D'));
      FUZZ_CHECK(q && q.value.kind == p.value.kind && q.value.name == p.value.name);
      break;
    }
    case 4: {
      const auto p = parse_execute(body);
      if (!p) break;
      in_body(p.value.portal);
      write_execute(out, p.value.portal, p.value.max_rows);
      const auto q = parse_execute(reframe(out, 'E'));
      FUZZ_CHECK(q && q.value.portal == p.value.portal && q.value.max_rows == p.value.max_rows);
      break;
    }
    case 5: {
      const auto p = parse_close(body);
      if (!p) break;
      FUZZ_CHECK(p.value.kind == 'S' || p.value.kind == 'P');
      in_body(p.value.name);
      write_close(out, p.value.kind, p.value.name);
      const auto q = parse_close(reframe(out, 'C'));
      FUZZ_CHECK(q && q.value.kind == p.value.kind && q.value.name == p.value.name);
      break;
    }
    case 6: {
      const auto p = parse_copy_data(body);
      if (p) FUZZ_CHECK(p.value.data.size() == body.size());
      break;
    }
    case 7: {
      const auto p = parse_copy_fail(body);
      if (p) in_body(p.value.message);
      break;
    }
    case 8: {
      const auto p = parse_password_message(body);
      if (!p) break;
      in_body(p.value.password);
      write_password_message(out, p.value.password);
      const auto q = parse_password_message(reframe(out, 'p'));
      FUZZ_CHECK(q && q.value.password == p.value.password);
      break;
    }
    case 9: {
      const auto p = parse_sasl_initial_response(body);
      if (!p) break;
      in_body(p.value.mechanism);
      if (p.value.data) in_body(*p.value.data);
      if (!p.value.data) break;
      write_sasl_initial_response(out, p.value.mechanism, *p.value.data);
      const auto q = parse_sasl_initial_response(reframe(out, 'p'));
      FUZZ_CHECK(q && q.value.mechanism == p.value.mechanism && q.value.data == p.value.data);
      break;
    }
    case 10: {
      const auto p = parse_sasl_response(body);
      if (!p) break;
      in_body(p.value.data);
      write_sasl_response(out, p.value.data);
      const auto q = parse_sasl_response(reframe(out, 'p'));
      FUZZ_CHECK(q && q.value.data == p.value.data);
      break;
    }
    case 11: {
      const ParseError e = expect_empty_body(body);
      FUZZ_CHECK((e == ParseError::ok) == body.empty());
      break;
    }
  }
  return 0;
}
