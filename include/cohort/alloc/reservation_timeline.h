// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <span>
#include <tuple>
#include <utility>
#include <vector>

#include "cohort/alloc/gang_allocator.h"
#include "cohort/alloc/node_pool.h"

namespace cohort {

using alloc::NodeId;

/// Whether one node of the gang could fit a node with this capacity and
/// these free resources: an upper bound of what the allocator accepts (it
/// ignores features, exclusions and the node's condition).
[[nodiscard]] bool MayFitOneNode(const alloc::GangRequest& gang,
                                 const alloc::NodeCapacity& capacity, const alloc::NodeFree& free);

/// What decides whether one node of a gang fits a node's free resources:
/// partition (-1: none), exclusive, CPUs, memory and GPUs per node.
using GangShape = std::tuple<int, bool, int, std::int64_t, int>;
[[nodiscard]] GangShape ShapeOf(const alloc::GangRequest& gang);
/// MayFitOneNode for one node of a gang of this shape.
[[nodiscard]] bool MayFitOneNode(const GangShape& shape, const alloc::NodeCapacity& capacity,
                                 const alloc::NodeFree& free);

/// When each node could first take one node of a gang, from what the running
/// jobs free as they end: what a scheduling pass builds once to plan the
/// start of the jobs that wait (backfill reservations), instead of walking
/// every running job for each of them.
///
/// It reads the live pool for what is free now, and the `releases` given at
/// construction for what frees later. A grant taken after construction is
/// reported with NodeChanged and counts as held forever: planned starts can
/// only be late, never early. Times are those of the releases; a node that
/// fits now counts from the earliest release (a reservation starts when
/// something ends).
class ReservationTimeline {
 public:
  using Millis = std::chrono::milliseconds;
  /// A grant a running job holds, and the latest time it frees it.
  struct Release {
    Millis end{0};
    alloc::NodeGrant grant;
  };
  /// When the nodes could first take one node of a gang.
  struct Fits {
    std::vector<Millis>
        time;  ///< per node; Millis::max(): never (or not up, or not in the partition)
    std::vector<std::pair<Millis, NodeId>> order;  ///< the others, by time, then id
  };

  ReservationTimeline(const alloc::NodePool& pool, std::vector<Release> releases);
  ReservationTimeline(const ReservationTimeline&) = delete;
  ReservationTimeline& operator=(const ReservationTimeline&) = delete;

  /// The nodes of the gang's partition (every node without one) that are up
  /// and could take one node of it by some release time, in time order.
  /// Kept per shape (partition, exclusivity, CPUs, memory, GPUs per node),
  /// and kept current by NodeChanged.
  [[nodiscard]] const Fits& FitTimes(const alloc::GangRequest& gang);

  /// The live pool's free resources on `node` changed (a job started there).
  void NodeChanged(NodeId node);

  /// Releases into `shadow` (a copy of the live pool) the nodes' grants
  /// that end by `t`, beyond those released already.
  void Advance(std::span<const NodeId> nodes, Millis t, alloc::NodePool& shadow);
  /// Takes back into `shadow` everything Advance released: the live state.
  void Rewind(alloc::NodePool& shadow);

 private:
  struct Shape {
    alloc::GangRequest gang;  ///< the shape's fields only
    Fits fits;
  };
  [[nodiscard]] Millis ComputeFitTime(const alloc::GangRequest& gang, NodeId node) const;
  [[nodiscard]] std::span<const Release> ReleasesOf(NodeId node) const;

  const alloc::NodePool& pool_;
  std::vector<Release> releases_;       ///< by node, then end
  std::vector<std::uint32_t> offsets_;  ///< node n's releases: [offsets_[n], offsets_[n + 1])
  Millis first_end_ = Millis::max();
  std::map<GangShape, Shape> shapes_;
  /// Advance's progress: releases taken per node, and the nodes touched.
  std::vector<std::uint32_t> advanced_;
  std::vector<NodeId> advanced_nodes_;
};

}  // namespace cohort
