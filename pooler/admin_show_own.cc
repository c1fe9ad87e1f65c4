// pgsluice's own SHOW commands: LEAKS (the session-state findings) and PREPARED (protocol-level
// prepared statements per pool and in the registry).
#include "pooler/admin_show_own.h"

#include <fmt/format.h>

#include <ctime>

#include "pooler/pool.h"
#include "pooler/worker.h"

namespace pgsluice {

namespace {
std::string format_time(int64_t unix_seconds) {
  std::time_t t = static_cast<std::time_t>(unix_seconds);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%d %H:%M:%S UTC", &tm);
  return buf;
}
}  // namespace

AdminResult show_leaks(Worker& worker) {
  AdminResult r;
  r.text("kind")
      .text("detail")
      .text("certainty")
      .text("action")
      .text("database")
      .text("user")
      .text("application_name")
      .text("client_addr")
      .text("source")
      .int8("count")
      .text("first_seen")
      .text("last_seen")
      .text("fingerprint")
      .text("query");
  for (const FindingRow& f : worker.findings().rows()) {
    r.row()
        .add(f.kind)
        .add(f.detail)
        .add(f.certainty)
        .add(f.action)
        .add(f.database)
        .add(f.user)
        .add(f.application_name)
        .add(f.client_addr)
        .add(f.source)
        .add(f.count)
        .add(format_time(f.first_seen))
        .add(format_time(f.last_seen))
        .add(fmt::format("{:016x}", f.fingerprint))
        .add(f.sample);
  }
  r.set_tag("SHOW");
  return r;
}

AdminResult show_prepared(Worker& worker) {
  AdminResult r;
  r.text("database")
      .text("user")
      .int8("client_parse_count")
      .int8("server_parse_count")
      .int8("bind_count")
      .int8("registry_statements")
      .int4("max_prepared_statements");
  uint64_t registry = worker.prepared_registry().size();
  worker.for_each_pool([&](Pool& p) {
    const PoolCounters& c = p.counters();
    r.row()
        .add(p.database().name)
        .add(p.credentials().user)
        .add(c.client_parse_count)
        .add(c.server_parse_count)
        .add(c.bind_count)
        .add(registry)
        .add(worker.settings().max_prepared_statements);
  });
  r.set_tag("SHOW");
  return r;
}

}  // namespace pgsluice
