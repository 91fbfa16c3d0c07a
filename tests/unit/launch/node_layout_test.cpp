// SPDX-License-Identifier: Apache-2.0
#include "cohort/launch/node_layout.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "cohort/config/cluster_config.h"
#include "test_support.h"

namespace cohort::layout {
namespace {

using Ints = std::vector<int>;
using Masks = std::vector<std::uint64_t>;

TEST(NodeLayoutTest, ApproximateLayoutSpreadsCountsOverTheGpusNumaNodes) {
  const Ints gpu_numa = {0, 0, 1, 1};
  const NodeLayout layout = ApproximateLayout(7, 1001, 4, gpu_numa);
  ASSERT_EQ(layout.numa_nodes.size(), 2U);
  EXPECT_EQ(layout.numa_nodes[0].cores.size(), 4U);
  EXPECT_EQ(layout.numa_nodes[1].cores.size(), 3U);
  EXPECT_EQ(layout.numa_nodes[1].cores[0].pus, Ints{4});
  EXPECT_EQ(layout.MemoryMb(), 1001);
  EXPECT_EQ(layout.PuCount(), 7);
  EXPECT_EQ(layout.ThreadsPerCore(), 1);
  EXPECT_EQ(layout.gpus[2].numa, 1);
  EXPECT_EQ(layout.gpus[2].name, "config");
  const NodeLayout flat = ApproximateLayout(4, 100, 2, {});
  ASSERT_EQ(flat.numa_nodes.size(), 1U);
  EXPECT_EQ(flat.gpus[1].numa, 0);
}

TEST(NodeLayoutTest, GpuGroupsFollowNumaNodesWithUnknownsLast) {
  NodeLayout layout = ApproximateLayout(8, 100, 8, Ints{0, 0, 0, 0, 1, 1, 1, 1});
  EXPECT_EQ(GpuGroups(layout), (Masks{0x0f, 0xf0}));
  layout.gpus = ConfiguredGpus(4, Ints{1, -1, 0, 1});
  EXPECT_EQ(GpuGroups(layout), (Masks{0b0100, 0b1001, 0b0010}));
  layout.gpus = ConfiguredGpus(4, {});
  EXPECT_TRUE(GpuGroups(layout).empty()) << "no locality known: one group, the default";
  layout.gpus.clear();
  EXPECT_TRUE(GpuGroups(layout).empty());
}

TEST(NodeLayoutTest, NodeLineReadsLikeSlurmdDashC) {
  NodeLayout layout;
  layout.sockets = 2;
  for (int n = 0; n < 2; ++n) {
    NumaNode node{.os_index = n, .memory_mb = 500, .cores = {}};
    for (int c = 0; c < 4; ++c) node.cores.push_back(Core{{n * 4 + c, 8 + n * 4 + c}});
    layout.numa_nodes.push_back(node);
  }
  EXPECT_EQ(FormatNodeLine("n1", layout),
            "NodeName=n1 CPUs=16 Sockets=2 CoresPerSocket=4 ThreadsPerCore=2 "
            "MemoryMB=1000");
  layout.gpus = ConfiguredGpus(2, Ints{0, 1});
  EXPECT_EQ(FormatNodeLine("n1", layout),
            "NodeName=n1 CPUs=16 Sockets=2 CoresPerSocket=4 ThreadsPerCore=2 "
            "MemoryMB=1000 "
            "Gpus=2 GpuNuma=0,1");
  layout.gpus[1].numa = -1;
  EXPECT_EQ(FormatNodeLine("n1", layout).find("GpuNuma"), std::string::npos);
  layout.nics.push_back({"mlx5_0", 1});
  const std::string summary = DescribeLayout(layout);
  EXPECT_NE(summary.find("numa 1: 500 MB, 4 cores, cpus 4-7,12-15, gpus none, nics mlx5_0\n"),
            std::string::npos)
      << summary;
  EXPECT_NE(summary.find("gpu 1: config numa unknown\n"), std::string::npos) << summary;
  EXPECT_NE(summary.find("nic mlx5_0: numa 1\n"), std::string::npos) << summary;
}

TEST(NodeLayoutTest, GpuTypesAreTheModelsNamesAsSitesWriteThem) {
  EXPECT_EQ(GpuTypeOf("NVIDIA H100 80GB HBM3"), "h100");
  EXPECT_EQ(GpuTypeOf("Tesla V100-SXM3-32GB-H"), "v100");
  EXPECT_EQ(GpuTypeOf("Tesla P100-SXM2-16GB"), "p100");
  EXPECT_EQ(GpuTypeOf("NVIDIA A100-SXM4-80GB"), "a100");
  EXPECT_EQ(GpuTypeOf("NVIDIA GeForce RTX 4090"), "rtx4090");
  EXPECT_EQ(GpuTypeOf("AMD Instinct MI250X"), "mi250x");
  EXPECT_EQ(GpuTypeOf(""), "");
  EXPECT_EQ(GpuTypeOf("NVIDIA"), "");
}

TEST(NodeLayoutTest, OneGpuTypeBecomesGres) {
  NodeLayout layout = ApproximateLayout(16, 64000, 2, Ints{0, 0});
  for (Gpu& gpu : layout.gpus) gpu.model = "NVIDIA H100 80GB HBM3";
  EXPECT_NE(FormatNodeLine("n", layout).find(" Gres=gpu:h100:2 GpuNuma=0,0"), std::string::npos);
  layout.gpus[1].model = "NVIDIA A100-SXM4-80GB";  // two types: counted only
  EXPECT_NE(FormatNodeLine("n", layout).find(" Gpus=2 "), std::string::npos);
  layout.gpus[1].model = layout.gpus[0].model;
  const config::ConfigResult parsed = config::ParseClusterConfig(
      FormatNodeLine("gpu[01-02]", layout) + "\nPartitionName=p Nodes=ALL\n", "cohort.conf",
      [](const std::string&) -> absl::StatusOr<std::string> { return std::string(); });
  ASSERT_TRUE(parsed.diagnostics.All().empty()) << parsed.diagnostics.Format();
  EXPECT_EQ(parsed.config.nodes[0].gpus, 2);
  EXPECT_EQ(parsed.config.nodes[0].gpu_type, "h100");
}

TEST(NodeLayoutTest, TheNodeLineIsACohortConfLine) {
  const NodeLayout layout = ApproximateLayout(16, 64000, 4, Ints{0, 0, 1, 1});
  const std::string line = FormatNodeLine("gpu[01-02]", layout);
  const config::ConfigResult parsed = config::ParseClusterConfig(
      line + "\nPartitionName=p Nodes=ALL\n", "cohort.conf",
      [](const std::string&) -> absl::StatusOr<std::string> { return std::string(); });
  ASSERT_TRUE(parsed.diagnostics.All().empty()) << line << "\n" << parsed.diagnostics.Format();
  ASSERT_EQ(parsed.config.nodes.size(), 2U);
  const config::NodeSpec& node = parsed.config.nodes[1];
  EXPECT_EQ(node.cpus, 16);
  EXPECT_EQ(node.memory_mb, 64000);
  EXPECT_EQ(node.gpus, 4);
  EXPECT_EQ(node.gpu_numa, (Ints{0, 0, 1, 1}));
  EXPECT_EQ(node.sockets, 2);
  EXPECT_EQ(node.cores_per_socket, 8);
  EXPECT_EQ(node.threads_per_core, 1);
}

TEST(NodeLayoutTest, GpuNumaGivesThePoolItsGpuGroups) {
  config::NodeSpec spec = config::DefaultNodeSpec("");
  spec.gpu_numa = {0, 0, 0, 0, 1, 1, 1, 1};
  const testing::Cluster cluster =
      testing::ClusterFromTopology("SwitchName=leaf0 Nodes=n[1-2]\n", spec);
  EXPECT_EQ(cluster.pool.Capacity(cluster.Node("n1")).gpu_groups, (Masks{0x0f, 0xf0}));
  spec.gpu_numa.clear();
  const testing::Cluster unknown =
      testing::ClusterFromTopology("SwitchName=leaf0 Nodes=n[1-2]\n", spec);
  EXPECT_EQ(unknown.pool.Capacity(unknown.Node("n1")).gpu_groups, Masks{0xff});
}

TEST(NodeLayoutTest, CpuListsUseRanges) {
  EXPECT_EQ(FormatCpuList(Ints{3, 0, 1, 2, 112, 5, 113}), "0-3,5,112-113");
  EXPECT_EQ(FormatCpuList(Ints{}), "");
  EXPECT_EQ(FormatCpuList(Ints{7}), "7");
}

}  // namespace
}  // namespace cohort::layout
