// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <map>
#include <set>
#include <string>
#include <vector>

#include "cohort/alloc/topology.h"

/// The NVLink domains nodes report at registration (NVML's fabric cluster
/// UUID and clique), checked against topology.conf's blocks: nodes of one
/// block must share one domain, and one domain must not span blocks. Kept
/// by node name, so that a reloaded topology is checked the same way.
namespace cohort::controller {

class NvlinkDomains {
 public:
  /// Records the node's domain ("UUID/clique"; empty: none known) and
  /// returns what contradicts `topology`, one sentence each: empty when it
  /// agrees.
  [[nodiscard]] std::vector<std::string> Report(const topology::Topology& topology,
                                                const std::string& node, const std::string& domain);

  /// Every contradiction among the nodes heard so far, each pair of nodes
  /// once.
  [[nodiscard]] std::vector<std::string> Contradictions(const topology::Topology& topology) const;
  /// TopologyBlocks=auto: the blocks as the nodes' domains give them. A
  /// node that has registered since the controller started is in the block
  /// of the domain it reported (none if it reported none); one that has not
  /// keeps its block of `topology` (the blocks written before the
  /// restart), so that agents reconnecting one by one do not shrink them.
  /// A domain's block is named `nvl-` with the first 8 hex digits of its
  /// cluster UUID and its clique (`nvl-00112233-1`), or the whole UUID where
  /// 8 digits would name two reported domains alike.
  struct BlockFile {
    std::string text;  ///< a comment, then `BlockName=NAME Nodes=HOSTLIST` lines
    int blocks = 0;
    int nodes = 0;  ///< nodes in them
  };
  [[nodiscard]] BlockFile Blocks(const topology::Topology& topology) const;

  /// How many nodes have reported a domain.
  [[nodiscard]] std::size_t ReportedCount() const { return domain_of_.size(); }

 private:
  /// What contradicts `topology` about `node`; with `later_only`, only
  /// against nodes whose names sort after its own.
  [[nodiscard]] std::vector<std::string> Check(const topology::Topology& topology,
                                               const std::string& node, bool later_only) const;

  std::map<std::string, std::string> domain_of_;           ///< by node name
  std::set<std::string> heard_;                            ///< nodes that have registered
  std::map<std::string, std::set<std::string>> nodes_of_;  ///< by domain
};

}  // namespace cohort::controller
