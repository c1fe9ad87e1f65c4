// Fuzz target: every backend (server → client) message parser in backend.h.
// Input: byte 0 picks the parser, the rest is the message body. Every view a parser hands out
// must lie inside the body; counts must match what was read.
#include <cstdint>
#include <string>
#include <string_view>

#include "fuzz_check.h"
#include "pgsluice/protocol/backend.h"
#include "pgsluice/protocol/frame.h"
#include "pgsluice/protocol/writer.h"

using namespace pgsluice::protocol;
using pgsluice::fuzz::within;

namespace {

std::string_view g_body;

void in_body(std::string_view v) {
  FUZZ_CHECK(within(g_body.data(), g_body.size(), v.data(), v.size()));
}

std::string_view reframe(const std::string& out, char type) {
  const FrameResult r = next_message(out, FramePhase::regular, kDefaultMaxMessageLength);
  FUZZ_CHECK(r.status == FrameStatus::complete);
  FUZZ_CHECK(r.message.type == type);
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
      const auto p = parse_authentication(body);
      if (!p) break;
      for (auto m : p.value.mechanisms) in_body(m);
      in_body(p.value.data);
      break;
    }
    case 1: {
      const auto p = parse_backend_key_data(body);
      if (!p) break;
      in_body(p.value.secret_key);
      FUZZ_CHECK(p.value.secret_key.size() >= 4 && p.value.secret_key.size() <= 256);
      break;
    }
    case 2: {
      const auto p = parse_parameter_status(body);
      if (!p) break;
      in_body(p.value.name);
      in_body(p.value.value);
      break;
    }
    case 3: {
      const auto p = parse_ready_for_query(body);
      if (!p) break;
      FUZZ_CHECK(p.value.status == 'I' || p.value.status == 'T' || p.value.status == 'E');
      break;
    }
    case 4: {
      const auto p = parse_error_fields(body);
      if (!p) break;
      for (const auto& [code, value] : p.value.fields) in_body(value);
      in_body(p.value.severity);
      in_body(p.value.code);
      in_body(p.value.message);
      // With a field repeated, which one the picked-out member holds is not specified; it must
      // be one of them.
      if (!p.value.code.empty()) {
        bool found = false;
        for (const auto& [code, value] : p.value.fields)
          found |= code == 'C' && value == p.value.code;
        FUZZ_CHECK(found);
      }
      break;
    }
    case 5: {
      const auto p = parse_command_complete(body);
      if (!p) break;
      in_body(p.value.tag);
      write_command_complete(out, p.value.tag);
      const auto q = parse_command_complete(reframe(out, 'C'));
      FUZZ_CHECK(q && q.value.tag == p.value.tag);
      break;
    }
    case 6: {
      const auto p = parse_row_description(body);
      if (!p) break;
      for (const auto& f : p.value.fields) in_body(f.name);
      if (p.value.fields.size() > 32767) break;
      write_row_description(out, p.value.fields);
      const auto q = parse_row_description(reframe(out, 'T'));
      FUZZ_CHECK(q && q.value.fields.size() == p.value.fields.size());
      for (size_t i = 0; i < q.value.fields.size(); ++i) {
        FUZZ_CHECK(q.value.fields[i].name == p.value.fields[i].name);
        FUZZ_CHECK(q.value.fields[i].type_oid == p.value.fields[i].type_oid);
        FUZZ_CHECK(q.value.fields[i].format == p.value.fields[i].format);
      }
      break;
    }
    case 7: {
      const auto p = parse_data_row(body);
      if (!p) break;
      for (const auto& v : p.value.values) {
        if (v) in_body(*v);
      }
      if (p.value.values.size() > 32767) break;
      write_data_row(out, p.value.values);
      const auto q = parse_data_row(reframe(out, 'D'));
      FUZZ_CHECK(q && q.value.values == p.value.values);
      break;
    }
    case 8: {
      (void)parse_parameter_description(body);
      break;
    }
    case 9: {
      const auto p = parse_copy_response(body);
      if (p) FUZZ_CHECK(p.value.format == 0 || p.value.format == 1);
      break;
    }
    case 10: {
      const auto p = parse_notification_response(body);
      if (!p) break;
      in_body(p.value.channel);
      in_body(p.value.payload);
      break;
    }
    case 11: {
      const auto p = parse_negotiate_protocol_version(body);
      if (!p) break;
      for (auto o : p.value.unrecognized_options) in_body(o);
      break;
    }
  }
  return 0;
}
