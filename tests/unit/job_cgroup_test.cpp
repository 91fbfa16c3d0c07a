// SPDX-License-Identifier: Apache-2.0
#include "job_cgroup.h"

#include <gtest/gtest.h>

#include <string>

namespace cohort::step {
namespace {

TEST(JobCgroupTest, FindsTheUnifiedLineOfProcSelfCgroup) {
  EXPECT_EQ(UnifiedCgroupPath("0::/system.slice/cohort-agent.service\n"),
            "/system.slice/cohort-agent.service");
  // A hybrid system lists v1 hierarchies too.
  EXPECT_EQ(UnifiedCgroupPath("12:memory:/x\n1:name=systemd:/y\n0::/user.slice\n"),
            "/user.slice");
  EXPECT_EQ(UnifiedCgroupPath("0::/\n"), "/");
  EXPECT_FALSE(UnifiedCgroupPath("4:memory:/x\n3:cpu:/\n"));
  EXPECT_FALSE(UnifiedCgroupPath(""));
}

TEST(JobCgroupTest, TheBaseIsTheAgentsCgroupOrTheParentOfItsLeaf) {
  EXPECT_EQ(CgroupBase(kCgroupMount, "/system.slice/cohort-agent.service"),
            "/sys/fs/cgroup/system.slice/cohort-agent.service");
  EXPECT_EQ(CgroupBase(kCgroupMount, "/system.slice/cohort-agent.service/cohort-agent"),
            "/sys/fs/cgroup/system.slice/cohort-agent.service");
  EXPECT_EQ(CgroupBase(kCgroupMount, "/"), "/sys/fs/cgroup");
  EXPECT_EQ(CgroupBase(kCgroupMount, "/cohort-agent"), "/sys/fs/cgroup");
  EXPECT_EQ(CgroupBase("/m", "/a/b/"), "/m/a/b");
}

TEST(JobCgroupTest, OneFolderPerLaunchUnderItsNode) {
  EXPECT_EQ(LaunchCgroupFolder("/sys/fs/cgroup/agent", "node05", 42, 3, -1),
            "/sys/fs/cgroup/agent/node05/cohort-job-42.3");
  // A step's launch is not its job's: ending one never touches the other.
  EXPECT_EQ(LaunchCgroupFolder("/sys/fs/cgroup/agent", "node05", 42, 3, 0),
            "/sys/fs/cgroup/agent/node05/cohort-job-42.3.0");
}

TEST(JobCgroupTest, MemoryMaxIsBytesOrMax) {
  EXPECT_EQ(MemoryMaxValue(0), "max");
  EXPECT_EQ(MemoryMaxValue(-1), "max");
  EXPECT_EQ(MemoryMaxValue(1), "1048576");
  EXPECT_EQ(MemoryMaxValue(512000), "536870912000");
  EXPECT_EQ(MemoryMaxValue(std::int64_t{1} << 60), "max");
}

}  // namespace
}  // namespace cohort::step
