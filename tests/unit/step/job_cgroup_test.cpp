// SPDX-License-Identifier: Apache-2.0
#include "job_cgroup.h"

#include <gtest/gtest.h>
#include <sys/sysmacros.h>

#include <string>

namespace cohort::step {
namespace {

TEST(JobCgroupTest, FindsTheUnifiedLineOfProcSelfCgroup) {
  EXPECT_EQ(UnifiedCgroupPath("0::/system.slice/cohort-agent.service\n"),
            "/system.slice/cohort-agent.service");
  // A hybrid system lists v1 hierarchies too.
  EXPECT_EQ(UnifiedCgroupPath("12:memory:/x\n1:name=systemd:/y\n0::/user.slice\n"), "/user.slice");
  EXPECT_EQ(UnifiedCgroupPath("0::/\n"), "/");
  EXPECT_FALSE(UnifiedCgroupPath("4:memory:/x\n3:cpu:/\n"));
  EXPECT_FALSE(UnifiedCgroupPath(""));
}

TEST(JobCgroupTest, FindsEachV1HierarchysLine) {
  const std::string text =
      "9:name=systemd:/\n8:cpu,cpuacct:/a\n5:devices:/\n4:memory:/process_api/841a\n"
      "3:cpuset:/\n0::/\n";
  EXPECT_EQ(V1CgroupPath(text, "memory"), "/process_api/841a");
  EXPECT_EQ(V1CgroupPath(text, "cpuset"), "/");
  EXPECT_EQ(V1CgroupPath(text, "cpuacct"), "/a") << "a hierarchy of several controllers";
  EXPECT_FALSE(V1CgroupPath(text, "cpusets"));
  EXPECT_FALSE(V1CgroupPath(text, "systemd")) << "a named hierarchy is no controller";
  EXPECT_FALSE(V1CgroupPath("0::/user.slice\n", "memory"));
}

TEST(JobCgroupTest, EachSpoolHasItsOwnAgentFolder) {
  EXPECT_EQ(AgentCgroupName("/var/spool/cohort"), AgentCgroupName("/var/spool/cohort"));
  EXPECT_NE(AgentCgroupName("/tmp/a/spool"), AgentCgroupName("/tmp/b/spool"));
  EXPECT_EQ(AgentCgroupName("/tmp/a/spool").size(), 15U);
  EXPECT_TRUE(AgentCgroupName("/tmp/a/spool").starts_with("cohort-"));
}

TEST(JobCgroupTest, DeviceRulesNameMajorAndMinor) {
  EXPECT_EQ(DeviceRule(makedev(195, 3)), "c 195:3 rwm");
  EXPECT_EQ(DeviceRule(makedev(226, 128)), "c 226:128 rwm");
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
