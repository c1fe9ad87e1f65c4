// The JSON leak report; see leak_report.h.
#include "pooler/session_state/leak_report.h"

#include <fmt/format.h>

#include <chrono>
#include <cstdio>
#include <ctime>
#include <map>

#include "pooler/config/config.h"
#include "pooler/session_state/findings.h"

namespace pgsluice {

namespace {

std::string json_string(std::string_view s) {
  std::string out = "\"";
  for (char c : s) {
    auto u = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (u < 0x20) {
      out += fmt::format("\\u{:04x}", u);
    } else {
      out += c;  // UTF-8 passes through as it is
    }
  }
  out += '"';
  return out;
}

std::string iso_time(int64_t unix_seconds) {
  std::time_t t = static_cast<std::time_t>(unix_seconds);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

std::string counts(const std::map<std::string, uint64_t>& m) {
  std::string out = "{";
  for (const auto& [k, v] : m) {
    if (out.size() > 1) out += ", ";
    out += fmt::format("{}: {}", json_string(k), v);
  }
  return out + "}";
}

}  // namespace

std::string leak_report_json(SharedFindings& findings, const Settings& s) {
  const std::vector<FindingRow> rows = findings.rows();
  std::map<std::string, uint64_t> by_kind;
  std::map<std::string, uint64_t> by_action;
  uint64_t events = 0;
  for (const FindingRow& r : rows) {
    by_kind[r.kind] += r.count;
    by_action[r.action] += r.count;
    events += r.count;
  }
  const int64_t now = std::chrono::duration_cast<std::chrono::seconds>(
                          std::chrono::system_clock::now().time_since_epoch())
                          .count();
  std::string out = "{\n";
  out += fmt::format("  \"generated_at\": {},\n", json_string(iso_time(now)));
  out += fmt::format("  \"pgsluice_version\": {},\n", json_string(PGSLUICE_VERSION));
  out += fmt::format(
      "  \"settings\": {{\"session_state_action\": {}, \"session_state_verify\": {}, "
      "\"session_state_verify_sample\": {}, \"session_state_long_hold_ms\": {}}},\n",
      // Unset: what transaction-mode pools do by default, spelled out.
      json_string(format_session_policy(
          s.session_state_action ? *s.session_state_action : SessionPolicy::transaction_default())),
      json_string(to_string(s.session_state_verify)), s.session_state_verify_sample,
      s.session_state_long_hold.count());
  out += fmt::format(
      "  \"totals\": {{\"events\": {}, \"rows\": {}, \"dropped\": {}, \"by_kind\": {}, "
      "\"by_action\": {}}},\n",
      events, rows.size(), findings.dropped(), counts(by_kind), counts(by_action));
  out += "  \"findings\": [";
  bool first = true;
  for (const FindingRow& r : rows) {
    out += first ? "\n" : ",\n";
    first = false;
    out += fmt::format(
        "    {{\"kind\": {}, \"detail\": {}, \"certainty\": {}, \"action\": {}, "
        "\"database\": {}, \"user\": {}, \"application_name\": {}, \"client_addr\": {}, "
        "\"source\": {}, \"count\": {}, \"first_seen\": {}, \"last_seen\": {}, "
        "\"fingerprint\": \"{:016x}\", \"query\": {}, \"hint\": {}}}",
        json_string(r.kind), json_string(r.detail), json_string(r.certainty), json_string(r.action),
        json_string(r.database), json_string(r.user), json_string(r.application_name),
        json_string(r.client_addr), json_string(r.source), r.count,
        json_string(iso_time(r.first_seen)), json_string(iso_time(r.last_seen)), r.fingerprint,
        json_string(r.sample), json_string(finding_hint(r.kind)));
  }
  out += first ? "]\n}\n" : "\n  ]\n}\n";
  return out;
}

std::string write_leak_report(SharedFindings& findings, const Settings& settings) {
  const std::string& path = settings.leak_report_file;
  if (path.empty()) return {};
  const std::string json = leak_report_json(findings, settings);
  const std::string tmp = path + ".tmp";
  std::FILE* f = std::fopen(tmp.c_str(), "w");
  if (f == nullptr) return fmt::format("cannot write {}", tmp);
  bool ok = std::fwrite(json.data(), 1, json.size(), f) == json.size();
  ok = std::fclose(f) == 0 && ok;
  if (!ok || std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::remove(tmp.c_str());
    return fmt::format("cannot write {}", path);
  }
  return {};
}

}  // namespace pgsluice
