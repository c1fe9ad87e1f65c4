// Fuzz target: parse_startup_packet (the body after the length word) and
// negotiate_protocol_version on whatever parsed.
#include <cstdint>
#include <string_view>

#include "fuzz_check.h"
#include "pgsluice/protocol/startup.h"

using namespace pgsluice::protocol;
using pgsluice::fuzz::within;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view body(reinterpret_cast<const char*>(data), size);
  const auto p = parse_startup_packet(body);
  if (!p) return 0;
  const StartupPacket& packet = p.value;
  for (const auto& [name, value] : packet.parameters) {
    FUZZ_CHECK(within(body.data(), body.size(), name.data(), name.size()));
    FUZZ_CHECK(within(body.data(), body.size(), value.data(), value.size()));
    FUZZ_CHECK(!name.empty());
  }
  FUZZ_CHECK(within(body.data(), body.size(), packet.cancel_key.data(), packet.cancel_key.size()));
  FUZZ_CHECK(packet.cancel_key.size() <= kMaxCancelKeyLength);
  (void)packet.parameter("user");
  (void)packet.parameter("database");
  if (packet.kind != StartupKind::startup_message) return 0;
  FUZZ_CHECK((packet.version >> 16) == 3);
  for (const int32_t newest : {kProtocolVersion30, kProtocolVersion32}) {
    const VersionNegotiation n = negotiate_protocol_version(packet, newest);
    FUZZ_CHECK((n.accepted_version >> 16) == 3);
    FUZZ_CHECK((n.accepted_version & 0xffff) <= (newest & 0xffff));
    FUZZ_CHECK((n.accepted_version & 0xffff) <= (packet.version & 0xffff));
    FUZZ_CHECK((n.accepted_version & 0xffff) != 1);
    FUZZ_CHECK(n.newest_minor == (n.accepted_version & 0xffff));
    // The answer must say so whenever it is not exactly what was asked for.
    if (n.accepted_version != packet.version || !n.unrecognized_options.empty()) {
      FUZZ_CHECK(n.send_negotiate);
    }
    for (auto o : n.unrecognized_options) {
      FUZZ_CHECK(o.starts_with("_pq_."));
      FUZZ_CHECK(within(body.data(), body.size(), o.data(), o.size()));
    }
  }
  return 0;
}
