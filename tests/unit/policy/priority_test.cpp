// SPDX-License-Identifier: Apache-2.0
#include "cohort/policy/priority.h"

#include <gtest/gtest.h>

#include <chrono>

#include "cohort/config/cluster_config.h"

namespace cohort::policy {
namespace {

using std::chrono::hours;
using std::chrono::milliseconds;

config::PriorityWeights Weights() {
  config::PriorityWeights weights;
  weights.max_age = hours(10);
  return weights;
}

TEST(PriorityTest, AgeGrowsToItsCap) {
  const config::PriorityWeights weights = Weights();
  PriorityInputs in;
  in.age = hours(5);
  EXPECT_DOUBLE_EQ(ComputePriority(weights, in).age, 0.5);
  in.age = hours(30);
  EXPECT_DOUBLE_EQ(ComputePriority(weights, in).age, 1.0);
  in.age = milliseconds(-5);
  EXPECT_DOUBLE_EQ(ComputePriority(weights, in).age, 0.0);
}

TEST(PriorityTest, JobSizeIsTheClusterFractionCappedAtOne) {
  const config::PriorityWeights weights = Weights();
  PriorityInputs in;
  in.cluster_nodes = 16;
  in.nodes = 4;
  EXPECT_DOUBLE_EQ(ComputePriority(weights, in).job_size, 0.25);
  in.nodes = 16;
  EXPECT_DOUBLE_EQ(ComputePriority(weights, in).job_size, 1.0);
  in.nodes = 40;
  EXPECT_DOUBLE_EQ(ComputePriority(weights, in).job_size, 1.0);
}

TEST(PriorityTest, FavorSmallGivesOneNodeTheLargestSizeFactor) {
  config::PriorityWeights weights = Weights();
  weights.favor_small = true;
  PriorityInputs in;
  in.cluster_nodes = 16;
  in.nodes = 1;
  EXPECT_DOUBLE_EQ(ComputePriority(weights, in).job_size, 1.0);
  in.nodes = 5;
  EXPECT_DOUBLE_EQ(ComputePriority(weights, in).job_size, 0.75);
  in.nodes = 16;
  EXPECT_DOUBLE_EQ(ComputePriority(weights, in).job_size, 1.0 / 16);
  in.nodes = 40;
  EXPECT_DOUBLE_EQ(ComputePriority(weights, in).job_size, 0.0);
}

TEST(PriorityTest, PartitionAndQosAreRatiosToTheHighest) {
  const config::PriorityWeights weights = Weights();
  PriorityInputs in;
  in.partition_tier = 1;
  in.max_partition_tier = 4;
  in.qos_priority = 50;
  in.max_qos_priority = 200;
  PriorityFactors f = ComputePriority(weights, in);
  EXPECT_DOUBLE_EQ(f.partition, 0.25);
  EXPECT_DOUBLE_EQ(f.qos, 0.25);
  in.partition_tier = 0;
  in.max_partition_tier = 0;
  in.qos_priority = 0;
  in.max_qos_priority = 0;
  f = ComputePriority(weights, in);
  EXPECT_DOUBLE_EQ(f.partition, 0.0);
  EXPECT_DOUBLE_EQ(f.qos, 0.0);
}

TEST(PriorityTest, FairShareIsKeptWithinZeroAndOne) {
  const config::PriorityWeights weights = Weights();
  PriorityInputs in;
  in.fairshare = 0.3;
  EXPECT_DOUBLE_EQ(ComputePriority(weights, in).fairshare, 0.3);
  in.fairshare = 1.5;
  EXPECT_DOUBLE_EQ(ComputePriority(weights, in).fairshare, 1.0);
  in.fairshare = -0.5;
  EXPECT_DOUBLE_EQ(ComputePriority(weights, in).fairshare, 0.0);
}

TEST(PriorityTest, TotalIsTheWeightedSumRoundedDown) {
  config::PriorityWeights weights = Weights();
  weights.age = 1000;
  weights.fairshare = 10000;
  weights.job_size = 1000;
  weights.partition = 1000;
  weights.qos = 2000;
  PriorityInputs in;
  in.age = hours(5);       // 0.5 → 500
  in.fairshare = 0.33333;  // → 3333.3
  in.nodes = 4;            // 0.25 → 250
  in.cluster_nodes = 16;
  in.partition_tier = 1;  // 0.5 → 500
  in.max_partition_tier = 2;
  in.qos_priority = 1;  // 0.5 → 1000
  in.max_qos_priority = 2;
  EXPECT_EQ(ComputePriority(weights, in).total, 5583);
}

TEST(PriorityTest, WeightsSelectTheFactorsThatCount) {
  config::PriorityWeights weights = Weights();
  weights.age = 0;
  weights.fairshare = 0;
  weights.job_size = 0;
  weights.partition = 0;
  weights.qos = 7;
  PriorityInputs in;
  in.age = hours(100);
  in.fairshare = 1;
  in.nodes = 8;
  in.cluster_nodes = 8;
  in.qos_priority = 3;
  in.max_qos_priority = 3;
  EXPECT_EQ(ComputePriority(weights, in).total, 7);
}

TEST(PriorityTest, RatiosThatAreWholeInDecimalStayWhole) {
  // 3 ÷ 10 × 1000 must count as 300, not 299 from binary rounding.
  config::PriorityWeights weights = Weights();
  weights.age = 0;
  weights.fairshare = 0;
  weights.partition = 0;
  weights.qos = 0;
  weights.job_size = 1000;
  PriorityInputs in;
  in.cluster_nodes = 10;
  for (int nodes = 1; nodes <= 10; ++nodes) {
    in.nodes = nodes;
    EXPECT_EQ(ComputePriority(weights, in).total, nodes * 100) << nodes;
  }
}

}  // namespace
}  // namespace cohort::policy
