// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <string_view>

#include "cohort/plugin.h"

namespace cohort::plugin {

/// filter/keep-gpu-nodes: a job that asks for no GPU is not placed on a node
/// that has any, so CPU-only work never strands a GPU node's accelerators
/// behind its cores and memory. GPU jobs see every node; CPU jobs wait for,
/// or are infeasible without, CPU-only nodes.
class KeepGpuNodesFilter final : public NodeFilter {
 public:
  /// The name cohort.conf chooses it by (plugins/builtin.cpp registers it).
  static constexpr std::string_view kName = "filter/keep-gpu-nodes";
  [[nodiscard]] std::string_view Name() const override { return kName; }
  void Filter(const FilterContext& context, std::span<const NodeId> nodes,
              std::vector<NodeId>& kept, FilterTally& tally) const override;
};

}  // namespace cohort::plugin
