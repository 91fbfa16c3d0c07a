// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <span>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "cohort/alloc/gang_allocator.h"
#include "cohort/alloc/topology.h"

/// What a placement is, checked against what was asked: the allocator's
/// answer verified before the engine commits it, and the shape that
/// `cohort show job`, `scontrol show job` and the REST API report.
namespace cohort::alloc {

/// One --segment of a gang: S consecutive node ranks in one group.
struct PlacedSegment {
  std::vector<NodeId> nodes;                  ///< by node rank
  topology::GroupId group = topology::kNone;  ///< the group (block or leaf) holding it
};

struct PlacementReport {
  int segment = 0;                              ///< nodes per segment; 0: no --segment
  std::vector<PlacedSegment> segments;          ///< in node-rank order; none without --segment
  std::vector<NodeId> nodes;                    ///< by node rank
  std::vector<topology::BlockId> blocks;        ///< distinct, in node-rank order
  std::vector<topology::SwitchId> leaves;       ///< distinct, in node-rank order
  topology::SwitchId domain = topology::kNone;  ///< the lowest switch above every node
  /// Links on the longest path between two of its nodes over the switch
  /// tree: 0 for one node, 2 under one leaf, 2 more for each level above.
  int worst_hops = 0;
};

/// Checks `grants` (by node rank) against `request` on `topology`: the
/// node count, no node twice, every node known, the required nodes in and the
/// excluded ones out, a common switch above them all, --switches, every
/// --segment of S consecutive ranks inside one group (and, with
/// --spread-segments, no two in one group), and BlockSizes (a job without
/// segments inside one aggregate of a listed size, or in no block at all).
/// Returns the report, or Internal naming the rule broken: a placement that
/// fails is the allocator's bug, never to be committed.
[[nodiscard]] absl::StatusOr<PlacementReport> CheckPlacement(const topology::Topology& topology,
                                                             const GangRequest& request,
                                                             std::span<const NodeGrant> grants);

/// The report without the checks, for a placement already committed (a
/// running job's, read back from the state store).
[[nodiscard]] PlacementReport DescribePlacement(const topology::Topology& topology,
                                                std::span<const NodeGrant> grants, int segment);

/// One line for people: "2 segments of 18 nodes (gb[001-018] in nvl72-1,
/// gb[019-036] in nvl72-2); blocks nvl72-[1-2]; leaves ib-leaf1; at most 2
/// hops (under ib-leaf1)".
[[nodiscard]] std::string FormatPlacement(const topology::Topology& topology,
                                          const PlacementReport& report);

/// The name of the group holding a segment: its block's, else its leaf's.
[[nodiscard]] std::string GroupName(const topology::Topology& topology, topology::GroupId group);

}  // namespace cohort::alloc
