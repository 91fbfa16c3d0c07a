// SPDX-License-Identifier: Apache-2.0
// Slurm 25.05's topology.yaml: the same model as topology.conf, and every
// mistake reported by line and column.
#include <gtest/gtest.h>

#include <string>
#include <string_view>
#include <vector>

#include "cohort/alloc/topology.h"
#include "test_support.h"

namespace cohort::topology {
namespace {

TopologyResult FromYaml(std::string_view text) {
  return BuildTopology(text, "topology.yaml", {}, NodeSource::kTopology);
}

// Everything placement reads of a topology, one line per node.
std::vector<std::string> Shape(const Topology& t) {
  std::vector<std::string> lines;
  for (NodeId n = 0; n < t.NodeCount(); ++n) {
    lines.push_back(
        fmt::format("{} group={} order={}", t.AddressOf(n), t.GroupOf(n), t.OrderOf(n)));
  }
  lines.push_back(fmt::format("block sizes {}", fmt::join(t.BlockSizes(), ",")));
  for (const BlockLevel& level : t.BlockLevels()) {
    lines.push_back(fmt::format("level {}: {} aggregates", level.size, level.aggregates.size()));
  }
  return lines;
}

std::string ErrorText(const TopologyResult& result) {
  std::string text;
  for (const Diagnostic& d : result.diagnostics.All()) {
    if (d.severity == Severity::kError) text += FormatDiagnostic(d) + "\n";
  }
  return text;
}

std::string WarningText(const TopologyResult& result) {
  std::string text;
  for (const Diagnostic& d : result.diagnostics.All()) {
    if (d.severity == Severity::kWarning) text += FormatDiagnostic(d) + "\n";
  }
  return text;
}

TEST(TopologyYamlTest, BuildsTheSameModelAsTopologyConf) {
  const TopologyResult yaml =
      BuildTopology(cohort::testing::ReadData("topologies/gb200-nvl72.yaml"), "gb200-nvl72.yaml",
                    {}, NodeSource::kTopology);
  const TopologyResult conf =
      BuildTopology(cohort::testing::ReadData("topologies/gb200-nvl72.conf") + "BlockSizes=18,36\n",
                    "gb200-nvl72.conf", {}, NodeSource::kTopology);
  ASSERT_TRUE(yaml.diagnostics.All().empty()) << yaml.diagnostics.Format();
  ASSERT_TRUE(conf.diagnostics.All().empty()) << conf.diagnostics.Format();
  EXPECT_EQ(yaml.topology.NodeCount(), 144);
  EXPECT_EQ(yaml.topology.Blocks().size(), 8U);
  EXPECT_EQ(Shape(yaml.topology), Shape(conf.topology));
  EXPECT_EQ(yaml.topology.AddressOf(0), "ib-spine.ib-leaf1.nvl72-1.gb001");
}

TEST(TopologyYamlTest, ListsAndScalarsAreBothAccepted) {
  const TopologyResult result = FromYaml(R"(---
- topology: racks
  block:
    block_sizes: 2,4
    blocks:
      - {block: b1, nodes: [n1, n2]}
      - block: b2
        nodes:
          - n3
          - n4
)");
  ASSERT_TRUE(result.diagnostics.All().empty()) << result.diagnostics.Format();
  EXPECT_EQ(result.topology.NodeCount(), 4);
  EXPECT_EQ(result.topology.BlockSizes(), (std::vector<int>{2, 4}));
  EXPECT_FALSE(result.topology.HasSwitchTree());
}

TEST(TopologyYamlTest, FlatAloneIsAFlatNetwork) {
  const TopologyResult result =
      BuildTopology("- topology: all\n  flat: true\n", "t.yml", std::vector<std::string>{"a", "b"},
                    NodeSource::kConfig);
  ASSERT_TRUE(result.diagnostics.All().empty()) << result.diagnostics.Format();
  EXPECT_EQ(result.topology.NodeCount(), 2);
  EXPECT_FALSE(result.topology.HasSwitchTree());
}

TEST(TopologyYamlTest, OfTwoTreesTheClusterDefaultIsUsed) {
  const TopologyResult result = FromYaml(R"(
- topology: old
  tree:
    switches:
      - switch: s0
        nodes: n[1-2]
- topology: new
  cluster_default: True
  tree:
    switches:
      - switch: s1
        nodes: n[1-4]
)");
  EXPECT_EQ(ErrorText(result), "");
  EXPECT_NE(WarningText(result).find("topology.yaml:2:3: warning: topology old is not used"),
            std::string::npos)
      << WarningText(result);
  EXPECT_EQ(result.topology.NodeCount(), 4);
  EXPECT_TRUE(result.topology.FindSwitch("s1").has_value());
  EXPECT_FALSE(result.topology.FindSwitch("s0").has_value());
}

TEST(TopologyYamlTest, TwoTreesWithoutADefaultAreAnError) {
  const TopologyResult result = FromYaml(R"(
- topology: a
  tree: {switches: [{switch: s0, nodes: n1}]}
- topology: b
  tree: {switches: [{switch: s1, nodes: n2}]}
)");
  EXPECT_NE(ErrorText(result).find("topology.yaml:4:3: error: topology.yaml has 2 tree topologies "
                                   "(a, b); Cohort uses one for the whole cluster"),
            std::string::npos)
      << ErrorText(result);
  EXPECT_NE(ErrorText(result).find("cluster_default: true"), std::string::npos);
}

struct BadYaml {
  std::string_view name;
  std::string_view text;
  std::string_view error;  ///< a part of the one error expected
};

class TopologyYamlErrorTest : public ::testing::TestWithParam<BadYaml> {};

TEST_P(TopologyYamlErrorTest, IsReportedWhereItIs) {
  const TopologyResult result = FromYaml(GetParam().text);
  const std::string errors = ErrorText(result);
  EXPECT_NE(errors.find(GetParam().error), std::string::npos) << errors;
  EXPECT_EQ(result.diagnostics.ErrorCount(), 1) << errors;
}

INSTANTIATE_TEST_SUITE_P(
    Files, TopologyYamlErrorTest,
    ::testing::Values(
        BadYaml{"Syntax", "- topology: t\n  tree: [\n", "topology.yaml:3:1: error: not valid YAML"},
        BadYaml{"Empty", "# nothing\n",
                "topology.yaml:1:1: error: topology.yaml holds no topology"},
        BadYaml{"NotAList", "topology: t\n",
                "topology.yaml:1:1: error: topology.yaml must be a list"},
        BadYaml{"UnknownKey", "- topology: t\n  tre: {}\n",
                "topology.yaml:2:3: error: unknown key \"tre\" in a topology"},
        BadYaml{"NameNotFirst", "- flat: true\n  topology: t\n",
                "each topology must start with its name"},
        BadYaml{"NoType", "- topology: t\n  cluster_default: true\n", "topology t has no type"},
        BadYaml{"TwoTypes", "- topology: t\n  flat: true\n  tree: {}\n",
                "topology.yaml:3:3: error: topology t is both flat and tree"},
        BadYaml{"NotABool", "- topology: t\n  flat: maybe\n",
                "topology.yaml:2:9: error: flat must be true or false, found \"maybe\""},
        BadYaml{"DuplicateName", "- topology: t\n  flat: true\n- topology: t\n  flat: true\n",
                "topology.yaml:3:3: error: topology t is defined twice"},
        BadYaml{"DuplicateKey", "- topology: t\n  flat: true\n  flat: true\n",
                "topology.yaml:3:3: error: flat is given twice"},
        BadYaml{"SwitchBothKinds",
                "- topology: t\n  tree:\n    switches:\n      - switch: s\n        nodes: n1\n"
                "        children: s2\n",
                "topology.yaml:4:9: error: switch s lists both nodes: and children:"},
        BadYaml{"SwitchNoMembers", "- topology: t\n  tree:\n    switches:\n      - switch: s\n",
                "topology.yaml:4:9: error: switch s has no members"},
        BadYaml{"BlockNoName", "- topology: t\n  block:\n    blocks:\n      - nodes: n1\n",
                "topology.yaml:4:9: error: a block has no name"},
        BadYaml{"NoBlocks", "- topology: t\n  block:\n    block_sizes: [2]\n",
                "block topology t has no blocks"},
        BadYaml{"BadBlockSizes",
                "- topology: t\n  block:\n    block_sizes: [4, 6]\n    blocks:\n"
                "      - block: b\n        nodes: n[1-4]\n",
                "topology.yaml:3:18: error: BlockSizes 4,6: 6 is not the base block size"},
        BadYaml{"BadHostlist",
                "- topology: t\n  tree:\n    switches:\n      - switch: s\n        nodes: n[1-\n",
                "topology.yaml:5:20: error: Nodes: hostlist \"n[1-\": position 5"},
        BadYaml{"NestedList",
                "- topology: t\n  tree:\n    switches:\n      - switch: s\n        nodes: [[n1]]\n",
                "each item of nodes must be a value"},
        BadYaml{"Alias",
                "- topology: t\n  tree:\n    switches:\n      - &s {switch: s, nodes: n1}\n      - "
                "*s\n",
                "topology.yaml uses a YAML alias"},
        BadYaml{"SecondDocument", "- topology: t\n  flat: true\n---\n- topology: u\n  flat: true\n",
                "topology.yaml:4:1: error: topology.yaml holds a second YAML document"}),
    [](const ::testing::TestParamInfo<BadYaml>& param) { return std::string(param.param.name); });

// TopologyBlocks=auto: the blocks come from the reported file only.
TEST(ReportedBlocksTest, BlockLinesOfTheTopologyAreRefusedAndUnknownNodesWarned) {
  const std::vector<std::string> nodes{"a1", "a2", "b1"};
  const ReportedBlocks reported{"BlockName=nvl-1 Nodes=a[1-2]\nSwitchName=x Nodes=a1\n",
                                "state/nvlink-blocks.conf"};
  const TopologyResult result =
      BuildTopology("SwitchName=s Nodes=a[1-2],b1\nBlockName=rack Nodes=a[1-2]\n", "topology.conf",
                    nodes, NodeSource::kConfig, &reported);
  const std::string errors = ErrorText(result);
  EXPECT_NE(errors.find("topology.conf:2:1: error: BlockName lines are not read with "
                        "TopologyBlocks=auto"),
            std::string::npos)
      << errors;
  EXPECT_NE(errors.find("state/nvlink-blocks.conf:2:1: error: the reported NVLink blocks hold "
                        "BlockName lines only"),
            std::string::npos)
      << errors;
  EXPECT_EQ(result.diagnostics.ErrorCount(), 2) << errors;

  const ReportedBlocks stale{"BlockName=nvl-1 Nodes=a[1-2],gone\n", "nvlink-blocks.conf"};
  const TopologyResult left_out = BuildTopology("SwitchName=s Nodes=a[1-2],b1\n", "topology.conf",
                                                nodes, NodeSource::kConfig, &stale);
  EXPECT_FALSE(left_out.diagnostics.HasErrors()) << left_out.diagnostics.Format();
  EXPECT_EQ(left_out.topology.Blocks().at(0).nodes.size(), 2U);
  EXPECT_NE(WarningText(left_out).find("block nvl-1 of the reported NVLink domains names nodes the "
                                       "cluster does not have: gone; they are left out"),
            std::string::npos)
      << WarningText(left_out);

  const ReportedBlocks good{"BlockName=nvl-1 Nodes=a[1-2]\n", "nvlink-blocks.conf"};
  const TopologyResult flat = BuildTopology("", "", nodes, NodeSource::kConfig, &good);
  ASSERT_FALSE(flat.diagnostics.HasErrors()) << flat.diagnostics.Format();
  ASSERT_EQ(flat.topology.Blocks().size(), 1U);
  EXPECT_EQ(flat.topology.BlockOf(2), kNone);
}

}  // namespace
}  // namespace cohort::topology
