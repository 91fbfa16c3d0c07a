// SPDX-License-Identifier: Apache-2.0
#pragma once

#include "cohort/plugin.h"

namespace cohort::plugin {

/// filter/keep-gpu-nodes: a job that asks for no GPU is not placed on a node
/// that has any, so CPU-only work never strands a GPU node's accelerators
/// behind its cores and memory. GPU jobs see every node; CPU jobs wait for,
/// or are infeasible without, CPU-only nodes.
class KeepGpuNodesFilter final : public NodeFilter {
 public:
  [[nodiscard]] std::string_view Name() const override { return "filter/keep-gpu-nodes"; }
  void Filter(const FilterContext& context, std::span<const NodeId> nodes,
              std::vector<NodeId>& kept, FilterTally& tally) const override;
};

}  // namespace cohort::plugin
