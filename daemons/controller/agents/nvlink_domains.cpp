// SPDX-License-Identifier: Apache-2.0
#include "agents/nvlink_domains.h"

#include <optional>

#include <fmt/format.h>

namespace cohort::controller {
namespace {

std::string BlockName(const topology::Topology& topology, topology::BlockId block) {
  return block == topology::kNone ? std::string("no block")
                                  : fmt::format("block {}", topology.Blocks()[block].name);
}

topology::BlockId BlockOf(const topology::Topology& topology, const std::string& node) {
  const std::optional<topology::NodeId> id = topology.FindNode(node);
  return id ? topology.BlockOf(*id) : topology::kNone;
}

}  // namespace

// Only the node's block and its domain's nodes are looked at: a few dozen
// nodes, however large the cluster.
std::vector<std::string> NvlinkDomains::Check(const topology::Topology& topology,
                                              const std::string& node, bool later_only) const {
  std::vector<std::string> found;
  const auto mine = domain_of_.find(node);
  if (mine == domain_of_.end()) return found;
  const topology::BlockId block = BlockOf(topology, node);
  if (block != topology::kNone) {
    for (const topology::NodeId id : topology.Blocks()[block].nodes) {
      const std::string& other = topology.NodeName(id);
      const auto theirs = domain_of_.find(other);
      if (other == node || (later_only && other < node) || theirs == domain_of_.end() ||
          theirs->second == mine->second) {
        continue;
      }
      found.push_back(fmt::format(
          "{} and {} are in {} of topology.conf but report different NVLink domains ({} and "
          "{}); fix the BlockName line",
          node, other, BlockName(topology, block), mine->second, theirs->second));
      break;
    }
  }
  for (const std::string& other : nodes_of_.at(mine->second)) {
    const topology::BlockId theirs = BlockOf(topology, other);
    if (other == node || (later_only && other < node) ||
        (block != topology::kNone && theirs == block)) {
      continue;
    }
    found.push_back(fmt::format(
        "{} and {} report one NVLink domain ({}) but topology.conf puts them in {} and {}; put "
        "them in one BlockName line",
        node, other, mine->second, BlockName(topology, block), BlockName(topology, theirs)));
    break;
  }
  return found;
}

std::vector<std::string> NvlinkDomains::Report(const topology::Topology& topology,
                                               const std::string& node, const std::string& domain) {
  if (const auto old = domain_of_.find(node); old != domain_of_.end()) {
    nodes_of_[old->second].erase(node);
    domain_of_.erase(old);
  }
  if (domain.empty()) return {};
  domain_of_[node] = domain;
  nodes_of_[domain].insert(node);
  return Check(topology, node, false);
}

std::vector<std::string> NvlinkDomains::Contradictions(const topology::Topology& topology) const {
  std::vector<std::string> all;
  for (const auto& [node, domain] : domain_of_) {
    // Each pair once: from the node that sorts first.
    for (std::string& found : Check(topology, node, true)) all.push_back(std::move(found));
  }
  return all;
}

}  // namespace cohort::controller
