// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <string_view>

#include "cohort/plugin.h"

namespace cohort::plugin {

/// filter/resources: the node filter placement is correct only with, hence
/// always first. Drops the request's excluded nodes, nodes too small or
/// without a feature, and in the View::kNow view nodes down, drained,
/// without the free CPUs, memory and GPUs one node of the gang needs, or not
/// idle for an exclusive job.
class ResourcesFilter final : public NodeFilter {
 public:
  /// The name cohort.conf chooses it by (plugins/builtin.cpp registers it).
  static constexpr std::string_view kName = "filter/resources";
  [[nodiscard]] std::string_view Name() const override { return kName; }
  void Filter(const FilterContext& context, std::span<const NodeId> nodes,
              std::vector<NodeId>& kept, FilterTally& tally) const override;
};

}  // namespace cohort::plugin
