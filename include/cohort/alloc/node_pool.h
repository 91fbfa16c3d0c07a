// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "cohort/alloc/topology.h"
#include "cohort/config/cluster_config.h"

/// What every node has and what is free on it: the state the gang allocator
/// reads and the engine changes. Pure data; owned by one thread.
namespace cohort::alloc {

using topology::NodeId;
using PartitionId = std::int32_t;

/// Whether a node may take new work. The controller's richer node states
/// (IDLE, MIXED, DRAINING, …) map onto these.
enum class NodeCondition : std::uint8_t {
  kUp,       ///< takes new work
  kDrained,  ///< an operator keeps new work off it (draining or drained)
  kDown,     ///< its agent is gone or not yet registered
};

struct NodeCapacity {
  int cpus = 0;
  std::int64_t memory_mb = 0;
  int gpus = 0;
  /// For each locality group (GPUs that share a NUMA node or switch), the
  /// mask of its GPU indices. One group holding every GPU when unknown.
  std::vector<std::uint64_t> gpu_groups;
  std::uint64_t features = 0;  ///< bit i: the pool's feature i
};

struct NodeFree {
  int cpus = 0;
  std::int64_t memory_mb = 0;
  std::uint64_t gpus = 0;  ///< bit i: GPU index i is free
};

/// What one node of a gang gets.
struct NodeGrant {
  NodeId node = topology::kNone;
  int cpus = 0;
  std::int64_t memory_mb = 0;
  std::uint64_t gpus = 0;  ///< GPU indices, as a mask
  /// --exclusive=topo: while this grant lasts, no other job may take a node
  /// of the node's placement group (its block, or its leaf's nodes in none).
  bool holds_group = false;

  friend bool operator==(const NodeGrant&, const NodeGrant&) = default;
};

struct Partition {
  std::string name;
  std::vector<NodeId> nodes;
  std::vector<std::uint8_t> contains;  ///< by NodeId: 1 when in the partition
};

/// The feature that marks a node's GPUs as of `type` (Gres=gpu:TYPE:N):
/// `gpu:TYPE`.
[[nodiscard]] std::string GpuTypeFeature(std::string_view type);

/// The resources of a cluster's nodes, indexed by the topology's NodeIds.
class NodePool {
 public:
  /// Builds the pool of `topology`'s nodes from their NodeName specs and the
  /// partitions. Every node starts kUp and idle. Returns InvalidArgument when
  /// a topology node has no spec, a partition names an unknown node, or the
  /// nodes declare more than 64 distinct features.
  [[nodiscard]] static absl::StatusOr<NodePool> Create(
      const topology::Topology& topology, std::span<const config::NodeSpec> nodes,
      std::span<const config::PartitionSpec> partitions);

  [[nodiscard]] int NodeCount() const { return static_cast<int>(free_.size()); }
  [[nodiscard]] const NodeCapacity& Capacity(NodeId node) const { return fixed_->capacity[node]; }
  [[nodiscard]] const NodeFree& Free(NodeId node) const { return free_[node]; }
  [[nodiscard]] NodeCondition Condition(NodeId node) const { return condition_[node]; }
  /// True when nothing of the node is allocated.
  [[nodiscard]] bool IsIdle(NodeId node) const;
  /// The node's placement group (Topology::GroupOf).
  [[nodiscard]] topology::GroupId GroupOf(NodeId node) const { return fixed_->group_of[node]; }
  /// True when no node of the group has anything allocated.
  [[nodiscard]] bool GroupIdle(topology::GroupId group) const { return group_busy_[group] == 0; }
  /// True while a grant that holds_group lies in the group: it is closed to
  /// every other job.
  [[nodiscard]] bool GroupHeld(topology::GroupId group) const { return group_holds_[group] > 0; }
  /// How many groups are held; 0 lets filters skip the per-node look-up.
  [[nodiscard]] int HeldGroupCount() const { return held_groups_; }

  void SetCondition(NodeId node, NodeCondition condition) { condition_[node] = condition; }
  /// Replaces the node's GPU locality groups (from its agent's discovery).
  /// Returns InvalidArgument unless the groups partition the node's GPUs.
  [[nodiscard]] absl::Status SetGpuGroups(NodeId node, std::vector<std::uint64_t> groups);

  /// Whether `grant` could be committed now: its resources are free, its
  /// node's group is held by no one, and, if it holds the group, no other
  /// job is in it.
  [[nodiscard]] bool Admits(const NodeGrant& grant) const;

  /// Takes the grants out of the free resources. Check-fails when a grant
  /// takes more than is free: that would allocate something twice.
  void Commit(std::span<const NodeGrant> grants);
  /// Returns the grants. Check-fails when more would be free than exists.
  void Release(std::span<const NodeGrant> grants);

  /// The mask of the named features; nullopt when a name is on no node.
  [[nodiscard]] std::optional<std::uint64_t> FeatureMask(std::span<const std::string> names) const;
  [[nodiscard]] const std::vector<std::string>& FeatureNames() const {
    return fixed_->feature_names;
  }

  [[nodiscard]] std::optional<PartitionId> FindPartition(std::string_view name) const;
  [[nodiscard]] const Partition& GetPartition(PartitionId id) const {
    return fixed_->partitions[id];
  }
  [[nodiscard]] int PartitionCount() const { return static_cast<int>(fixed_->partitions.size()); }

  /// Identifies the pool's capacities: copies share it; a new pool, or new
  /// GPU groups, get a new one. What depends only on capacities (whether a
  /// gang could ever fit) may be remembered under it.
  [[nodiscard]] std::uint64_t CapacityId() const { return capacity_id_; }

 private:
  /// What changes only when nodes report their GPU layout: shared by
  /// copies (a scheduling pass copies the pool), copied before a change
  /// when shared.
  struct Fixed {
    std::vector<NodeCapacity> capacity;
    std::vector<std::string> feature_names;
    std::vector<Partition> partitions;
    std::vector<topology::GroupId> group_of;  ///< by node
  };
  void CountIdleChange(NodeId node, bool was_idle, bool holds_group, int direction);
  std::uint64_t capacity_id_ = 0;
  std::shared_ptr<Fixed> fixed_;
  std::vector<NodeFree> free_;
  std::vector<NodeCondition> condition_;
  std::vector<int> group_busy_;   ///< by group: nodes with anything allocated
  std::vector<int> group_holds_;  ///< by group: grants that hold it (--exclusive=topo)
  int held_groups_ = 0;
};

/// The mask of the first `count` GPU indices.
[[nodiscard]] constexpr std::uint64_t AllGpus(int count) {
  return count >= 64 ? ~std::uint64_t{0} : (std::uint64_t{1} << count) - 1;
}

}  // namespace cohort::alloc
