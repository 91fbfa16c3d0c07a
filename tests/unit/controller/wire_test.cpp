// SPDX-License-Identifier: Apache-2.0
// The controller's check of a submission's binding against each partition's
// kinds of node (daemons/controller/store/wire.cpp).
#include <string>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "store/wire.h"

namespace cohort::controller {
namespace {

config::NodeSpec Node(std::string name, int cpus, int gpus) {
  config::NodeSpec node;
  node.name = std::move(name);
  node.cpus = cpus;
  node.memory_mb = 64000;
  node.gpus = gpus;
  return node;
}

// Two thousand small nodes (8 CPUs, 2 GPUs) and, last, one big one (64 CPUs,
// 8 GPUs), all in "all"; "small" holds two of the small ones.
config::ClusterConfig MixedCluster() {
  config::ClusterConfig config;
  for (int i = 0; i < 2000; ++i) config.nodes.push_back(Node(fmt::format("small{:04}", i), 8, 2));
  config.nodes.push_back(Node("big", 64, 8));
  config::PartitionSpec all;
  all.name = "all";
  all.is_default = true;
  for (const config::NodeSpec& node : config.nodes) all.nodes.push_back(node.name);
  config::PartitionSpec small;
  small.name = "small";
  small.nodes = {"small0007", "small0003"};
  config.partitions = {all, small};
  return config;
}

TEST(ContainersAllowedTest, AClusterWithContainerRuntimeNoneRefusesContainersAndSaysWhy) {
  config::ClusterConfig config;
  v1::ContainerSpec image;
  image.set_image("ubuntu:24.04");
  v1::ContainerSpec named;
  named.set_name("train");
  EXPECT_TRUE(ContainersAllowed(config, image).ok()) << "builtin, the default";
  config.container_runtime = "none";
  EXPECT_TRUE(ContainersAllowed(config, v1::ContainerSpec()).ok()) << "no container asked";
  for (const v1::ContainerSpec& asked : {image, named}) {
    const absl::Status refused = ContainersAllowed(config, asked);
    EXPECT_EQ(refused.code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_NE(refused.message().find("ContainerRuntime=none"), std::string_view::npos)
        << refused.message();
  }
}

TEST(NodeKindsTest, OneLayoutPerKindInTheOrderOfItsFirstNode) {
  const config::ClusterConfig config = MixedCluster();
  const NodeKinds kinds(config);
  ASSERT_EQ(kinds.Of("all").size(), 2u);
  EXPECT_EQ(kinds.Of("all")[0].first_node, "small0000");
  EXPECT_EQ(kinds.Of("all")[1].first_node, "big");
  EXPECT_EQ(kinds.Of("all")[1].gpus, 8);
  ASSERT_EQ(kinds.Of("small").size(), 1u);
  EXPECT_EQ(kinds.Of("small")[0].first_node, "small0007");
  EXPECT_TRUE(kinds.Of("nonesuch").empty());
}

TEST(CheckBindingAtSubmitTest, AJobIsAcceptedWhereSomeKindOfNodeCanBindIt) {
  const config::ClusterConfig config = MixedCluster();
  NodeKinds kinds(config);
  v1::JobSpec spec;
  spec.set_gpu_bind("single:1");
  JobRequest request;
  request.tasks_per_node = 4;
  request.gpus_per_node = 4;  // only the big node has four GPUs
  EXPECT_TRUE(CheckBindingAtSubmit(spec, request, config, kinds).ok());

  request.gpus_per_node = 2;  // four ranks, one per GPU, on two GPUs: nowhere
  const absl::Status refused = CheckBindingAtSubmit(spec, request, config, kinds);
  EXPECT_EQ(refused.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(refused.message().find("cannot be bound on small0000 (all)"), std::string::npos)
      << refused;

  request.partition = "small";
  request.gpus_per_node = 1;
  const absl::Status small = CheckBindingAtSubmit(spec, request, config, kinds);
  EXPECT_NE(small.message().find("small0007 (small)"), std::string::npos) << small;

  // The verdicts remembered answer the same shapes the same way.
  request.partition.clear();
  request.gpus_per_node = 4;
  EXPECT_TRUE(CheckBindingAtSubmit(spec, request, config, kinds).ok());
  request.gpus_per_node = 2;
  EXPECT_EQ(CheckBindingAtSubmit(spec, request, config, kinds), refused);
}

}  // namespace
}  // namespace cohort::controller
