// SPDX-License-Identifier: Apache-2.0
#include "agents/usage_book.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <optional>
#include <string>
#include <vector>

namespace cohort::controller {
namespace {

v1::LaunchUsage Launch(JobId job, std::optional<int> step, std::uint64_t gpus,
                       std::vector<std::array<std::int64_t, 4>> tasks) {
  v1::LaunchUsage launch;
  launch.set_job_id(job);
  launch.set_attempt(1);
  if (step) launch.set_step(*step);
  launch.set_gpus(gpus);
  for (const auto& [rank, cpu_ms, rss_kb, max_rss_kb] : tasks) {
    v1::TaskSample& task = *launch.add_tasks();
    task.set_rank(static_cast<int>(rank));
    task.set_cpu_ms(cpu_ms);
    task.set_rss_kb(rss_kb);
    task.set_max_rss_kb(max_rss_kb);
  }
  return launch;
}

void AddGpu(v1::UsageReport& report, int index, int util, std::int64_t mem_mb) {
  v1::GpuSample& gpu = *report.add_gpus();
  gpu.set_index(index);
  gpu.set_util_pct(util);
  gpu.set_mem_used_mb(mem_mb);
}

// Records every launch of `report` as the hub would have accepted it.
void RecordAll(UsageBook& book, topology::NodeId node, const std::string& name, Millis at,
               const v1::UsageReport& report) {
  std::vector<UsageBook::Accepted> accepted;
  for (const v1::LaunchUsage& launch : report.launches()) accepted.push_back({.launch = &launch});
  book.Record(node, name, at, accepted, report);
}

TEST(UsageBookTest, SumsAStepOverItsNodesAndNamesTheLargestRank) {
  UsageBook book;
  v1::UsageReport a;
  *a.add_launches() = Launch(7, std::nullopt, 0, {{0, 500, 1000, 1000}});
  *a.add_launches() = Launch(7, 0, 0b11, {{0, 2000, 4000, 6000}, {1, 3000, 3000, 3000}});
  AddGpu(a, 0, 90, 30000);
  AddGpu(a, 1, 70, 10000);
  v1::UsageReport b;
  *b.add_launches() = Launch(7, 0, 0b01, {{2, 1000, 9000, 9500}});
  AddGpu(b, 0, 2, 100);
  RecordAll(book, 0, "n001", Millis(1000), a);
  RecordAll(book, 1, "n002", Millis(2000), b);

  const std::vector<v1::LiveUsage> launches = book.Launches(7, "batch");
  ASSERT_EQ(launches.size(), 2U);
  EXPECT_EQ(launches[0].step(), "batch");
  EXPECT_EQ(launches[0].tasks(), 1);
  const v1::LiveUsage& step = launches[1];
  EXPECT_EQ(step.step(), "0");
  EXPECT_EQ(step.nodes(), 2);
  EXPECT_EQ(step.tasks(), 3);
  EXPECT_EQ(step.sampled_ms(), 1000) << "the oldest node's sample";
  EXPECT_EQ(step.cpu_ms(), 6000);
  EXPECT_EQ(step.max_cpu_ms(), 3000);
  EXPECT_EQ(step.max_cpu_node(), "n001");
  EXPECT_EQ(step.max_cpu_task(), 1);
  EXPECT_EQ(step.rss_kb(), 16000);
  EXPECT_EQ(step.max_rss_kb(), 9500);
  EXPECT_EQ(step.max_rss_node(), "n002");
  EXPECT_EQ(step.max_rss_task(), 2);
  EXPECT_EQ(step.gpus(), 3);
  EXPECT_TRUE(step.gpu_measured());
  EXPECT_EQ(step.gpu_util_pct(), (90 + 70 + 2) / 3);
  EXPECT_EQ(step.gpu_util_max_pct(), 90);
  EXPECT_EQ(step.gpu_mem_mb(), 40100);
  EXPECT_EQ(step.gpu_mem_max_mb(), 30000);

  // The whole job counts a node's GPUs once, however many launches hold them.
  const std::optional<v1::LiveUsage> whole = book.Whole(7);
  ASSERT_TRUE(whole.has_value());
  EXPECT_EQ(whole->tasks(), 4);
  EXPECT_EQ(whole->gpus(), 3);
  EXPECT_EQ(whole->gpu_idle_since_ms(), 0) << "its GPUs are busy";
  EXPECT_FALSE(book.Whole(8).has_value());
}

TEST(UsageBookTest, ANodesNextReportReplacesItsLastAndDropsWhatEnded) {
  UsageBook book;
  v1::UsageReport first;
  *first.add_launches() = Launch(7, 0, 0, {{0, 100, 100, 100}});
  *first.add_launches() = Launch(9, std::nullopt, 0, {{0, 100, 100, 100}});
  RecordAll(book, 0, "n001", Millis(1000), first);
  v1::UsageReport second;
  *second.add_launches() = Launch(9, std::nullopt, 0, {{0, 300, 200, 200}});
  RecordAll(book, 0, "n001", Millis(2000), second);
  EXPECT_FALSE(book.Whole(7).has_value()) << "job 7's step ended on the node";
  ASSERT_TRUE(book.Whole(9).has_value());
  EXPECT_EQ(book.Whole(9)->cpu_ms(), 300);
  EXPECT_EQ(book.Jobs(), std::vector<JobId>{9});
  book.ForgetNode(0);
  EXPECT_TRUE(book.Jobs().empty());
  RecordAll(book, 0, "n001", Millis(3000), second);
  book.Forget(9);
  EXPECT_TRUE(book.Jobs().empty());
}

TEST(UsageBookTest, MarksAJobWhoseEveryGpuIsIdleSinceTheFirstIdleSample) {
  UsageBook book;
  const auto report = [](int util0, int util1) {
    v1::UsageReport r;
    *r.add_launches() = Launch(7, std::nullopt, 0b11, {{0, 100, 100, 100}});
    AddGpu(r, 0, util0, 500);
    AddGpu(r, 1, util1, 500);
    AddGpu(r, 2, 99, 500);  // another job's
    return r;
  };
  RecordAll(book, 0, "n001", Millis(1000), report(1, 50));
  EXPECT_EQ(book.Whole(7)->gpu_idle_since_ms(), 0);
  RecordAll(book, 0, "n001", Millis(2000), report(1, 4));
  RecordAll(book, 0, "n001", Millis(3000), report(0, 0));
  EXPECT_EQ(book.Whole(7)->gpu_idle_since_ms(), 2000);
  RecordAll(book, 0, "n001", Millis(4000), report(30, 0));
  EXPECT_EQ(book.Whole(7)->gpu_idle_since_ms(), 0) << "busy again";
  // A job without GPUs, or on a node without NVML, is never idle.
  v1::UsageReport cpu_only;
  *cpu_only.add_launches() = Launch(8, std::nullopt, 0, {{0, 1, 1, 1}});
  RecordAll(book, 1, "n002", Millis(5000), cpu_only);
  EXPECT_FALSE(book.Whole(8)->gpu_measured());
  EXPECT_EQ(book.Whole(8)->gpu_idle_since_ms(), 0);
}

TEST(UsageBookTest, AReportPastItsBoundsOrWithFiguresOutOfRangeIsRefused) {
  v1::UsageReport ok;
  *ok.add_launches() = Launch(7, 0, 1, {{0, 1, 1, 1}});
  AddGpu(ok, 0, 100, 80000);
  EXPECT_TRUE(CheckUsageReport(ok).ok());
  v1::UsageReport many = ok;
  for (int i = 0; i < kMostReportLaunches; ++i) *many.add_launches() = ok.launches(0);
  EXPECT_FALSE(CheckUsageReport(many).ok());
  v1::UsageReport tasks;
  std::vector<std::array<std::int64_t, 4>> lots(kMostLaunchTasks + 1, {0, 1, 1, 1});
  *tasks.add_launches() = Launch(7, 0, 1, lots);
  EXPECT_FALSE(CheckUsageReport(tasks).ok());
  v1::UsageReport percent = ok;
  percent.mutable_gpus(0)->set_util_pct(101);
  EXPECT_NE(CheckUsageReport(percent).message().find("GPU 0"), std::string_view::npos);
  v1::UsageReport index = ok;
  index.mutable_gpus(0)->set_index(kMostReportGpus);
  EXPECT_FALSE(CheckUsageReport(index).ok());
  v1::UsageReport negative = ok;
  negative.mutable_launches(0)->mutable_tasks(0)->set_rss_kb(-1);
  EXPECT_NE(CheckUsageReport(negative).message().find("job 7 rank 0"), std::string_view::npos);
}

// One rank's end: its wait4 figures, and its node's GPU figures (a
// utilization of -1: not measured).
RankUsage Rank(std::int64_t rss_kb, std::int64_t cpu_ms, int util_ave = -1, int util_max = 0,
               std::int64_t mem_max_mb = 0, std::int64_t mem_ave_mb = 0) {
  return {.max_rss_kb = rss_kb,
          .cpu_ms = cpu_ms,
          .gpu_measured = util_ave >= 0,
          .gpu_util_ave = std::max(util_ave, 0),
          .gpu_util_max = util_max,
          .gpu_mem_max_mb = mem_max_mb,
          .gpu_mem_ave_mb = mem_ave_mb};
}

TEST(TaskUsageTest, RanksAddUpAndAFigureOutOfRangeIsIgnored) {
  TaskUsage usage;
  EXPECT_TRUE(AddRankUsage(usage, Rank(1000, 300, 80, 95, 9000, 7000)));
  EXPECT_TRUE(AddRankUsage(usage, Rank(3000, 100)));
  EXPECT_EQ(usage.max_rss_kb, 3000);
  EXPECT_EQ(usage.cpu_ms, 400);
  EXPECT_EQ(usage.max_cpu_ms, 300);
  EXPECT_EQ(usage.rss_sum_kb, 4000);
  EXPECT_EQ(usage.ranks, 2);
  EXPECT_EQ(usage.gpu_ranks, 1);
  EXPECT_EQ(usage.gpu_util_sum, 80);
  EXPECT_EQ(usage.gpu_util_max, 95);
  EXPECT_EQ(usage.gpu_mem_sum_mb, 7000);
  const TaskUsage before = usage;
  EXPECT_FALSE(AddRankUsage(usage, Rank(-1, 1)));
  EXPECT_FALSE(AddRankUsage(usage, Rank(1, 1, 101)));
  EXPECT_FALSE(AddRankUsage(usage, Rank(1, std::int64_t{1} << 53)));
  EXPECT_EQ(usage.ranks, before.ranks);
  EXPECT_EQ(usage.cpu_ms, before.cpu_ms);
}

}  // namespace
}  // namespace cohort::controller
