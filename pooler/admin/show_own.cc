// pgsluice's own SHOW commands: LEAKS (the session-state findings), PREPARED and
// PREPARED_STATEMENTS (protocol-level prepared statements per pool, and per statement in the
// registry).
#include "pooler/admin/show_own.h"

#include <fmt/format.h>

#include <ctime>

#include "pooler/admin/views.h"
#include "pooler/base/sqlstate.h"
#include "pooler/core/pool.h"
#include "pooler/core/worker.h"
#include "pooler/session_state/findings.h"
#include "pooler/session_state/leak_report.h"

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
      .text("query")
      .text("hint");
  for (const FindingRow& f : worker.findings().rows()) {  // a copy, taken under its lock
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
        .add(f.sample)
        .add(finding_hint(f.kind));
  }
  r.set_tag("SHOW");
  return r;
}

AdminResult show_leak_report(Worker& worker) {
  // On demand: the file too, when leak_report_file is set (a staging run's report so far).
  std::string err = write_leak_report(worker.findings(), worker.settings());
  if (!err.empty()) return AdminResult::failure(sqlstate::kIoError, "SHOW LEAK_REPORT: " + err);
  AdminResult r;
  r.text("report");
  r.row().add(leak_report_json(worker.findings(), worker.settings()));
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
      .int8("eviction_count")
      .int8("stale_plan_retry_count")
      .int8("registry_statements")
      .int4("max_prepared_statements");
  const uint64_t registry = worker.group().prepared_registry().size();
  for (const PoolRow& row : collect_pool_rows(worker)) {
    PoolCounters c;
    for (Pool* share : row.shares) c += share->counters();
    r.row()
        .add(row.database)
        .add(row.user)
        .add(c.client_parse_count)
        .add(c.server_parse_count)
        .add(c.bind_count)
        .add(c.prepared_evictions)
        .add(c.prepared_retries)
        .add(registry)
        .add(worker.settings().max_prepared_statements);
  }
  r.set_tag("SHOW");
  return r;
}

AdminResult show_prepared_statements(Worker& worker) {
  AdminResult r;
  r.text("name")
      .int8("clients")
      .int8("servers")
      .int8("client_parse_count")
      .int8("server_parse_count")
      .int8("bind_count")
      .int8("generation")
      .int8("stale_plan_retry_count")
      .int8("stale_plan_refusal_count")
      .text("parameter_types")
      .text("query");
  // One registry for the process: one row per statement, whichever workers use it.
  for (const PreparedStatementRef& s : worker.group().prepared_registry().entries()) {
    const PreparedStatementStats& c = *s->stats;
    std::string types;
    for (uint32_t t : s->parameter_types) {
      if (!types.empty()) types.push_back(',');
      types += std::to_string(t);
    }
    r.row()
        .add(s->server_name)
        .add(c.client_names.load())
        .add(c.servers.load())
        .add(c.client_parses.load())
        .add(c.server_parses.load())
        .add(c.binds.load())
        .add(s->generation.load())
        .add(c.retries.load())
        .add(c.stale_refusals.load())
        .add(types)
        .add(abbreviate_query(s->query, kShownQueryBytes));
  }
  r.set_tag("SHOW");
  return r;
}

}  // namespace pgsluice
