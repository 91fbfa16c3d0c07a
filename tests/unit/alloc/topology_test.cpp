// SPDX-License-Identifier: Apache-2.0
#include "cohort/alloc/topology.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "test_support.h"

namespace cohort::topology {
namespace {

using Names = std::vector<std::string>;

TopologyResult FromData(const std::string& file) {
  return BuildTopology(cohort::testing::ReadData("topologies/" + file), file, {},
                       NodeSource::kTopology);
}

TopologyResult FromText(std::string_view text) {
  return BuildTopology(text, "topology.conf", {}, NodeSource::kTopology);
}

TopologyResult FromTextWithNodes(std::string_view text, const Names& nodes) {
  return BuildTopology(text, "topology.conf", nodes, NodeSource::kConfig);
}

// A topology that must build without errors or warnings.
Topology MustBuild(const TopologyResult& result) {
  EXPECT_TRUE(result.diagnostics.All().empty()) << result.diagnostics.Format();
  return result.topology;
}

std::vector<Diagnostic> Errors(const TopologyResult& result) {
  std::vector<Diagnostic> errors;
  for (const Diagnostic& d : result.diagnostics.All()) {
    if (d.severity == Severity::kError) errors.push_back(d);
  }
  return errors;
}

// The only error of `result`; fails the test unless there is exactly one.
Diagnostic OnlyError(const TopologyResult& result) {
  const std::vector<Diagnostic> errors = Errors(result);
  EXPECT_EQ(errors.size(), 1U) << result.diagnostics.Format();
  return errors.empty() ? Diagnostic{} : errors.front();
}

bool Contains(std::string_view text, std::string_view part) {
  return text.find(part) != std::string_view::npos;
}

SwitchId SwitchNamed(const Topology& t, std::string_view name) {
  const std::optional<SwitchId> id = t.FindSwitch(name);
  EXPECT_TRUE(id.has_value()) << "no switch " << name;
  return id.value_or(kNone);
}

NodeId Node(const Topology& t, std::string_view name) {
  const std::optional<NodeId> id = t.FindNode(name);
  EXPECT_TRUE(id.has_value()) << "no node " << name;
  return id.value_or(kNone);
}

Names SwitchNames(const Topology& t, const std::vector<SwitchId>& ids) {
  Names names;
  for (const SwitchId id : ids) names.push_back(t.GetSwitch(id).name);
  return names;
}

Names NodeNames(const Topology& t, const std::vector<NodeId>& ids) {
  Names names;
  for (const NodeId id : ids) names.push_back(t.NodeName(id));
  return names;
}

std::string SwitchOf(const Topology& t, std::string_view node) {
  return t.GetSwitch(t.LeafOf(Node(t, node))).name;
}

std::string Common(const Topology& t, std::initializer_list<std::string_view> nodes) {
  std::vector<NodeId> ids;
  for (const std::string_view n : nodes) ids.push_back(Node(t, n));
  const SwitchId s = t.LowestCommonSwitch(ids);
  return s == kNone ? "none" : t.GetSwitch(s).name;
}

// --- Sample files
// ----------------------------------------------------------------

TEST(TopologySampleTest, Small2Leaf) {
  const Topology t = MustBuild(FromData("small-2leaf.conf"));
  EXPECT_EQ(t.NodeCount(), 8);
  EXPECT_EQ(t.NodeName(0), "node1");
  EXPECT_TRUE(t.HasSwitchTree());
  ASSERT_EQ(t.Switches().size(), 3U);
  const Switch& leaf0 = t.GetSwitch(SwitchNamed(t, "leaf0"));
  const Switch& spine = t.GetSwitch(SwitchNamed(t, "spine"));
  EXPECT_EQ(leaf0.level, 0);
  EXPECT_EQ(NodeNames(t, leaf0.nodes), (Names{"node1", "node2", "node3", "node4"}));
  EXPECT_EQ(leaf0.node_count, 4);
  EXPECT_EQ(leaf0.parent, SwitchNamed(t, "spine"));
  EXPECT_EQ(SwitchNames(t, leaf0.leaves), (Names{"leaf0"}));
  EXPECT_EQ(spine.level, 1);
  EXPECT_EQ(spine.node_count, 8);
  EXPECT_TRUE(spine.nodes.empty());
  EXPECT_EQ(SwitchNames(t, spine.children), (Names{"leaf0", "leaf1"}));
  EXPECT_EQ(SwitchNames(t, spine.leaves), (Names{"leaf0", "leaf1"}));
  EXPECT_EQ(SwitchNames(t, t.Roots()), (Names{"spine"}));
  EXPECT_EQ(t.MaxLevel(), 1);
  EXPECT_EQ(SwitchOf(t, "node5"), "leaf1");
  EXPECT_EQ(spine.defined_at.line, 5);
}

TEST(TopologySampleTest, SwitchesByLevelListsLeavesFirst) {
  const Topology t = MustBuild(FromData("small-2leaf.conf"));
  EXPECT_EQ(SwitchNames(t, t.SwitchesByLevel()), (Names{"leaf0", "leaf1", "spine"}));
}

TEST(TopologySampleTest, SuperPod) {
  const Topology t = MustBuild(FromData("superpod-4su.conf"));
  EXPECT_EQ(t.NodeCount(), 128);
  EXPECT_EQ(t.Switches().size(), 5U);
  EXPECT_EQ(SwitchNames(t, t.Roots()), (Names{"spine"}));
  EXPECT_EQ(t.GetSwitch(SwitchNamed(t, "su3")).node_count, 32);
  EXPECT_EQ(SwitchOf(t, "dgx065"), "su3");
  EXPECT_EQ(t.Groups().size(), 4U);
}

TEST(TopologySampleTest, FatTree1024Levels) {
  const Topology t = MustBuild(FromData("fat-tree-1024.conf"));
  EXPECT_EQ(t.NodeCount(), 1024);
  int leaves = 0;
  int pods = 0;
  int cores = 0;
  for (const Switch& s : t.Switches()) {
    if (s.level == 0) ++leaves;
    if (s.level == 1) ++pods;
    if (s.level == 2) ++cores;
  }
  EXPECT_EQ(leaves, 32);
  EXPECT_EQ(pods, 4);
  EXPECT_EQ(cores, 1);
  EXPECT_EQ(t.MaxLevel(), 2);
  EXPECT_EQ(SwitchNames(t, t.Roots()), (Names{"core"}));
}

TEST(TopologySampleTest, FatTree1024Shape) {
  const Topology t = MustBuild(FromData("fat-tree-1024.conf"));
  const Switch& pod1 = t.GetSwitch(SwitchNamed(t, "pod1"));
  EXPECT_EQ(pod1.node_count, 256);
  EXPECT_EQ(SwitchNames(t, pod1.leaves), (Names{"leaf08", "leaf09", "leaf10", "leaf11", "leaf12",
                                                "leaf13", "leaf14", "leaf15"}));
  EXPECT_EQ(pod1.parent, SwitchNamed(t, "core"));
  const Switch& core = t.GetSwitch(SwitchNamed(t, "core"));
  EXPECT_EQ(core.node_count, 1024);
  EXPECT_EQ(core.leaves.size(), 32U);
  EXPECT_EQ(t.GetSwitch(SwitchNamed(t, "leaf31")).node_count, 32);
  EXPECT_EQ(SwitchOf(t, "gpu0033"), "leaf01");
  EXPECT_EQ(SwitchOf(t, "gpu1024"), "leaf31");
  EXPECT_EQ(t.Groups().size(), 32U);  // no blocks: one group per leaf
}

TEST(TopologySampleTest, LowestCommonSwitch) {
  const Topology t = MustBuild(FromData("fat-tree-1024.conf"));
  EXPECT_EQ(Common(t, {"gpu0001"}), "leaf00");
  EXPECT_EQ(Common(t, {"gpu0001", "gpu0032"}), "leaf00");
  EXPECT_EQ(Common(t, {"gpu0001", "gpu0033", "gpu0256"}), "pod0");
  EXPECT_EQ(Common(t, {"gpu0001", "gpu0257"}), "core");
  EXPECT_EQ(Common(t, {"gpu0300", "gpu0001", "gpu0002"}), "core");
  EXPECT_EQ(t.LowestCommonSwitch(std::vector<NodeId>{}), kNone);
  EXPECT_EQ(t.LowestCommonSwitch(SwitchNamed(t, "leaf00"), SwitchNamed(t, "pod0")),
            SwitchNamed(t, "pod0"));
  EXPECT_EQ(t.LowestCommonSwitch(SwitchNamed(t, "leaf09"), SwitchNamed(t, "leaf31")),
            SwitchNamed(t, "core"));
  EXPECT_EQ(t.LowestCommonSwitch(SwitchNamed(t, "leaf09"), SwitchNamed(t, "leaf09")),
            SwitchNamed(t, "leaf09"));
  EXPECT_EQ(t.LowestCommonSwitch(kNone, SwitchNamed(t, "leaf09")), kNone);
}

TEST(TopologySampleTest, Gb200Blocks) {
  const Topology t = MustBuild(FromData("gb200-nvl72.conf"));
  EXPECT_EQ(t.NodeCount(), 144);
  ASSERT_EQ(t.Blocks().size(), 8U);
  for (const Block& block : t.Blocks()) EXPECT_EQ(block.nodes.size(), 18U) << block.name;
  EXPECT_EQ(t.Blocks()[1].name, "nvl72-2");
  EXPECT_EQ(t.Blocks()[1].defined_at.line, 5);
  EXPECT_EQ(t.BlockOf(Node(t, "gb019")), 1);
  EXPECT_EQ(t.BlockOf(Node(t, "gb144")), 7);
  int leaves = 0;
  for (const Switch& s : t.Switches()) {
    if (s.level == 0) {
      ++leaves;
      EXPECT_EQ(s.node_count, 36) << s.name;
    }
  }
  EXPECT_EQ(leaves, 4);
  EXPECT_EQ(SwitchNames(t, t.Roots()), (Names{"ib-spine"}));
  EXPECT_EQ(SwitchOf(t, "gb037"), "ib-leaf2");
}

TEST(TopologySampleTest, Gb200BlocksAreTheGroups) {
  const Topology t = MustBuild(FromData("gb200-nvl72.conf"));
  ASSERT_EQ(t.Groups().size(), 8U);
  for (GroupId g = 0; g < 8; ++g) {
    const Group& group = t.Groups()[static_cast<std::size_t>(g)];
    EXPECT_EQ(group.block, g);
    EXPECT_EQ(group.nodes, t.Blocks()[static_cast<std::size_t>(g)].nodes);
  }
  EXPECT_EQ(t.GetSwitch(t.Groups()[0].home).name, "ib-leaf1");
  EXPECT_EQ(t.GetSwitch(t.Groups()[2].home).name, "ib-leaf2");
  EXPECT_EQ(t.GroupOf(Node(t, "gb019")), 1);
  EXPECT_EQ(t.GetSwitch(SwitchNamed(t, "ib-leaf1")).groups, (std::vector<GroupId>{0, 1}));
  EXPECT_EQ(t.GetSwitch(SwitchNamed(t, "ib-spine")).groups.size(), 8U);
}

TEST(TopologySampleTest, WithoutBlocksEachLeafIsOneGroup) {
  const Topology t = MustBuild(FromData("small-2leaf.conf"));
  ASSERT_EQ(t.Groups().size(), 2U);
  EXPECT_EQ(t.Groups()[0].block, kNone);
  EXPECT_EQ(t.GetSwitch(t.Groups()[0].home).name, "leaf0");
  EXPECT_EQ(NodeNames(t, t.Groups()[1].nodes), (Names{"node5", "node6", "node7", "node8"}));
  EXPECT_EQ(t.GroupOf(Node(t, "node6")), 1);
  EXPECT_TRUE(t.Blocks().empty());
  EXPECT_EQ(t.BlockOf(Node(t, "node6")), kNone);
}

TEST(TopologyTest, NodesOutsideBlocksFormTheirLeafsGroup) {
  const Topology t =
      MustBuild(FromText("SwitchName=leaf0 Nodes=n[1-8]\n"
                         "BlockName=b0 Nodes=n[1-4]\n"));
  ASSERT_EQ(t.Groups().size(), 2U);
  EXPECT_EQ(t.Groups()[0].block, 0);
  EXPECT_EQ(t.Groups()[1].block, kNone);
  EXPECT_EQ(NodeNames(t, t.Groups()[1].nodes), (Names{"n5", "n6", "n7", "n8"}));
}

TEST(TopologyTest, BlockSizes) {
  const Topology t =
      MustBuild(FromText("BlockSizes=18,36,72\n"
                         "SwitchName=leaf0 Nodes=n[1-90]\n"
                         "BlockName=b[0-4] Nodes=n[1-90]\n"));
  EXPECT_EQ(t.BlockSizes(), (std::vector<int>{18, 36, 72}));
  // Level 0 each block; then runs of 2 and 4 consecutive blocks, whole runs only.
  ASSERT_EQ(t.BlockLevels().size(), 3U);
  EXPECT_EQ(t.BlockLevels()[0].aggregates,
            (std::vector<std::vector<BlockId>>{{0}, {1}, {2}, {3}, {4}}));
  EXPECT_EQ(t.BlockLevels()[1].aggregates, (std::vector<std::vector<BlockId>>{{0, 1}, {2, 3}}));
  EXPECT_EQ(t.BlockLevels()[2].aggregates, (std::vector<std::vector<BlockId>>{{0, 1, 2, 3}}));
  EXPECT_EQ(t.BlockLevels()[2].size, 72);
  for (BlockId b = 0; b < 5; ++b) EXPECT_EQ(t.Groups()[t.GroupOfBlock(b)].block, b);
}

TEST(TopologyTest, BlockSizesLargerThanTheBlocksMakeAWarning) {
  const TopologyResult result = FromText(
      "BlockSizes=18,36,72\nSwitchName=leaf0 Nodes=n[1-36]\nBlockName=b[0-1] Nodes=n[1-36]\n");
  EXPECT_TRUE(Errors(result).empty());
  ASSERT_EQ(result.diagnostics.All().size(), 1U);
  EXPECT_TRUE(Contains(result.diagnostics.All()[0].message, "make no aggregate of 72 nodes"))
      << result.diagnostics.Format();
  EXPECT_EQ(result.topology.BlockLevels().size(), 2U);
}

TEST(TopologyTest, BlockSmallerThanTheBaseSizeMakesAWarning) {
  const TopologyResult result = FromText(
      "BlockSizes=4\nSwitchName=leaf0 Nodes=n[1-7]\nBlockName=b0 Nodes=n[1-4]\n"
      "BlockName=b1 Nodes=n[5-7]\n");
  EXPECT_TRUE(Errors(result).empty());
  ASSERT_EQ(result.diagnostics.All().size(), 1U);
  EXPECT_EQ(result.diagnostics.All()[0].message,
            "block b1 has 3 nodes, fewer than the base block size 4 (BlockSizes)");
  EXPECT_EQ(result.diagnostics.All()[0].where.line, 4);
}

TEST(TopologyErrorTest, BlockSizesMustDoubleTheBase) {
  const Diagnostic error = OnlyError(FromText("BlockSizes=18,54\nSwitchName=leaf0 Nodes=n[1-2]\n"));
  EXPECT_EQ(error.message,
            "BlockSizes 18,54: 54 is not the base block size 18 times a power of two");
  EXPECT_TRUE(Contains(error.hint, "BlockSizes=18,36,72")) << error.hint;
}

// --- Topology order and addresses -------------------------------------------

TEST(TopologyTest, OrderFollowsTheTreeAndTheBlocksNotTheNames) {
  // Blocks whose names interleave, two leaves listed in reverse.
  const Topology t =
      MustBuild(FromText("SwitchName=spine Switches=leaf[2,1]\n"
                         "SwitchName=leaf1 Nodes=n[1-4]\n"
                         "SwitchName=leaf2 Nodes=n[5-8]\n"
                         "BlockName=odd Nodes=n[1,3]\n"
                         "BlockName=even Nodes=n[2,4]\n"));
  std::vector<NodeId> nodes(8);
  for (NodeId n = 0; n < 8; ++n) nodes[n] = n;
  std::sort(nodes.begin(), nodes.end(),
            [&](NodeId a, NodeId b) { return t.OrderOf(a) < t.OrderOf(b); });
  EXPECT_EQ(NodeNames(t, nodes), (Names{"n5", "n6", "n7", "n8", "n1", "n3", "n2", "n4"}));
}

TEST(TopologyTest, AddressesAsSlurmTopologyAddr) {
  const Topology t = MustBuild(FromData("gb200-nvl72.conf"));
  const NodeId n = *t.FindNode("gb020");
  EXPECT_EQ(t.AddressOf(n), "ib-spine.ib-leaf1.nvl72-2.gb020");
  EXPECT_EQ(t.AddressPatternOf(n), "switch.switch.block.node");
  const Topology flat = FlatTopology(Names{"a1", "a2"});
  EXPECT_EQ(flat.AddressOf(1), "a2");
  EXPECT_EQ(flat.AddressPatternOf(1), "node");
}

// --- Hostlist-named switches and blocks
// ------------------------------------------

TEST(TopologyTest, HostlistSwitchNameSplitsNodesEvenly) {
  const Topology t =
      MustBuild(FromText("SwitchName=leaf[0-7] Nodes=gpu[001-064]\n"
                         "SwitchName=spine Switches=leaf[0-7]\n"));
  EXPECT_EQ(t.NodeCount(), 64);
  EXPECT_EQ(t.Switches().size(), 9U);
  for (int i = 0; i < 8; ++i) {
    EXPECT_EQ(t.GetSwitch(SwitchNamed(t, "leaf" + std::to_string(i))).node_count, 8);
  }
  EXPECT_EQ(SwitchOf(t, "gpu008"), "leaf0");
  EXPECT_EQ(SwitchOf(t, "gpu009"), "leaf1");
  EXPECT_EQ(SwitchOf(t, "gpu064"), "leaf7");
  EXPECT_EQ(t.GetSwitch(SwitchNamed(t, "leaf3")).defined_at.line, 1);
}

TEST(TopologyTest, HostlistSwitchNameSplitsSwitchesEvenly) {
  const Topology t =
      MustBuild(FromText("SwitchName=leaf[0-3] Nodes=n[1-8]\n"
                         "SwitchName=pod[0-1] Switches=leaf[0-3]\n"
                         "SwitchName=core Switches=pod[0-1]\n"));
  EXPECT_EQ(SwitchNames(t, t.GetSwitch(SwitchNamed(t, "pod1")).children),
            (Names{"leaf2", "leaf3"}));
  EXPECT_EQ(t.GetSwitch(SwitchNamed(t, "core")).level, 2);
}

TEST(TopologyTest, HostlistBlockNameSplitsNodesEvenly) {
  const Topology t =
      MustBuild(FromText("SwitchName=leaf0 Nodes=gpu[001-064]\n"
                         "BlockName=nvl[0-3] Nodes=gpu[001-064]\n"));
  ASSERT_EQ(t.Blocks().size(), 4U);
  for (const Block& block : t.Blocks()) EXPECT_EQ(block.nodes.size(), 16U) << block.name;
  EXPECT_EQ(t.Blocks()[2].name, "nvl2");
  EXPECT_EQ(t.BlockOf(Node(t, "gpu033")), 2);
  EXPECT_EQ(t.Groups().size(), 4U);
}

TEST(TopologyErrorTest, UnevenSplitIsAnError) {
  const Diagnostic error = OnlyError(FromText("SwitchName=leaf[0-2] Nodes=gpu[001-064]\n"));
  EXPECT_EQ(error.where.line, 1);
  EXPECT_EQ(error.where.column, 28);
  EXPECT_EQ(error.message, "leaf[0-2] names 3 switches but 64 members, which do not divide evenly");
}

TEST(TopologyErrorTest, UnevenBlockSplitIsAnError) {
  const TopologyResult result = FromText(
      "SwitchName=leaf0 Nodes=gpu[001-010]\n"
      "BlockName=nvl[0-2] Nodes=gpu[001-010]\n");
  const Diagnostic error = OnlyError(result);
  EXPECT_EQ(error.where.line, 2);
  EXPECT_TRUE(Contains(error.message, "do not divide evenly")) << error.message;
}

// --- Validation errors
// -------------------------------------------------------------

TEST(TopologyErrorTest, NodeUnderTwoLeaves) {
  const Diagnostic error =
      OnlyError(FromText("SwitchName=leaf0 Nodes=n[1-4]\n"
                         "SwitchName=leaf1 Nodes=n[4-8]\n"
                         "SwitchName=spine Switches=leaf[0-1]\n"));
  EXPECT_EQ(error.where.file, "topology.conf");
  EXPECT_EQ(error.where.line, 2);
  EXPECT_EQ(error.where.column, 24);
  EXPECT_TRUE(Contains(error.message, "n4")) << error.message;
  EXPECT_TRUE(Contains(error.message, "(leaf0, leaf1)")) << error.message;
}

TEST(TopologyErrorTest, NodesUnderTwoLeavesAreReportedTogether) {
  const Diagnostic error =
      OnlyError(FromText("SwitchName=leaf0 Nodes=n[1-4]\n"
                         "SwitchName=leaf1 Nodes=n[3-8]\n"));
  EXPECT_EQ(error.message, "nodes n[3-4] are under two leaf switches (leaf0, leaf1)");
}

TEST(TopologyErrorTest, SwitchReferencedButNeverDefined) {
  const Diagnostic error =
      OnlyError(FromText("SwitchName=leaf0 Nodes=n[1-2]\n"
                         "SwitchName=leaf1 Nodes=n[3-4]\n"
                         "SwitchName=spine Switches=leaf[0-2]\n"));
  EXPECT_EQ(error.where.line, 3);
  EXPECT_EQ(error.where.column, 27);
  EXPECT_EQ(error.message, "switch spine refers to undefined switches: leaf2");
}

TEST(TopologyErrorTest, SwitchDefinedTwice) {
  const Diagnostic error =
      OnlyError(FromText("SwitchName=leaf0 Nodes=n[1-2]\n"
                         "SwitchName=leaf0 Nodes=n[3-4]\n"
                         "SwitchName=leaf1 Nodes=n[3-4]\n"
                         "SwitchName=spine Switches=leaf[0-1]\n"));
  EXPECT_EQ(error.where.line, 2);
  EXPECT_EQ(error.message, "switch leaf0 is defined twice (first at line 1)");
}

TEST(TopologyErrorTest, SwitchUnderTwoParents) {
  const Diagnostic error =
      OnlyError(FromText("SwitchName=leaf0 Nodes=n[1-2]\n"
                         "SwitchName=leaf1 Nodes=n[3-4]\n"
                         "SwitchName=spine0 Switches=leaf[0-1]\n"
                         "SwitchName=spine1 Switches=leaf1\n"));
  EXPECT_EQ(error.where.line, 4);
  EXPECT_EQ(error.message, "switch leaf1 is under two switches (spine0, spine1)");
}

TEST(TopologyErrorTest, Cycle) {
  const Diagnostic error =
      OnlyError(FromText("SwitchName=leaf0 Nodes=n[1-2]\n"
                         "SwitchName=a Switches=b,leaf0\n"
                         "SwitchName=b Switches=a\n"));
  EXPECT_EQ(error.where.line, 3);
  EXPECT_EQ(error.message, "switches form a cycle: a -> b -> a");
}

TEST(TopologyErrorTest, SwitchWithBothNodesAndSwitches) {
  const Diagnostic error =
      OnlyError(FromText("SwitchName=leaf0 Nodes=n[1-2]\n"
                         "SwitchName=mixed Nodes=n[3-4] Switches=leaf0\n"));
  EXPECT_EQ(error.where.line, 2);
  EXPECT_EQ(error.where.column, 1);
  EXPECT_EQ(error.message, "switch mixed lists both Nodes= and Switches=");
}

TEST(TopologyErrorTest, SwitchWithoutMembers) {
  const Diagnostic error = OnlyError(FromText("SwitchName=leaf0 Nodes=n1\nSwitchName=empty\n"));
  EXPECT_EQ(error.where.line, 2);
  EXPECT_EQ(error.message, "SwitchName empty has no members");
}

TEST(TopologyErrorTest, UnknownKeySuggestsTheNearest) {
  const Diagnostic error = OnlyError(FromText("SwitchName=leaf0 Node=n[1-4]\n"));
  EXPECT_EQ(error.where.line, 1);
  EXPECT_EQ(error.where.column, 18);
  EXPECT_EQ(error.message, "unknown key \"Node\" in a SwitchName line");
  EXPECT_EQ(error.hint, "did you mean Nodes?");
}

TEST(TopologyErrorTest, UnknownLineKeySuggestsTheNearest) {
  const Diagnostic error =
      OnlyError(FromText("SwitchName=leaf0 Nodes=n1\nSwitchNmae=leaf1 Nodes=n2\n"));
  EXPECT_EQ(error.where.line, 2);
  EXPECT_EQ(error.where.column, 1);
  EXPECT_EQ(error.hint, "did you mean SwitchName?");
}

TEST(TopologyTest, KeysAreCaseInsensitive) {
  const Topology t = MustBuild(FromText("switchname=leaf0 NODES=n[1-2]\n"));
  EXPECT_EQ(t.NodeCount(), 2);
}

TEST(TopologyErrorTest, TopologyNodeMissingFromTheConfig) {
  const Diagnostic error =
      OnlyError(FromTextWithNodes("SwitchName=leaf0 Nodes=n[1-2]\n"
                                  "SwitchName=leaf1 Nodes=n[3-4]\n",
                                  {"n1", "n2", "n3"}));
  EXPECT_EQ(error.where.line, 2);
  EXPECT_EQ(error.where.column, 24);
  EXPECT_EQ(error.message, "switch leaf1 names nodes with no NodeName line: n4");
}

TEST(TopologyErrorTest, ConfigNodeUnderNoLeaf) {
  const Diagnostic error =
      OnlyError(FromTextWithNodes("SwitchName=leaf0 Nodes=n[1-2]\n", {"n1", "n2", "n3", "n4"}));
  EXPECT_EQ(error.where.file, "topology.conf");
  EXPECT_EQ(error.message, "nodes under no leaf switch: n[3-4]");
}

TEST(TopologyTest, ConfigNodesKeepTheConfigOrder) {
  const Topology t =
      MustBuild(FromTextWithNodes("SwitchName=leaf0 Nodes=n[3-4]\n"
                                  "SwitchName=leaf1 Nodes=n[1-2]\n"
                                  "SwitchName=spine Switches=leaf[0-1]\n",
                                  {"n1", "n2", "n3", "n4"}));
  EXPECT_EQ(t.NodeNames(), (Names{"n1", "n2", "n3", "n4"}));
  EXPECT_EQ(SwitchOf(t, "n1"), "leaf1");
}

TEST(TopologyErrorTest, NodeInTwoBlocks) {
  const Diagnostic error =
      OnlyError(FromText("SwitchName=leaf0 Nodes=n[1-8]\n"
                         "BlockName=b0 Nodes=n[1-4]\n"
                         "BlockName=b1 Nodes=n[4-6]\n"));
  EXPECT_EQ(error.where.line, 3);
  EXPECT_EQ(error.where.column, 20);
  EXPECT_EQ(error.message, "node n4 is in two blocks (b0, b1)");
}

TEST(TopologyErrorTest, EmptyBlockSizes) {
  const Diagnostic error = OnlyError(FromText("BlockSizes=\nSwitchName=leaf0 Nodes=n[1-2]\n"));
  EXPECT_EQ(error.where.line, 1);
  EXPECT_EQ(error.message, "BlockSizes is empty");
}

TEST(TopologyErrorTest, BadBlockSizes) {
  for (const std::string_view sizes : {"36,18", "0", "x", "18,18", "-18"}) {
    const Diagnostic error = OnlyError(
        FromText("BlockSizes=" + std::string(sizes) + "\nSwitchName=leaf0 Nodes=n[1-2]\n"));
    EXPECT_EQ(error.where.line, 1) << sizes;
    EXPECT_EQ(error.where.column, 12) << sizes;
    EXPECT_EQ(error.message, "BlockSizes must be increasing positive numbers, found \"" +
                                 std::string(sizes) + "\"");
  }
}

TEST(TopologyErrorTest, BadHostlistPointsAtTheFaultyCharacter) {
  const Diagnostic error = OnlyError(FromText("SwitchName=leaf0 Nodes=n[1-2\n"));
  EXPECT_EQ(error.where.line, 1);
  EXPECT_EQ(error.where.column, 24 + 5);
  EXPECT_TRUE(Contains(error.message, "not closed")) << error.message;
}

TEST(TopologyErrorTest, EveryErrorOfTheFileIsReported) {
  const TopologyResult result = FromText(
      "SwitchName=leaf0 Nodes=n[1-4]\n"          // 1
      "SwitchName=leaf1 Nodes=n[4-8] Speed=1\n"  // 2 unknown key
      "SwitchName=leaf2 Nodes=n[9-12]\n"         // 3
      "SwitchName=leaf3 Nodes=n[12-16]\n"        // 4 n12 under two leaves
      "BlockSizes=4,2\n"                         // 5 not increasing
      "Oops\n"                                   // 6 no '='
      "SwitchName=spine Switches=leaf[0-4]\n");  // 7 leaf4 and leaf1 undefined
  const std::vector<Diagnostic> errors = Errors(result);
  ASSERT_EQ(errors.size(), 5U) << result.diagnostics.Format();
  std::vector<int> lines;
  for (const Diagnostic& error : errors) lines.push_back(error.where.line);
  std::sort(lines.begin(), lines.end());
  EXPECT_EQ(lines, (std::vector<int>{2, 4, 5, 6, 7}));
}

// --- Disconnected trees and the flat topology
// ------------------------------------

TEST(TopologyTest, DisconnectedTreesAreAWarning) {
  const TopologyResult result = FromText(
      "SwitchName=leaf0 Nodes=n[1-4]\n"
      "SwitchName=leaf1 Nodes=n[5-8]\n");
  EXPECT_FALSE(result.diagnostics.HasErrors()) << result.diagnostics.Format();
  ASSERT_EQ(result.diagnostics.All().size(), 1U);
  const Diagnostic& warning = result.diagnostics.All()[0];
  EXPECT_EQ(warning.severity, Severity::kWarning);
  EXPECT_TRUE(Contains(warning.message, "no common ancestor")) << warning.message;
  EXPECT_TRUE(Contains(warning.message, "leaf0, leaf1")) << warning.message;
  const Topology& t = result.topology;
  EXPECT_EQ(t.Roots().size(), 2U);
  EXPECT_EQ(Common(t, {"n1", "n5"}), "none");
  EXPECT_EQ(Common(t, {"n1", "n4"}), "leaf0");
}

TEST(TopologyErrorTest, BlockAcrossDisconnectedTrees) {
  const Diagnostic error =
      OnlyError(FromText("SwitchName=leaf0 Nodes=n[1-4]\n"
                         "SwitchName=leaf1 Nodes=n[5-8]\n"
                         "BlockName=b0 Nodes=n[3-6]\n"));
  EXPECT_EQ(error.where.line, 3);
  EXPECT_EQ(error.message, "block b0 spans switch trees with no common ancestor");
}

TEST(TopologyTest, BlocksWithoutSwitchesSitUnderTheImplicitSwitch) {
  const TopologyResult result = FromText("BlockName=b[0-1] Nodes=n[1-8]\n");
  const Topology t = MustBuild(result);
  EXPECT_EQ(t.NodeCount(), 8);
  EXPECT_FALSE(t.HasSwitchTree());
  EXPECT_EQ(t.Groups().size(), 2U);
  EXPECT_EQ(Common(t, {"n1", "n8"}), "cluster");
}

TEST(FlatTopologyTest, OneImplicitSwitchHoldsEveryNode) {
  const Names nodes = {"a1", "a2", "b1"};
  const Topology t = FlatTopology(nodes);
  EXPECT_FALSE(t.HasSwitchTree());
  EXPECT_EQ(t.NodeNames(), nodes);
  ASSERT_EQ(t.Switches().size(), 1U);
  const Switch& s = t.GetSwitch(0);
  EXPECT_TRUE(s.implicit);
  EXPECT_EQ(s.level, 0);
  EXPECT_EQ(s.node_count, 3);
  EXPECT_EQ(NodeNames(t, s.nodes), nodes);
  EXPECT_EQ(t.Roots(), (std::vector<SwitchId>{0}));
  EXPECT_EQ(t.MaxLevel(), 0);
  EXPECT_EQ(t.LeafOf(2), 0);
  EXPECT_EQ(t.BlockOf(2), kNone);
  ASSERT_EQ(t.Groups().size(), 1U);
  EXPECT_EQ(t.Groups()[0].nodes.size(), 3U);
  EXPECT_EQ(Common(t, {"a1", "b1"}), s.name);
}

TEST(FlatTopologyTest, EmptyCluster) {
  const Topology t = FlatTopology({});
  EXPECT_EQ(t.NodeCount(), 0);
  EXPECT_EQ(t.Switches().size(), 1U);
  EXPECT_TRUE(t.Groups().empty());
}

}  // namespace
}  // namespace cohort::topology

namespace cohort::topology {
namespace {

TEST(TopologySpareTest, SpareNodesAreKeptPerLeafAndPerBlock) {
  const Topology t =
      MustBuild(FromText("SwitchName=leaf[1-2] Nodes=n[1-8] SpareNodes=n4,n8\n"
                         "SwitchName=spine Switches=leaf[1-2]\n"
                         "BlockName=b1 Nodes=n[1-4]\n"
                         "BlockName=b2 Nodes=n[5-8] SpareNodes=n7\n"));
  std::vector<std::string> spares;
  for (NodeId n = 0; n < t.NodeCount(); ++n) {
    if (t.IsSpare(n)) spares.push_back(t.NodeName(n));
  }
  EXPECT_EQ(spares, (Names{"n4", "n7", "n8"}));
}

TEST(TopologySpareTest, ASpareOutsideItsLineOrAboveTheLeavesIsRefused) {
  const Diagnostic outside =
      OnlyError(FromText("SwitchName=leaf1 Nodes=n[1-4] SpareNodes=n5\n"
                         "SwitchName=leaf2 Nodes=n[5-8]\n"));
  EXPECT_TRUE(Contains(outside.message, "SpareNodes= names a node not in this switch's Nodes=: n5"))
      << outside.message;
  const Diagnostic above =
      OnlyError(FromText("SwitchName=leaf1 Nodes=n[1-4]\n"
                         "SwitchName=spine Switches=leaf1 SpareNodes=n1\n"));
  EXPECT_TRUE(Contains(above.message, "has SpareNodes= but no Nodes=")) << above.message;
}

}  // namespace
}  // namespace cohort::topology
