// SPDX-License-Identifier: Apache-2.0
// What launches use, as the agent samples it: /proc's process trees and
// NVML's GPU utilization and memory (through the stand-in library).
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include <gtest/gtest.h>

#include "gpu_usage.h"
#include "process_usage.h"

namespace cohort::agent {
namespace {

TEST(ProcessUsageTest, ReadsParentCpuTimesAndResidentPagesPastAnOddName) {
  // Fields 14-17 (utime stime cutime cstime) are 10 20 30 40; rss is 500.
  const std::string stat =
      "4242 (my (odd) name) S 17 4242 4242 0 -1 4194560 100 0 0 0 10 20 30 40 20 0 3 0 "
      "12345 104857600 500 18446744073709551615";
  const std::optional<ProcessUsage> usage = ParseProcessUsage(stat);
  ASSERT_TRUE(usage.has_value());
  EXPECT_EQ(usage->ppid, 17);
  EXPECT_EQ(usage->cpu_ticks, 100);
  EXPECT_EQ(usage->rss_pages, 500);
  EXPECT_FALSE(ParseProcessUsage("4242 (cut short) S 17 4242").has_value());
  EXPECT_FALSE(ParseProcessUsage("no parentheses at all").has_value());
  EXPECT_FALSE(
      ParseProcessUsage("1 (x) S 0 1 1 0 -1 0 0 0 0 0 x 0 0 0 20 0 1 0 1 1 1").has_value());
}

TEST(ProcessUsageTest, ASubtreeAddsItsDescendantsAndNothingElse) {
  ProcessTable table;
  table.Add(100, {.ppid = 1, .cpu_ticks = 5, .rss_pages = 10});       // a rank
  table.Add(101, {.ppid = 100, .cpu_ticks = 7, .rss_pages = 20});     // its child
  table.Add(102, {.ppid = 101, .cpu_ticks = 1, .rss_pages = 1});      // and grandchild
  table.Add(200, {.ppid = 1, .cpu_ticks = 1000, .rss_pages = 1000});  // another job's
  const TreeUsage rank = table.Subtree(100, 10.0, 4);
  EXPECT_EQ(rank.cpu_ms, 130);
  EXPECT_EQ(rank.rss_kb, 124);
  EXPECT_EQ(table.Subtree(101, 10.0, 4).cpu_ms, 80);
  EXPECT_EQ(table.Subtree(999, 10.0, 4).rss_kb, 0) << "a rank that ended has nothing";
  // Parents read across a pid's reuse can loop: each pid counts once.
  ProcessTable looped;
  looped.Add(300, {.ppid = 301, .cpu_ticks = 1, .rss_pages = 1});
  looped.Add(301, {.ppid = 300, .cpu_ticks = 1, .rss_pages = 1});
  EXPECT_EQ(looped.Subtree(300, 1.0, 1).cpu_ms, 2);
}

TEST(ProcessUsageTest, ReadsThisMachinesProcesses) {
  const ProcessTable table = ProcessTable::Read();
  EXPECT_GT(table.Size(), 1U);
  const TreeUsage self = table.Subtree(::getpid(), ProcessTable::TickMs(), ProcessTable::PageKb());
  EXPECT_GT(self.rss_kb, 0) << "this test's own memory";
  EXPECT_EQ(ProcessTable::Read("/nonexistent").Size(), 0U);
}

TEST(ProcessUsageTest, AStatThatFailsToReadIsPassedOver) {
  // A process that exits between open and read fails the read (ESRCH); a
  // folder where the file should be fails it the same way (EISDIR).
  const std::string proc = ::testing::TempDir() + "proc-" + std::to_string(::getpid());
  std::filesystem::remove_all(proc);
  std::filesystem::create_directories(proc + "/7/stat");
  std::filesystem::create_directories(proc + "/8");
  std::ofstream(proc + "/8/stat") << "8 (rank) S 1 8 8 0 -1 0 0 0 0 0 1 2 0 0 20 0 1 0 1 1 3";
  ProcessTable table;
  EXPECT_NO_THROW(table = ProcessTable::Read(proc));
  EXPECT_EQ(table.Size(), 1U);
  EXPECT_EQ(table.Subtree(8, 1.0, 1).cpu_ms, 3);
  std::filesystem::remove_all(proc);
}

class GpuUsageTest : public ::testing::Test {
 protected:
  void Record(const std::string& lines) {
    std::ofstream(path_) << lines;
    ::setenv("COHORT_NVML_STANDIN", path_.c_str(), 1);
  }
  void TearDown() override { ::unsetenv("COHORT_NVML_STANDIN"); }
  std::string path_ = ::testing::TempDir() + "/nvml-usage-standin.txt";
};

TEST_F(GpuUsageTest, ReadsEachGpusUtilizationAndMemoryAsTheyChange) {
  Record("- 0 87 40960\n- 0 3 512\n");
  absl::StatusOr<std::unique_ptr<GpuUsageReader>> reader =
      GpuUsageReader::Open(COHORT_NVML_STANDIN_LIB);
  ASSERT_TRUE(reader.ok()) << reader.status();
  std::vector<GpuReading> readings = (*reader)->Read();
  ASSERT_EQ(readings.size(), 2U);
  EXPECT_EQ(readings[0].util_pct, 87);
  EXPECT_EQ(readings[0].mem_used_mb, 40960);
  EXPECT_EQ(readings[1].util_pct, 3);
  // NVML stays open between samples; each sample reads the driver anew.
  Record("- 0 0 0\n- 0 100 81920\n");
  readings = (*reader)->Read();
  ASSERT_EQ(readings.size(), 2U);
  EXPECT_EQ(readings[0].util_pct, 0);
  EXPECT_EQ(readings[1].util_pct, 100);
  EXPECT_EQ(readings[1].mem_used_mb, 81920);
}

TEST_F(GpuUsageTest, NoDriverOrAFailedStartLeavesGpusUnsampled) {
  EXPECT_TRUE(absl::IsNotFound(GpuUsageReader::Open("/nonexistent/libnvidia-ml.so.1").status()));
  ::unsetenv("COHORT_NVML_STANDIN");  // the stand-in's nvmlInit_v2 then fails
  EXPECT_TRUE(absl::IsFailedPrecondition(GpuUsageReader::Open(COHORT_NVML_STANDIN_LIB).status()));
}

}  // namespace
}  // namespace cohort::agent
