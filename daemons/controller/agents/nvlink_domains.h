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
  /// How many nodes have reported a domain.
  [[nodiscard]] std::size_t ReportedCount() const { return domain_of_.size(); }

 private:
  /// What contradicts `topology` about `node`; with `later_only`, only
  /// against nodes whose names sort after its own.
  [[nodiscard]] std::vector<std::string> Check(const topology::Topology& topology,
                                               const std::string& node, bool later_only) const;

  std::map<std::string, std::string> domain_of_;           ///< by node name
  std::map<std::string, std::set<std::string>> nodes_of_;  ///< by domain
};

}  // namespace cohort::controller
