// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "cohort/diagnostics.h"

/// The network model: a switch tree (Slurm's topology/tree) and NVLink blocks
/// (Slurm's topology/block), over the nodes of the cluster.
namespace cohort::topology {

using NodeId = std::int32_t;
using SwitchId = std::int32_t;
using BlockId = std::int32_t;
using GroupId = std::int32_t;
inline constexpr std::int32_t kNone = -1;

struct Switch {
  std::string name;
  int level = 0;  ///< 0 for leaves; above them one more than the highest child
  SwitchId parent = kNone;
  std::vector<SwitchId> children;
  std::vector<NodeId> nodes;     ///< a leaf's own nodes; empty above the leaves
  std::vector<SwitchId> leaves;  ///< the leaves of this subtree (a leaf lists itself)
  std::vector<GroupId> groups;   ///< the placement groups of this subtree
  int node_count = 0;            ///< nodes in this subtree
  bool implicit = false;         ///< made up for a cluster without SwitchName lines
  SourceLocation defined_at;
};

/// An NVLink domain: nodes whose GPUs share one NVLink fabric.
struct Block {
  std::string name;
  std::vector<NodeId> nodes;
  SourceLocation defined_at;
};

/// The unit that placement keeps a job within and counts: a block, or the
/// nodes of one leaf that are in no block. Without blocks, groups are leaves.
struct Group {
  std::vector<NodeId> nodes;
  SwitchId home = kNone;  ///< the lowest switch above every node of the group
  BlockId block = kNone;  ///< kNone for the block-less nodes of a leaf
};

/// BlockSizes as Slurm aggregates blocks: each listed size is a number of
/// nodes; level 0 (the first size, the base block size) is every block on its
/// own, a higher level k runs of BlockSizes[k] / BlockSizes[0] consecutive
/// blocks (in the order of the file; only whole runs).
struct BlockLevel {
  int size = 0;
  std::vector<std::vector<BlockId>> aggregates;
};

/// Immutable once built; safe to share between threads.
class Topology {
 public:
  [[nodiscard]] int NodeCount() const { return static_cast<int>(node_names_.size()); }
  [[nodiscard]] const std::string& NodeName(NodeId node) const { return node_names_[node]; }
  [[nodiscard]] const std::vector<std::string>& NodeNames() const { return node_names_; }
  [[nodiscard]] std::optional<NodeId> FindNode(std::string_view name) const;
  [[nodiscard]] std::optional<SwitchId> FindSwitch(std::string_view name) const;

  [[nodiscard]] const std::vector<Switch>& Switches() const { return switches_; }
  [[nodiscard]] const Switch& GetSwitch(SwitchId id) const { return switches_[id]; }
  /// Every switch, leaves first, then level by level upwards (ties by id).
  [[nodiscard]] const std::vector<SwitchId>& SwitchesByLevel() const { return by_level_; }
  /// Switches with no parent. More than one means parts no job may span.
  [[nodiscard]] const std::vector<SwitchId>& Roots() const { return roots_; }
  [[nodiscard]] int MaxLevel() const { return max_level_; }
  [[nodiscard]] SwitchId LeafOf(NodeId node) const { return leaf_of_[node]; }

  [[nodiscard]] const std::vector<Block>& Blocks() const { return blocks_; }
  [[nodiscard]] BlockId BlockOf(NodeId node) const { return block_of_[node]; }
  [[nodiscard]] const std::vector<int>& BlockSizes() const { return block_sizes_; }
  /// Empty without a BlockSizes line: then jobs take blocks freely.
  [[nodiscard]] const std::vector<BlockLevel>& BlockLevels() const { return block_levels_; }
  /// The placement group of a block's nodes; kNone for a block without nodes.
  [[nodiscard]] GroupId GroupOfBlock(BlockId block) const { return group_of_block_[block]; }
  [[nodiscard]] const std::vector<Group>& Groups() const { return groups_; }
  [[nodiscard]] GroupId GroupOf(NodeId node) const { return group_of_[node]; }

  /// The node's place in topology order: the switch tree depth first
  /// (children in the order of the file), under a switch the placement
  /// groups that sit there by id, a group's nodes in its order. Node ranks of
  /// a gang follow it, so that neighbouring ranks share a block or a leaf.
  [[nodiscard]] int OrderOf(NodeId node) const { return order_of_[node]; }
  /// SLURM_TOPOLOGY_ADDR: the switches from the top of the tree down to the
  /// node's leaf, its block, then the node, joined by dots
  /// ("spine.leaf1.nvl72-1.gb001"); the node's name alone on a flat network.
  [[nodiscard]] std::string AddressOf(NodeId node) const;
  /// SLURM_TOPOLOGY_ADDR_PATTERN: the kind of each part of AddressOf
  /// ("switch.switch.block.node").
  [[nodiscard]] std::string AddressPatternOf(NodeId node) const;

  /// SpareNodes= on its leaf's or its block's line: kept off new jobs,
  /// taken only to repair a gang that lost a node of the same placement
  /// group (GroupOf).
  [[nodiscard]] bool IsSpare(NodeId node) const {
    return !spare_.empty() && spare_[static_cast<std::size_t>(node)] != 0;
  }

  /// True when the switches came from a file, false for the implicit one.
  [[nodiscard]] bool HasSwitchTree() const { return !switches_.empty() && !switches_[0].implicit; }

  /// The lowest switch above all of `nodes`, or kNone when they lie in trees
  /// with no common ancestor (or `nodes` is empty).
  [[nodiscard]] SwitchId LowestCommonSwitch(std::span<const NodeId> nodes) const;
  /// The lowest switch above both; kNone when there is none.
  [[nodiscard]] SwitchId LowestCommonSwitch(SwitchId a, SwitchId b) const;

 private:
  friend class TopologyBuilder;

  std::vector<std::string> node_names_;
  std::unordered_map<std::string, NodeId> node_index_;
  std::vector<Switch> switches_;
  std::unordered_map<std::string, SwitchId> switch_index_;
  std::vector<SwitchId> by_level_;
  std::vector<SwitchId> roots_;
  std::vector<int> depth_;  ///< distance from the root, for common-ancestor walks
  int max_level_ = 0;
  std::vector<SwitchId> leaf_of_;
  std::vector<Block> blocks_;
  std::vector<BlockId> block_of_;
  std::vector<int> block_sizes_;
  std::vector<BlockLevel> block_levels_;
  std::vector<GroupId> group_of_block_;
  std::vector<int> order_of_;
  std::vector<Group> groups_;
  std::vector<GroupId> group_of_;
  std::vector<std::uint8_t> spare_;  ///< by node: 1 for SpareNodes=
};

/// Where the cluster's node names come from.
enum class NodeSource {
  kConfig,    ///< `node_names` (cohort.conf's NodeName lines) is the cluster
  kTopology,  ///< the nodes are those the topology names, in order of appearance
};

struct TopologyResult {
  Topology topology;
  Diagnostics diagnostics;  ///< usable only when !diagnostics.HasErrors()
};

/// TopologyBlocks=auto: the blocks are the nodes' NVLink domains as the
/// controller wrote them (BlockName lines in `file`), not topology.conf's.
struct ReportedBlocks {
  std::string text;
  std::string file;
};

/// Parses topology.conf (Slurm syntax: `SwitchName=… Nodes=…` for leaves,
/// `SwitchName=… Switches=…` above them, `BlockName=… Nodes=…`,
/// `BlockSizes=`) and builds the model. Reports, by line: a node under two
/// leaves or in two blocks, a switch referenced but never defined or under two
/// parents, a cycle, nodes of the topology that `node_names` lacks and the
/// reverse (kConfig), and as a warning, trees with no common ancestor.
/// With `reported`, BlockName lines of `text` are an error, the blocks are
/// `reported`'s, and a node it names that the cluster lacks is a warning.
[[nodiscard]] TopologyResult BuildTopology(std::string_view text, std::string_view file,
                                           std::span<const std::string> node_names,
                                           NodeSource source,
                                           const ReportedBlocks* reported = nullptr);

/// The topology of a cluster without topology.conf: one implicit switch that
/// holds every node, as Slurm treats a flat network.
[[nodiscard]] Topology FlatTopology(std::span<const std::string> node_names);

}  // namespace cohort::topology
