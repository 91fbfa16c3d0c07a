// SPDX-License-Identifier: Apache-2.0
#include "agents/nvlink_domains.h"

#include <algorithm>
#include <optional>

#include "cohort/text/hostlist.h"

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

// "UUID/clique" as a block name: nvl-UUID8-clique, or the whole UUID.
std::string BlockNameOf(const std::string& domain, bool whole_uuid) {
  const std::size_t slash = domain.find('/');
  const std::string uuid = domain.substr(0, slash);
  const std::string clique = slash == std::string::npos ? "0" : domain.substr(slash + 1);
  return fmt::format("nvl-{}-{}", whole_uuid ? uuid : uuid.substr(0, 8), clique);
}

}  // namespace

NvlinkDomains::BlockFile NvlinkDomains::Blocks(const topology::Topology& topology) const {
  std::map<std::string, int> short_names;  // reported domains by short name
  std::set<std::string> domains;
  for (const auto& [node, domain] : domain_of_) domains.insert(domain);
  for (const std::string& domain : domains) ++short_names[BlockNameOf(domain, false)];
  // By block name: its nodes, in topology order.
  std::map<std::string, std::vector<topology::NodeId>> members;
  for (topology::NodeId n = 0; n < topology.NodeCount(); ++n) {
    const std::string& node = topology.NodeName(n);
    std::string name;
    if (heard_.contains(node)) {
      if (const auto it = domain_of_.find(node); it != domain_of_.end()) {
        name = BlockNameOf(it->second, short_names[BlockNameOf(it->second, false)] > 1);
      }
    } else if (topology.BlockOf(n) != topology::kNone) {
      name = topology.Blocks()[topology.BlockOf(n)].name;
    }
    if (!name.empty()) members[name].push_back(n);
  }
  std::vector<std::pair<std::string, std::vector<topology::NodeId>>> blocks(members.begin(),
                                                                            members.end());
  const auto by_order = [&](topology::NodeId a, topology::NodeId b) {
    return topology.OrderOf(a) < topology.OrderOf(b);
  };
  for (auto& [name, nodes] : blocks) std::sort(nodes.begin(), nodes.end(), by_order);
  std::sort(blocks.begin(), blocks.end(), [&](const auto& a, const auto& b) {
    return by_order(a.second.front(), b.second.front());
  });
  BlockFile file;
  file.text =
      "# TopologyBlocks=auto: the NVLink domains (NVML cluster UUID and clique) the nodes\n"
      "# report, written by cohort-controller. Do not edit: it is rewritten as they report.\n";
  for (const auto& [name, nodes] : blocks) {
    std::vector<std::string> names;
    for (const topology::NodeId n : nodes) names.push_back(topology.NodeName(n));
    file.text += fmt::format("BlockName={} Nodes={}\n", name, hostlist::CompressInOrder(names));
    ++file.blocks;
    file.nodes += static_cast<int>(nodes.size());
  }
  return file;
}

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
  heard_.insert(node);
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
