// usable_cpus_from: the affinity count lowered to the cgroup's CPU quota, over a cgroup tree
// written to a temporary directory (cgroup v2, v1 and a hybrid mount).
#include "pooler/base/usable_cpus.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <string>

namespace pgsluice {
namespace {

namespace fs = std::filesystem;

class UsableCpus : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string templ = (fs::temp_directory_path() / "usable_cpus.XXXXXX").string();
    ASSERT_NE(mkdtemp(templ.data()), nullptr);
    root_ = templ;
  }
  void TearDown() override { fs::remove_all(root_); }
  void write(const std::string& relative, const std::string& text) {
    const fs::path p = fs::path(root_) / relative;
    fs::create_directories(p.parent_path());
    std::ofstream(p) << text << "\n";
  }
  std::string root_;
};

TEST_F(UsableCpus, NoCgroupFilesLeaveTheAffinity) {
  EXPECT_EQ(usable_cpus_from(8, "0::/\n", root_), 8);
  EXPECT_EQ(usable_cpus_from(8, "", root_), 8);
  EXPECT_EQ(usable_cpus_from(0, "", root_), 1);  // never less than one
}

TEST_F(UsableCpus, CgroupV2QuotaRoundsUp) {
  write("cpu.max", "max 100000");
  EXPECT_EQ(usable_cpus_from(8, "0::/\n", root_), 8);  // "max": no quota
  write("cpu.max", "150000 100000");
  EXPECT_EQ(usable_cpus_from(8, "0::/\n", root_), 2);
  write("cpu.max", "50000 100000");
  EXPECT_EQ(usable_cpus_from(8, "0::/\n", root_), 1);
  write("cpu.max", "400000 100000");
  EXPECT_EQ(usable_cpus_from(2, "0::/\n", root_), 2);  // the affinity is lower
}

TEST_F(UsableCpus, CgroupV2AncestorLimitBinds) {
  write("kubepods/cpu.max", "300000 100000");
  write("kubepods/pod1/cpu.max", "max 100000");
  write("kubepods/pod1/app/cpu.max", "max 100000");
  EXPECT_EQ(usable_cpus_from(16, "0::/kubepods/pod1/app\n", root_), 3);
  write("kubepods/pod1/app/cpu.max", "100000 100000");
  EXPECT_EQ(usable_cpus_from(16, "0::/kubepods/pod1/app\n", root_), 1);
}

TEST_F(UsableCpus, CgroupV1CpuController) {
  const std::string self = "4:memory:/x\n3:cpu,cpuacct:/docker/abc\n1:name=systemd:/\n";
  write("cpu,cpuacct/docker/abc/cpu.cfs_quota_us", "-1");
  write("cpu,cpuacct/docker/abc/cpu.cfs_period_us", "100000");
  EXPECT_EQ(usable_cpus_from(8, self, root_), 8);
  write("cpu,cpuacct/docker/abc/cpu.cfs_quota_us", "200000");
  EXPECT_EQ(usable_cpus_from(8, self, root_), 2);
  // Inside a container without a cgroup namespace the line names the host's path, which does
  // not exist there; the container's own limit is at the mount's top.
  fs::remove_all(fs::path(root_) / "cpu,cpuacct/docker");
  write("cpu,cpuacct/cpu.cfs_quota_us", "250000");
  write("cpu,cpuacct/cpu.cfs_period_us", "100000");
  EXPECT_EQ(usable_cpus_from(8, self, root_), 3);
  // "cpuacct" alone is not the cpu controller.
  EXPECT_EQ(usable_cpus_from(8, "2:cpuacct:/\n", root_), 8);
}

TEST_F(UsableCpus, HybridMountReadsTheUnifiedTree) {
  write("unified/cpu.max", "100000 100000");
  EXPECT_EQ(usable_cpus_from(4, "1:cpu:/\n0::/\n", root_), 1);
}

TEST_F(UsableCpus, UnreadableValuesSetNoLimit) {
  write("cpu.max", "garbage");
  EXPECT_EQ(usable_cpus_from(4, "0::/\n", root_), 4);
  write("cpu.max", "12x 100000");
  EXPECT_EQ(usable_cpus_from(4, "0::/\n", root_), 4);
  write("cpu.max", "100000 0");
  EXPECT_EQ(usable_cpus_from(4, "0::/\n", root_), 4);
}

TEST_F(UsableCpus, ThisProcessHasAtLeastOne) {
  EXPECT_GE(usable_cpus(), 1);
}

}  // namespace
}  // namespace pgsluice
