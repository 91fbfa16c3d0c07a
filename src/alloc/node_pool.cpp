// SPDX-License-Identifier: Apache-2.0
#include "cohort/alloc/node_pool.h"

#include <algorithm>
#include <atomic>
#include <unordered_map>

#include <fmt/format.h>

#include "absl/status/status.h"
#include "cohort/check.h"
#include "cohort/launch/node_layout.h"

namespace cohort::alloc {
namespace {

std::uint64_t NextCapacityId() {
  static std::atomic<std::uint64_t> next{1};
  return next.fetch_add(1, std::memory_order_relaxed);
}

}  // namespace

absl::StatusOr<NodePool> NodePool::Create(const topology::Topology& topology,
                                          std::span<const config::NodeSpec> nodes,
                                          std::span<const config::PartitionSpec> partitions) {
  NodePool pool;
  pool.capacity_id_ = NextCapacityId();
  pool.fixed_ = std::make_shared<Fixed>();
  Fixed& fixed = *pool.fixed_;
  const int count = topology.NodeCount();
  fixed.capacity.resize(count);
  pool.free_.resize(count);
  pool.condition_.assign(count, NodeCondition::kUp);
  fixed.group_of.resize(count);
  for (NodeId n = 0; n < count; ++n) fixed.group_of[n] = topology.GroupOf(n);
  pool.group_busy_.assign(topology.Groups().size(), 0);
  pool.group_holds_.assign(topology.Groups().size(), 0);

  std::vector<bool> defined(count, false);
  for (const config::NodeSpec& spec : nodes) {
    const std::optional<NodeId> id = topology.FindNode(spec.name);
    if (!id) continue;  // the topology's validation reports nodes it lacks
    std::uint64_t features = 0;
    // A GPU type is a feature of its own kind, `gpu:TYPE`, which no
    // Features= name can spell (they have no `:`).
    std::vector<std::string> names = spec.features;
    if (!spec.gpu_type.empty()) names.push_back(GpuTypeFeature(spec.gpu_type));
    for (const std::string& feature : names) {
      auto it = std::find(fixed.feature_names.begin(), fixed.feature_names.end(), feature);
      if (it == fixed.feature_names.end()) {
        if (fixed.feature_names.size() == 64) {
          return absl::InvalidArgumentError(
              fmt::format("node {} brings the 65th distinct feature ({}); at most 64 are supported",
                          spec.name, feature));
        }
        fixed.feature_names.push_back(feature);
        it = fixed.feature_names.end() - 1;
      }
      features |= std::uint64_t{1} << (it - fixed.feature_names.begin());
    }
    NodeCapacity& capacity = fixed.capacity[*id];
    capacity.cpus = spec.cpus;
    capacity.memory_mb = spec.memory_mb;
    capacity.gpus = spec.gpus;
    capacity.features = features;
    if (spec.gpus > 0) {
      // GpuNuma= gives the locality groups until the agent reports its own.
      layout::NodeLayout gpus;
      gpus.gpus = layout::ConfiguredGpus(spec.gpus, spec.gpu_numa);
      capacity.gpu_groups = layout::GpuGroups(gpus);
      if (capacity.gpu_groups.empty()) capacity.gpu_groups = {AllGpus(spec.gpus)};
    }
    pool.free_[*id] = {spec.cpus, spec.memory_mb, AllGpus(spec.gpus)};
    defined[*id] = true;
  }
  for (NodeId n = 0; n < count; ++n) {
    if (!defined[n]) {
      return absl::InvalidArgumentError(
          fmt::format("node {} is in the topology but has no NodeName line", topology.NodeName(n)));
    }
  }

  for (const config::PartitionSpec& spec : partitions) {
    Partition partition;
    partition.name = spec.name;
    partition.contains.assign(count, 0);
    for (const std::string& name : spec.nodes) {
      const std::optional<NodeId> id = topology.FindNode(name);
      if (!id) {
        return absl::InvalidArgumentError(fmt::format(
            "partition {} names node {}, which is not in the topology", spec.name, name));
      }
      if (partition.contains[*id] == 0) partition.nodes.push_back(*id);
      partition.contains[*id] = 1;
    }
    fixed.partitions.push_back(std::move(partition));
  }
  return pool;
}

bool NodePool::IsIdle(NodeId node) const {
  const NodeCapacity& c = fixed_->capacity[node];
  const NodeFree& f = free_[node];
  return f.cpus == c.cpus && f.memory_mb == c.memory_mb && f.gpus == AllGpus(c.gpus);
}

absl::Status NodePool::SetGpuGroups(NodeId node, std::vector<std::uint64_t> groups) {
  std::uint64_t seen = 0;
  for (const std::uint64_t group : groups) {
    if ((seen & group) != 0 || group == 0) {
      return absl::InvalidArgumentError("gpu locality groups overlap or are empty");
    }
    seen |= group;
  }
  if (seen != AllGpus(Capacity(node).gpus)) {
    return absl::InvalidArgumentError(fmt::format(
        "gpu locality groups cover {:#x}, the node has {} GPUs", seen, Capacity(node).gpus));
  }
  if (fixed_.use_count() > 1) fixed_ = std::make_shared<Fixed>(*fixed_);
  fixed_->capacity[node].gpu_groups = std::move(groups);
  capacity_id_ = NextCapacityId();
  return absl::OkStatus();
}

bool NodePool::Admits(const NodeGrant& grant) const {
  const NodeFree& f = free_[grant.node];
  if (f.cpus < grant.cpus || f.memory_mb < grant.memory_mb || (f.gpus & grant.gpus) != grant.gpus) {
    return false;
  }
  const topology::GroupId group = fixed_->group_of[grant.node];
  return group == topology::kNone ||
         (!GroupHeld(group) && (!grant.holds_group || GroupIdle(group)));
}

void NodePool::Commit(std::span<const NodeGrant> grants) {
  for (const NodeGrant& g : grants) {
    NodeFree& f = free_[g.node];
    COHORT_CHECK(f.cpus >= g.cpus, "grant takes more cpus than are free");
    COHORT_CHECK(f.memory_mb >= g.memory_mb, "grant takes more memory than is free");
    COHORT_CHECK((f.gpus & g.gpus) == g.gpus, "grant takes a gpu that is not free");
    const bool was_idle = IsIdle(g.node);
    f.cpus -= g.cpus;
    f.memory_mb -= g.memory_mb;
    f.gpus &= ~g.gpus;
    CountIdleChange(g.node, was_idle, g.holds_group, +1);
  }
}

void NodePool::Release(std::span<const NodeGrant> grants) {
  for (const NodeGrant& g : grants) {
    NodeFree& f = free_[g.node];
    const NodeCapacity& c = fixed_->capacity[g.node];
    COHORT_CHECK(f.cpus + g.cpus <= c.cpus, "release returns more cpus than the node has");
    COHORT_CHECK(f.memory_mb + g.memory_mb <= c.memory_mb,
                 "release returns more memory than the node has");
    COHORT_CHECK((f.gpus & g.gpus) == 0, "release returns a gpu that is already free");
    const bool was_idle = IsIdle(g.node);
    f.cpus += g.cpus;
    f.memory_mb += g.memory_mb;
    f.gpus |= g.gpus;
    CountIdleChange(g.node, was_idle, g.holds_group, -1);
  }
}

// Keeps the per-group counts that --exclusive=topo reads: +1 for a grant
// taken, -1 for one returned.
void NodePool::CountIdleChange(NodeId node, bool was_idle, bool holds_group, int direction) {
  const topology::GroupId group = fixed_->group_of[node];
  if (group == topology::kNone) return;
  if (was_idle != IsIdle(node)) group_busy_[group] += was_idle ? 1 : -1;
  if (holds_group) {
    int& holds = group_holds_[group];
    COHORT_CHECK(holds + direction >= 0, "a group is released more often than it was held");
    if (holds == 0) ++held_groups_;
    holds += direction;
    if (holds == 0) --held_groups_;
  }
}

std::string GpuTypeFeature(std::string_view type) { return fmt::format("gpu:{}", type); }

std::optional<std::uint64_t> NodePool::FeatureMask(std::span<const std::string> names) const {
  std::uint64_t mask = 0;
  for (const std::string& name : names) {
    const auto it = std::find(fixed_->feature_names.begin(), fixed_->feature_names.end(), name);
    if (it == fixed_->feature_names.end()) return std::nullopt;
    mask |= std::uint64_t{1} << (it - fixed_->feature_names.begin());
  }
  return mask;
}

std::optional<PartitionId> NodePool::FindPartition(std::string_view name) const {
  for (std::size_t i = 0; i < fixed_->partitions.size(); ++i) {
    if (fixed_->partitions[i].name == name) return static_cast<PartitionId>(i);
  }
  return std::nullopt;
}

}  // namespace cohort::alloc
