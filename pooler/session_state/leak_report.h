// The JSON leak report for a staging run: every session-state finding (SHOW LEAKS) with totals
// by kind and by action, and the settings that produced it. Returned by the console's
// SHOW LEAK_REPORT, and written to leak_report_file (when set) by that command and at shutdown.
#pragma once

#include <string>

namespace pgsluice {

class SharedFindings;
struct Settings;

std::string leak_report_json(SharedFindings& findings, const Settings& settings);
// Writes the report to leak_report_file through a temporary file and a rename, so that a reader
// never sees half of it. Returns an error text, empty on success (or when the setting is empty).
std::string write_leak_report(SharedFindings& findings, const Settings& settings);

}  // namespace pgsluice
