#include "pooler/base/usable_cpus.h"

#include <sched.h>

#include <algorithm>
#include <charconv>
#include <optional>
#include <sstream>
#include <thread>

#include "pooler/base/read_file.h"

namespace pgsluice {

namespace {

std::optional<std::string> first_line(const std::string& path) {
  std::string text;
  std::string error;
  if (!read_whole_file(path, text, error)) return std::nullopt;
  return text.substr(0, text.find('\n'));
}

std::optional<long long> to_number(std::string_view text) {
  long long n = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), n);
  if (ec != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return n;
}

// CPUs a quota allows, rounded up (1.5 CPUs of quota can keep two threads half busy each);
// nullopt when there is no quota.
std::optional<int> cpus_of_quota(long long quota, long long period) {
  if (quota <= 0 || period <= 0) return std::nullopt;
  return static_cast<int>(std::max(1LL, (quota + period - 1) / period));
}

std::optional<int> v2_limit(const std::string& dir) {
  const auto line = first_line(dir + "/cpu.max");  // "max 100000" or "<quota> <period>"
  if (!line) return std::nullopt;
  const size_t space = line->find(' ');
  if (space == std::string::npos) return std::nullopt;
  const auto quota = to_number(std::string_view(*line).substr(0, space));
  const auto period = to_number(std::string_view(*line).substr(space + 1));
  if (!quota || !period) return std::nullopt;  // "max": no quota
  return cpus_of_quota(*quota, *period);
}

std::optional<int> v1_limit(const std::string& dir) {
  const auto quota = first_line(dir + "/cpu.cfs_quota_us");  // -1: no quota
  const auto period = first_line(dir + "/cpu.cfs_period_us");
  if (!quota || !period) return std::nullopt;
  const auto q = to_number(*quota);
  const auto p = to_number(*period);
  if (!q || !p) return std::nullopt;
  return cpus_of_quota(*q, *p);
}

// The smallest limit of `relative` ("/a/b") and its ancestors under `base`.
template <typename Limit>
std::optional<int> lowest_on_path(const std::string& base, std::string relative, Limit limit) {
  std::optional<int> lowest;
  while (true) {
    if (const auto l = limit(base + relative); l && (!lowest || *l < *lowest)) lowest = l;
    if (relative.empty() || relative == "/") break;
    const size_t slash = relative.rfind('/');
    relative = slash == std::string::npos || slash == 0 ? std::string() : relative.substr(0, slash);
  }
  return lowest;
}

bool lists_controller(std::string_view controllers, std::string_view name) {
  while (!controllers.empty()) {
    const size_t comma = controllers.find(',');
    if (controllers.substr(0, comma) == name) return true;
    if (comma == std::string_view::npos) break;
    controllers.remove_prefix(comma + 1);
  }
  return false;
}

}  // namespace

int usable_cpus_from(int affinity_cpus, std::string_view proc_self_cgroup,
                     const std::string& cgroup_root) {
  int cpus = std::max(1, affinity_cpus);
  std::istringstream lines{std::string(proc_self_cgroup)};
  std::string line;
  while (std::getline(lines, line)) {
    // "hierarchy-ID:controller-list:path"; cgroup v2's line is "0::path".
    const size_t first = line.find(':');
    const size_t second = first == std::string::npos ? first : line.find(':', first + 1);
    if (second == std::string::npos) continue;
    const std::string_view controllers =
        std::string_view(line).substr(first + 1, second - first - 1);
    const std::string path = line.substr(second + 1);
    std::optional<int> limit;
    if (line.compare(0, second + 1, "0::") == 0) {
      limit = lowest_on_path(cgroup_root, path, v2_limit);
      // A hybrid mount has cgroup v2 under "unified" and the v1 controllers beside it.
      if (const auto u = lowest_on_path(cgroup_root + "/unified", path, v2_limit);
          u && (!limit || *u < *limit)) {
        limit = u;
      }
    } else if (lists_controller(controllers, "cpu")) {
      limit = lowest_on_path(cgroup_root + "/" + std::string(controllers), path, v1_limit);
    }
    if (limit) cpus = std::min(cpus, *limit);
  }
  return cpus;
}

int usable_cpus() {
  int affinity = 0;
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) == 0) affinity = CPU_COUNT(&set);
  if (affinity <= 0) affinity = static_cast<int>(std::thread::hardware_concurrency());
  std::string cgroup;
  std::string error;
  if (!read_whole_file("/proc/self/cgroup", cgroup, error)) cgroup.clear();  // no limit known
  return usable_cpus_from(affinity, cgroup, "/sys/fs/cgroup");
}

}  // namespace pgsluice
