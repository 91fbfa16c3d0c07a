// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <string_view>

#include "cohort/plugin.h"

namespace cohort::plugin {

/// score/spread: worst fit. The emptiest nodes come first (most free CPUs,
/// then most free memory, then most free GPUs, then the lowest id), so jobs
/// that share nodes share them with as little as possible: for CPU jobs
/// bound by memory bandwidth or cache, at the cost of fewer whole nodes for
/// wide or exclusive jobs.
class SpreadScore final : public NodeScore {
 public:
  /// The name cohort.conf chooses it by (plugins/builtin.cpp registers it).
  static constexpr std::string_view kName = "score/spread";
  [[nodiscard]] std::string_view Name() const override { return kName; }
  void Order(const ScoreContext& context, std::span<NodeId> nodes) const override;
};

}  // namespace cohort::plugin
