// How many CPUs this process can run on: the CPUs of its affinity mask (taskset, a container's
// cpuset), lowered to its cgroup's CPU quota rounded up (a container's `--cpus`, a Kubernetes CPU
// limit). std::thread::hardware_concurrency() counts the host's CPUs, so a pooler in a container
// limited to 2 CPUs of a 64-CPU host would start 64 worker threads that the quota then throttles.
#pragma once

#include <string>
#include <string_view>

namespace pgsluice {

// The count for this process (at least 1), from sched_getaffinity(2), /proc/self/cgroup and
// /sys/fs/cgroup.
int usable_cpus();

// The same from given parts, for tests: `affinity_cpus` CPUs, the text of /proc/self/cgroup, and
// the cgroup file system mounted at `cgroup_root`. The quota is read where the cgroup's line
// points and at every ancestor up to the root (a limit set on a parent binds its children):
// cgroup v2's cpu.max ("max 100000", "150000 100000"), cgroup v1's cpu.cfs_quota_us and
// cpu.cfs_period_us in the directory of the `cpu` controller ("cpu" or "cpu,cpuacct"). A file
// that is missing or unreadable sets no limit.
int usable_cpus_from(int affinity_cpus, std::string_view proc_self_cgroup,
                     const std::string& cgroup_root);

}  // namespace pgsluice
