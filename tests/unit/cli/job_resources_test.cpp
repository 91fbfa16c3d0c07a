// SPDX-License-Identifier: Apache-2.0
#include "spec/job_resources.h"

#include <gtest/gtest.h>

// GCC 12 at -O1 takes an assignment to a fresh JobOptions' optional string
// for a read of an unset string (-Wmaybe-uninitialized), a false positive
// that comes and goes with the struct's size.
#pragma GCC diagnostic push
#if !defined(__clang__)  // clang has no such warning
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

namespace cohort::cli {
namespace {

NodeShape MustResolve(const JobOptions& options) {
  absl::StatusOr<NodeShape> shape = ResolveShape(options);
  EXPECT_TRUE(shape.ok()) << shape.status();
  return shape.value_or(NodeShape{});
}

std::string Refusal(const JobOptions& options) {
  absl::StatusOr<NodeShape> shape = ResolveShape(options);
  EXPECT_FALSE(shape.ok());
  return shape.ok() ? std::string() : std::string(shape.status().message());
}

TEST(JobResourcesTest, NodeRangesAndCounts) {
  EXPECT_EQ(ParseNodeRange("4")->min, 4);
  EXPECT_EQ(ParseNodeRange("2-4")->max, 4);
  // As Slurm's: -N-3 is one to three nodes.
  EXPECT_EQ(ParseNodeRange("-3")->min, 1);
  EXPECT_EQ(ParseNodeRange("-3")->max, 3);
  for (const char* bad : {"", "0", "4-2", "x", "2-", "-0", "--3", "1-2-3"}) {
    EXPECT_FALSE(ParseNodeRange(bad).ok()) << bad;
  }
  EXPECT_EQ(ParseCount("12"), 12);
  EXPECT_EQ(ParseCount("12x"), std::nullopt);
}

TEST(JobResourcesTest, GresAndGpusWithAndWithoutTypes) {
  EXPECT_EQ(ParseGres("gpu")->count, 1);
  EXPECT_EQ(ParseGres("gpu:8")->count, 8);
  EXPECT_EQ(ParseGres("gpu:h100:8")->type, "h100");
  EXPECT_EQ(ParseGres("gpu:h100")->count, 1);
  EXPECT_EQ(ParseGpus("a100:4")->type, "a100");
  EXPECT_EQ(ParseGpus("16")->count, 16);
  for (const char* bad :
       {"mps:1", "gpu:", "gpu:h100:x", "gpu:8:h100", "gpu:h100:-1", "gpu:-1", "gpus:2"}) {
    EXPECT_FALSE(ParseGres(bad).ok()) << bad;
  }
  EXPECT_FALSE(ParseGpus("8:h100").ok());
}

TEST(JobResourcesTest, GpusInAllSpreadEvenlyOverTheNodes) {
  JobOptions o;
  o.nodes = 2;
  o.gpus = "h100:16";
  const NodeShape shape = MustResolve(o);
  EXPECT_EQ(shape.gpus_per_node, 8);
  EXPECT_EQ(shape.gpu_type, "h100");
  o.gpus = "3";
  EXPECT_EQ(Refusal(o),
            "-G/--gpus=3 does not split evenly over 2 nodes; every node of a job holds the same "
            "GPUs: ask for a multiple of -N, or use --gpus-per-node");
}

TEST(JobResourcesTest, PerTaskPerGpuAndPerCpuBecomePerNode) {
  JobOptions o;
  o.tasks_per_node = 4;
  o.gpus_per_task = 2;
  o.cpus_per_gpu = 3;
  o.mem_per_gpu = "10G";
  NodeShape shape = MustResolve(o);
  EXPECT_EQ(shape.gpus_per_node, 8);
  EXPECT_EQ(shape.cpus_per_task, 6);  // 3 x 8 GPUs over 4 ranks
  EXPECT_EQ(shape.memory_mb, 8 * 10 * 1024);
  JobOptions cpu;
  cpu.ntasks = 4;
  cpu.nodes = 2;
  cpu.cpus_per_task = 2;
  cpu.mem_per_cpu = "1000M";
  shape = MustResolve(cpu);
  EXPECT_EQ(shape.tasks_per_node, 2);
  EXPECT_EQ(shape.memory_mb, 4000);
}

// Open MPI's mpirun starts its daemons with `srun --ntasks-per-node=1
// --ntasks=2` and no -N; Slurm takes the node count from the two.
TEST(JobResourcesTest, TasksAndTasksPerNodeWithoutNodesMakeTheNodeCount) {
  JobOptions o;
  o.ntasks = 2;
  o.tasks_per_node = 1;
  NodeShape shape = MustResolve(o);
  EXPECT_EQ(shape.nodes, 2);
  EXPECT_EQ(shape.tasks_per_node, 1);
  o.ntasks = 8;
  o.tasks_per_node = 4;
  EXPECT_EQ(MustResolve(o).nodes, 2);
  // With -n, --ntasks-per-node is the most per node: 6 over 2 nodes is 3.
  o.ntasks = 6;
  shape = MustResolve(o);
  EXPECT_EQ(shape.nodes, 2);
  EXPECT_EQ(shape.tasks_per_node, 3);
  o.ntasks = 9;
  o.tasks_per_node = 3;
  EXPECT_EQ(MustResolve(o).nodes, 3);
  o.ntasks = 10;
  o.tasks_per_node = 4;
  EXPECT_EQ(Refusal(o),
            "-n/--ntasks 10 does not split evenly over 3 nodes; every node of a job runs the same "
            "number of ranks: ask for a multiple of -N, or use --ntasks-per-node");
  o.nodes = 1;
  o.ntasks = 2;
  o.tasks_per_node = 1;
  EXPECT_EQ(Refusal(o),
            "-n/--ntasks 2 over 1 node is 2 per node, more than --ntasks-per-node 1: ask for more "
            "nodes (-N) or fewer tasks");
}

TEST(JobResourcesTest, TwoWaysOfSayingOneThingAreRefusedNamingBoth) {
  JobOptions o;
  o.gpus_per_node = 2;
  o.gpus = "4";
  EXPECT_EQ(Refusal(o),
            "--gpus-per-node and -G/--gpus both say how many GPUs the job has; give only one of "
            "them");
  JobOptions memory;
  memory.memory = "16G";
  memory.mem_per_cpu = "1G";
  EXPECT_EQ(Refusal(memory),
            "--mem and --mem-per-cpu both say how much memory the job has; give only one of them");
  JobOptions cpus;
  cpus.cpus_per_gpu = 4;
  EXPECT_EQ(Refusal(cpus),
            "--cpus-per-gpu needs GPUs: add --gpus-per-node, --gpus or --gres=gpu:N, or use -c");
}

}  // namespace
}  // namespace cohort::cli

#pragma GCC diagnostic pop
