// SPDX-License-Identifier: Apache-2.0
#include "cohort/alloc/placement_check.h"

#include <algorithm>
#include <set>

#include <fmt/format.h>

#include "cohort/text/hostlist.h"

namespace cohort::alloc {

using topology::BlockId;
using topology::GroupId;
using topology::kNone;
using topology::SwitchId;

namespace {

std::string Names(const topology::Topology& topology, std::span<const NodeId> nodes) {
  std::vector<std::string> names;
  names.reserve(nodes.size());
  for (const NodeId n : nodes) names.push_back(topology.NodeName(n));
  return hostlist::CompressInOrder(names);
}

template <typename Id>
void AddDistinct(std::vector<Id>& ids, Id id) {
  if (id != kNone && std::find(ids.begin(), ids.end(), id) == ids.end()) ids.push_back(id);
}

absl::Status Broken(std::string what) {
  return absl::InternalError(fmt::format("placement check: {}", what));
}

// BlockSizes: one aggregate of a level at least the job's size holds every
// node, or no node is in a block.
absl::Status CheckBlockSizes(const topology::Topology& topology, const PlacementReport& report) {
  if (report.blocks.empty() || topology.BlockLevels().empty()) return absl::OkStatus();
  const int nodes = static_cast<int>(report.nodes.size());
  for (const topology::BlockLevel& level : topology.BlockLevels()) {
    if (level.size < nodes) continue;
    for (const std::vector<BlockId>& aggregate : level.aggregates) {
      const bool holds = std::all_of(report.nodes.begin(), report.nodes.end(), [&](NodeId n) {
        return std::find(aggregate.begin(), aggregate.end(), topology.BlockOf(n)) !=
               aggregate.end();
      });
      if (holds) return absl::OkStatus();
    }
  }
  std::vector<std::string> blocks;
  for (const BlockId b : report.blocks) blocks.push_back(topology.Blocks()[b].name);
  return Broken(fmt::format("{} nodes in blocks {} lie in no one aggregate of BlockSizes={}", nodes,
                            fmt::join(blocks, ","), fmt::join(topology.BlockSizes(), ",")));
}

}  // namespace

std::string GroupName(const topology::Topology& topology, GroupId group) {
  if (group == kNone) return "no group";
  const topology::Group& g = topology.Groups()[group];
  if (g.block != kNone) return topology.Blocks()[g.block].name;
  return topology.GetSwitch(g.home).name;
}

PlacementReport DescribePlacement(const topology::Topology& topology,
                                  std::span<const NodeGrant> grants, int segment) {
  PlacementReport report;
  report.segment = segment;
  std::vector<NodeId> known;
  for (const NodeGrant& g : grants) {
    report.nodes.push_back(g.node);
    if (g.node < 0 || g.node >= topology.NodeCount()) continue;
    known.push_back(g.node);
    AddDistinct(report.blocks, topology.BlockOf(g.node));
    AddDistinct(report.leaves, topology.LeafOf(g.node));
  }
  if (segment > 0 && known.size() == report.nodes.size()) {
    for (std::size_t first = 0; first + static_cast<std::size_t>(segment) <= known.size();
         first += static_cast<std::size_t>(segment)) {
      PlacedSegment& s = report.segments.emplace_back();
      s.nodes.assign(known.begin() + static_cast<std::ptrdiff_t>(first),
                     known.begin() + static_cast<std::ptrdiff_t>(first) + segment);
      s.group = topology.GroupOf(s.nodes.front());
      for (const NodeId n : s.nodes) {
        if (topology.GroupOf(n) != s.group) s.group = kNone;
      }
    }
  }
  report.domain = topology.LowestCommonSwitch(known);
  if (known.size() > 1 && report.domain != kNone) {
    report.worst_hops = 2 * (topology.GetSwitch(report.domain).level + 1);
  }
  return report;
}

absl::StatusOr<PlacementReport> CheckPlacement(const topology::Topology& topology,
                                               const GangRequest& request,
                                               std::span<const NodeGrant> grants) {
  const int segment = request.segment.value_or(0);
  PlacementReport report = DescribePlacement(topology, grants, segment);
  if (static_cast<int>(grants.size()) != request.nodes + request.spares) {
    return Broken(fmt::format(
        "{} nodes placed for a job of {}{}", grants.size(), request.nodes,
        request.spares > 0 ? fmt::format(" and {} spares", request.spares) : std::string()));
  }
  std::set<NodeId> seen;
  for (const NodeId n : report.nodes) {
    if (n < 0 || n >= topology.NodeCount()) return Broken(fmt::format("unknown node id {}", n));
    if (!seen.insert(n).second) {
      return Broken(fmt::format("node {} is placed twice", topology.NodeName(n)));
    }
  }
  for (const NodeId n : request.required_nodes) {
    if (!seen.contains(n)) {
      return Broken(fmt::format("required node {} is missing", topology.NodeName(n)));
    }
  }
  for (const NodeId n : request.excluded_nodes) {
    if (seen.contains(n)) {
      return Broken(fmt::format("excluded node {} is placed", topology.NodeName(n)));
    }
  }
  if (report.domain == kNone) return Broken("the nodes share no switch");
  if (request.max_leaves && static_cast<int>(report.leaves.size()) > *request.max_leaves) {
    return Broken(fmt::format("{} leaf switches spanned; --switches={}", report.leaves.size(),
                              *request.max_leaves));
  }
  std::set<GroupId> segment_groups;
  for (std::size_t i = 0; i < report.segments.size(); ++i) {
    const PlacedSegment& s = report.segments[i];
    if (s.group == kNone) {
      std::vector<std::string> groups;
      for (const NodeId n : s.nodes) {
        std::string name = GroupName(topology, topology.GroupOf(n));
        if (std::find(groups.begin(), groups.end(), name) == groups.end()) {
          groups.push_back(std::move(name));
        }
      }
      return Broken(fmt::format("segment {} ({}) spans {}", i + 1, Names(topology, s.nodes),
                                fmt::join(groups, " and ")));
    }
    if (request.spread_segments && !segment_groups.insert(s.group).second) {
      return Broken(fmt::format("segment {} shares {} with another (--spread-segments)", i + 1,
                                GroupName(topology, s.group)));
    }
  }
  if (!request.segment) {
    if (absl::Status s = CheckBlockSizes(topology, report); !s.ok()) return s;
  }
  return report;
}

std::string FormatPlacement(const topology::Topology& topology, const PlacementReport& report) {
  std::vector<std::string> parts;
  if (!report.segments.empty()) {
    std::vector<std::string> segments;
    for (const PlacedSegment& s : report.segments) {
      segments.push_back(
          fmt::format("{} in {}", Names(topology, s.nodes), GroupName(topology, s.group)));
    }
    parts.push_back(fmt::format("{} segment{} of {} node{} ({})", report.segments.size(),
                                report.segments.size() == 1 ? "" : "s", report.segment,
                                report.segment == 1 ? "" : "s", fmt::join(segments, ", ")));
  }
  std::vector<std::string> blocks;
  for (const BlockId b : report.blocks) blocks.push_back(topology.Blocks()[b].name);
  if (!blocks.empty()) parts.push_back(fmt::format("blocks {}", fmt::join(blocks, ",")));
  std::vector<std::string> leaves;
  for (const SwitchId s : report.leaves) {
    if (!topology.GetSwitch(s).implicit) leaves.push_back(topology.GetSwitch(s).name);
  }
  if (!leaves.empty()) parts.push_back(fmt::format("leaves {}", fmt::join(leaves, ",")));
  if (report.domain != kNone && !topology.GetSwitch(report.domain).implicit) {
    parts.push_back(fmt::format("at most {} hops (under {})", report.worst_hops,
                                topology.GetSwitch(report.domain).name));
  } else {
    parts.push_back(fmt::format("at most {} hops", report.worst_hops));
  }
  return fmt::format("{}", fmt::join(parts, "; "));
}

}  // namespace cohort::alloc
