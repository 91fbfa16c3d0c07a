// SPDX-License-Identifier: Apache-2.0
#include "cohort/launch/launch_env.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstddef>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace cohort::launch {
namespace {

// A two-node, four-ranks-per-node job as the controller would launch it on
// its second node.
LaunchContext TrainingJob() {
  LaunchContext context;
  context.job_id = 42;
  context.job_name = "train";
  context.user_name = "alice";
  context.partition = "gpu";
  context.cluster_name = "lab";
  context.nodelist = "gpu[003-004]";
  context.num_nodes = 2;
  context.node_rank = 1;
  context.node_name = "gpu004";
  context.tasks_per_node = 4;
  context.cpus_per_task = 8;
  context.gpus = {0, 1, 2, 3};
  context.master_addr = "gpu003";
  context.master_port = 29500;
  context.submit_dir = "/home/alice/run";
  context.base_env = {{"PATH", "/usr/bin:/bin"}, {"HOME", "/home/alice"}};
  return context;
}

// The value of `name`, or none; fails the test when it appears twice.
std::optional<std::string> Get(const std::vector<std::string>& env, const std::string& name) {
  std::optional<std::string> found;
  for (const std::string& entry : env) {
    if (entry.compare(0, name.size() + 1, name + "=") != 0) continue;
    EXPECT_FALSE(found.has_value()) << name << " set twice";
    found = entry.substr(name.size() + 1);
  }
  return found;
}

std::vector<std::string> Names(const std::vector<std::string>& env) {
  std::vector<std::string> names;
  for (const std::string& entry : env) names.push_back(entry.substr(0, entry.find('=')));
  return names;
}

TEST(BuildRankEnvironmentTest, RanksFollowSlurmArithmetic) {
  const std::vector<std::string> env = BuildRankEnvironment(TrainingJob(), 2);
  const std::map<std::string, std::string> expected = {
      {"RANK", "6"},          {"WORLD_SIZE", "8"},
      {"LOCAL_RANK", "2"},    {"LOCAL_WORLD_SIZE", "4"},
      {"NODE_RANK", "1"},     {"GROUP_RANK", "1"},
      {"SLURM_PROCID", "6"},  {"SLURM_LOCALID", "2"},
      {"SLURM_NODEID", "1"},  {"SLURM_NTASKS", "8"},
      {"SLURM_NPROCS", "8"},  {"SLURM_NTASKS_PER_NODE", "4"},
      {"SLURM_NNODES", "2"},  {"SLURM_JOB_NUM_NODES", "2"},
      {"COHORT_NNODES", "2"}, {"COHORT_NODE_RANK", "1"},
  };
  for (const auto& [name, value] : expected) EXPECT_EQ(Get(env, name), value) << name;
}

TEST(BuildRankEnvironmentTest, TheJobsStartAndEndTimes) {
  LaunchContext context = TrainingJob();
  EXPECT_EQ(Get(BuildRankEnvironment(context, 0), "SLURM_JOB_START_TIME"), std::nullopt);
  context.job_start_s = 1764900000;
  context.time_limit_s = 3600;
  const std::vector<std::string> env = BuildRankEnvironment(context, 0);
  EXPECT_EQ(Get(env, "SLURM_JOB_START_TIME"), "1764900000");
  EXPECT_EQ(Get(env, "SLURM_JOB_END_TIME"), "1764903600");
  // No limit: no end.
  context.time_limit_s = 0;
  EXPECT_EQ(Get(BuildRankEnvironment(context, 0), "SLURM_JOB_END_TIME"), std::nullopt);
}

TEST(BuildRankEnvironmentTest, OvercommitIsSaidOnlyWhenAsked) {
  LaunchContext context = TrainingJob();
  EXPECT_EQ(Get(BuildRankEnvironment(context, 0), "SLURM_OVERCOMMIT"), std::nullopt);
  context.overcommit = true;
  EXPECT_EQ(Get(BuildRankEnvironment(context, 0), "SLURM_OVERCOMMIT"), "1");
}

TEST(BuildRankEnvironmentTest, SlurmResourceVariablesInSlurmsForms) {
  LaunchContext context = TrainingJob();
  context.account = "vision";
  context.cpus_on_node = 64;
  context.memory_mb = 512000;
  const std::vector<std::string> env = BuildRankEnvironment(context, 1);
  EXPECT_EQ(Get(env, "SLURM_TASKS_PER_NODE"), std::to_string(context.tasks_per_node) + "(x2)");
  EXPECT_EQ(Get(env, "SLURM_JOB_ACCOUNT"), "vision");
  EXPECT_EQ(Get(env, "SLURM_CPUS_ON_NODE"), "64");
  EXPECT_EQ(Get(env, "SLURM_JOB_CPUS_PER_NODE"), "64(x2)");
  EXPECT_EQ(Get(env, "SLURM_MEM_PER_NODE"), "512000");
  EXPECT_EQ(Get(env, "SLURM_GPUS_ON_NODE"), "4");
  EXPECT_EQ(Get(env, "SLURM_JOB_GPUS"), "0,1,2,3");
  EXPECT_EQ(Get(env, "SLURM_ARRAY_JOB_ID"), std::nullopt);
  context.array_job_id = 40;
  context.array_task_id = 2;
  const std::vector<std::string> task = BuildRankEnvironment(context, 1);
  EXPECT_EQ(Get(task, "SLURM_ARRAY_JOB_ID"), "40");
  EXPECT_EQ(Get(task, "SLURM_ARRAY_TASK_ID"), "2");
  EXPECT_EQ(Get(task, "COHORT_ARRAY_TASK_ID"), "2");
  EXPECT_EQ(Get(task, "SLURM_ARRAY_TASK_COUNT"), std::nullopt) << "only with the array's range";
  context.array_task_min = 0;
  context.array_task_max = 8;
  context.array_task_count = 5;
  context.array_task_step = 2;
  const auto ranged = BuildRankEnvironment(context, 0);
  EXPECT_EQ(Get(ranged, "SLURM_ARRAY_TASK_MIN"), "0");
  EXPECT_EQ(Get(ranged, "SLURM_ARRAY_TASK_MAX"), "8");
  EXPECT_EQ(Get(ranged, "SLURM_ARRAY_TASK_COUNT"), "5");
  EXPECT_EQ(Get(ranged, "SLURM_ARRAY_TASK_STEP"), "2");
  EXPECT_EQ(Get(ranged, "COHORT_ARRAY_TASK_STEP"), "2");
  EXPECT_EQ(Get(ranged, "COHORT_ARRAY_JOB_ID"), "40");
}

TEST(BuildRankEnvironmentTest, JobFacts) {
  const std::vector<std::string> env = BuildRankEnvironment(TrainingJob(), 0);
  const std::map<std::string, std::string> expected = {
      {"COHORT_JOB_ID", "42"},
      {"COHORT_JOB_NAME", "train"},
      {"COHORT_NODELIST", "gpu[003-004]"},
      {"COHORT_NODENAME", "gpu004"},
      {"COHORT_CLUSTER", "lab"},
      {"COHORT_PARTITION", "gpu"},
      {"MASTER_ADDR", "gpu003"},
      {"MASTER_PORT", "29500"},
      {"SLURM_JOB_ID", "42"},
      {"SLURM_JOBID", "42"},
      {"SLURM_JOB_NAME", "train"},
      {"SLURM_JOB_NODELIST", "gpu[003-004]"},
      {"SLURM_NODELIST", "gpu[003-004]"},
      {"SLURM_CPUS_PER_TASK", "8"},
      {"SLURM_SUBMIT_DIR", "/home/alice/run"},
      {"SLURM_JOB_PARTITION", "gpu"},
      {"SLURM_CLUSTER_NAME", "lab"},
      {"SLURMD_NODENAME", "gpu004"},
      {"SLURM_JOB_USER", "alice"},
      {"CUDA_VISIBLE_DEVICES", "0,1,2,3"},
  };
  for (const auto& [name, value] : expected) EXPECT_EQ(Get(env, name), value) << name;
}

// As Slurm: only a job started again has SLURM_RESTART_COUNT, so that
// scripts can test for it to resume from a checkpoint.
TEST(BuildRankEnvironmentTest, RestartCountOnlyOnceStartedAgain) {
  LaunchContext context = TrainingJob();
  EXPECT_EQ(Get(BuildRankEnvironment(context, 0), "SLURM_RESTART_COUNT"), std::nullopt);
  context.restart_count = 2;
  EXPECT_EQ(Get(BuildRankEnvironment(context, 0), "SLURM_RESTART_COUNT"), "2");
  context.kind = LaunchKind::kBatch;
  EXPECT_EQ(Get(BuildRankEnvironment(context, 0), "SLURM_RESTART_COUNT"), "2");
}

TEST(BuildRankEnvironmentTest, TheLaunchIsOneStepOverTheWholeGang) {
  LaunchContext context = TrainingJob();
  const std::vector<std::string> env = BuildRankEnvironment(context, 0);
  const std::map<std::string, std::string> expected = {
      {"SLURM_STEP_ID", "0"},
      {"SLURM_STEPID", "0"},
      {"SLURM_STEP_NODELIST", "gpu[003-004]"},
      {"SLURM_STEP_NUM_NODES", "2"},
      {"SLURM_STEP_NUM_TASKS", "8"},
      {"SLURM_STEP_TASKS_PER_NODE", "4(x2)"},
  };
  for (const auto& [name, value] : expected) EXPECT_EQ(Get(env, name), value) << name;
  context.step_id = 3;
  EXPECT_EQ(Get(BuildRankEnvironment(context, 0), "SLURM_STEPID"), "3");
}

TEST(BuildRankEnvironmentTest, BaseFirstThenLaunchVariablesInOrder) {
  const std::vector<std::string> names = Names(BuildRankEnvironment(TrainingJob(), 0));
  ASSERT_GE(names.size(), 3u);
  EXPECT_EQ(names[0], "PATH");
  EXPECT_EQ(names[1], "HOME");
  EXPECT_EQ(names[2], "COHORT_JOB_ID");
  EXPECT_EQ(names.back(), "CUDA_VISIBLE_DEVICES");
  const auto at = [&](const std::string& name) {
    return std::find(names.begin(), names.end(), name) - names.begin();
  };
  EXPECT_LT(at("COHORT_PARTITION"), at("RANK"));
  EXPECT_LT(at("MASTER_PORT"), at("SLURM_JOB_ID"));
  EXPECT_LT(at("SLURM_JOB_USER"), at("CUDA_VISIBLE_DEVICES"));
}

TEST(BuildRankEnvironmentTest, LaunchVariablesReplaceExportedOnes) {
  LaunchContext context = TrainingJob();
  context.base_env = {
      {"RANK", "99"}, {"SLURM_JOB_ID", "7"}, {"CUDA_VISIBLE_DEVICES", "5"}, {"KEEP", "yes"}};
  const std::vector<std::string> env = BuildRankEnvironment(context, 1);
  EXPECT_EQ(Get(env, "RANK"), "5");
  EXPECT_EQ(Get(env, "SLURM_JOB_ID"), "42");
  EXPECT_EQ(Get(env, "CUDA_VISIBLE_DEVICES"), "0,1,2,3");
  EXPECT_EQ(Get(env, "KEEP"), "yes");
  EXPECT_EQ(Names(env).front(), "KEEP");
}

TEST(BuildRankEnvironmentTest, DuplicateExportKeepsFirstPlaceLastValue) {
  LaunchContext context = TrainingJob();
  context.base_env = {{"A", "1"}, {"B", "2"}, {"A", "3"}};
  const std::vector<std::string> env = BuildRankEnvironment(context, 0);
  ASSERT_GE(env.size(), 2u);
  EXPECT_EQ(env[0], "A=3");
  EXPECT_EQ(env[1], "B=2");
}

TEST(BuildRankEnvironmentTest, UnwritableNamesAreDropped) {
  LaunchContext context = TrainingJob();
  context.base_env = {{"", "x"}, {"A=B", "y"}, {"OK", "a=b"}};
  const std::vector<std::string> env = BuildRankEnvironment(context, 0);
  EXPECT_EQ(env.front(), "OK=a=b");
  EXPECT_EQ(std::count_if(env.begin(), env.end(),
                          [](const std::string& e) { return e.starts_with("A=") || e[0] == '='; }),
            0);
}

TEST(BuildRankEnvironmentTest, NoGpusMeansNoCudaVisibleDevices) {
  LaunchContext context = TrainingJob();
  context.gpus.clear();
  context.base_env.push_back({"CUDA_VISIBLE_DEVICES", "0,1"});
  EXPECT_EQ(Get(BuildRankEnvironment(context, 0), "CUDA_VISIBLE_DEVICES"), std::nullopt);
}

TEST(BuildRankEnvironmentTest, NodelistIsCompressedAsSlurmPrintsIt) {
  LaunchContext context = TrainingJob();
  context.nodelist = "gpu002,gpu003,gpu004";
  context.num_nodes = 3;
  const std::vector<std::string> env = BuildRankEnvironment(context, 0);
  EXPECT_EQ(Get(env, "SLURM_JOB_NODELIST"), "gpu[002-004]");
  EXPECT_EQ(Get(env, "COHORT_NODELIST"), "gpu[002-004]");
}

// Node rank i is the nodelist's i-th name (tools take the first for
// MASTER_ADDR): a gang in topology order keeps that order, folded.
TEST(BuildRankEnvironmentTest, NodelistKeepsNodeRankOrder) {
  LaunchContext context = TrainingJob();
  context.nodelist = "gpu005,gpu006,gpu001,gpu002";
  context.num_nodes = 4;
  context.topology_addr = "spine.leaf2.gpu005";
  context.topology_addr_pattern = "switch.switch.node";
  const std::vector<std::string> env = BuildRankEnvironment(context, 0);
  EXPECT_EQ(Get(env, "SLURM_JOB_NODELIST"), "gpu[005-006],gpu[001-002]");
  EXPECT_EQ(Get(env, "SLURM_NODELIST"), "gpu[005-006],gpu[001-002]");
  EXPECT_EQ(Get(env, "SLURM_TOPOLOGY_ADDR"), "spine.leaf2.gpu005");
  EXPECT_EQ(Get(env, "SLURM_TOPOLOGY_ADDR_PATTERN"), "switch.switch.node");
}

TEST(BuildRankEnvironmentTest, MalformedNodelistIsPassedOnAsWritten) {
  LaunchContext context = TrainingJob();
  context.nodelist = "gpu[3-1]";
  context.master_addr.clear();
  const std::vector<std::string> env = BuildRankEnvironment(context, 0);
  EXPECT_EQ(Get(env, "SLURM_NODELIST"), "gpu[3-1]");
  EXPECT_EQ(Get(env, "MASTER_ADDR"), std::nullopt);
}

TEST(BuildRankEnvironmentTest, MasterAddrDefaultsToTheGangsFirstNode) {
  LaunchContext context = TrainingJob();
  context.master_addr.clear();
  context.nodelist = "gpu009,gpu003";
  EXPECT_EQ(Get(BuildRankEnvironment(context, 0), "MASTER_ADDR"), "gpu009");
}

TEST(BuildRankEnvironmentTest, NoPortLeavesTheExportedOne) {
  LaunchContext context = TrainingJob();
  context.master_port = 0;
  context.base_env = {{"MASTER_PORT", "12345"}};
  EXPECT_EQ(Get(BuildRankEnvironment(context, 0), "MASTER_PORT"), "12345");
}

TEST(BuildRankEnvironmentTest, HugeSizesDoNotOverflow) {
  LaunchContext context = TrainingJob();
  context.num_nodes = 100'000;
  context.node_rank = 99'999;
  context.tasks_per_node = 100'000;
  const std::vector<std::string> env = BuildRankEnvironment(context, 99'999);
  EXPECT_EQ(Get(env, "WORLD_SIZE"), "10000000000");
  EXPECT_EQ(Get(env, "RANK"), "9999999999");
}

// --- counts per node ---------------------------------------------------------

TEST(CountsPerNodeTest, SlurmsCompressedFormRoundTripsAndIsBounded) {
  const std::vector<int> counts = {2, 2, 2, 1};
  EXPECT_EQ(FormatCountsPerNode(counts), "2(x3),1");
  EXPECT_EQ(ParseCountsPerNode("2(x3),1", 16).value(), counts);
  EXPECT_EQ(ParseCountsPerNode("4", 1).value(), std::vector<int>{4});
  for (const std::string_view bad :
       {"", "x", "2(x0)", "2(x3", "2(3)", "2,", ",2", "-1", "2(x-1)", "2(x99999999999999)"}) {
    EXPECT_FALSE(ParseCountsPerNode(bad, 16).ok()) << bad;
  }
  EXPECT_EQ(ParseCountsPerNode("1(x17)", 16).status().message(),
            "tasks per node \"1(x17)\": expected counts such as \"2(x3),1\" for at most 16 "
            "nodes");
}

// --- output patterns ---------------------------------------------------------

TEST(ExpandOutputPatternTest, EveryCode) {
  LaunchContext context = TrainingJob();
  EXPECT_EQ(ExpandOutputPattern("%x-%j-%u-%N-%n-%t.out", context, 6),
            "train-42-alice-gpu004-1-6.out");
  EXPECT_EQ(ExpandOutputPattern("cohort-%j.out", context, 0), "cohort-42.out");
  // Not an array: %A is the job's id, %a Slurm's NO_VAL.
  EXPECT_EQ(ExpandOutputPattern("%A_%a.out", context, 0), "42_4294967294.out");
  context.array_job_id = 40;
  context.array_task_id = 2;
  EXPECT_EQ(ExpandOutputPattern("%A_%a.out", context, 0), "40_2.out");
  EXPECT_EQ(ExpandOutputPattern("100%%-%j", context, 0), "100%-42");
}

// dask-jobqueue writes each worker's log to `-e DIR/dask-worker-%J.err`.
TEST(ExpandOutputPatternTest, JobDotStepAndStep) {
  LaunchContext context = TrainingJob();
  context.kind = LaunchKind::kBatch;
  EXPECT_EQ(ExpandOutputPattern("w-%J.err", context, 0), "w-42.err");
  EXPECT_EQ(ExpandOutputPattern("%j.%s", context, 0), "42.batch");
  context.kind = LaunchKind::kStep;
  context.step_id = 3;
  EXPECT_EQ(ExpandOutputPattern("w-%J.err", context, 0), "w-42.3.err");
  EXPECT_EQ(ExpandOutputPattern("%s", context, 0), "3");
  context.kind = LaunchKind::kGang;
  context.step_id = 0;
  EXPECT_EQ(ExpandOutputPattern("%J", context, 0), "42.0");
}

TEST(ExpandOutputPatternTest, UnknownCodesAndTrailingPercentStay) {
  const LaunchContext context = TrainingJob();
  EXPECT_EQ(ExpandOutputPattern("%Z_%b-%y.out", context, 0), "%Z_%b-%y.out");
  EXPECT_EQ(ExpandOutputPattern("log%", context, 0), "log%");
  EXPECT_EQ(ExpandOutputPattern("", context, 0), "");
  EXPECT_EQ(ExpandOutputPattern("%%%j", context, 0), "%42");
}

TEST(PatternIsPerRankTest, OnlyAnUnescapedT) {
  EXPECT_TRUE(PatternIsPerRank("out-%t.log"));
  EXPECT_TRUE(PatternIsPerRank("%%%t"));
  EXPECT_FALSE(PatternIsPerRank("out-%j.log"));
  EXPECT_FALSE(PatternIsPerRank("out-%%t.log"));
  EXPECT_FALSE(PatternIsPerRank("%"));
  EXPECT_FALSE(PatternIsPerRank(""));
}

}  // namespace
}  // namespace cohort::launch
