// SPDX-License-Identifier: Apache-2.0
#pragma once

#include "cohort/plugin.h"

namespace cohort::plugin {

/// score/spread: worst fit. The emptiest nodes come first (most free CPUs,
/// then most free memory, then most free GPUs, then the lowest id), so jobs
/// that share nodes share them with as little as possible: for CPU jobs
/// bound by memory bandwidth or cache, at the cost of fewer whole nodes for
/// wide or exclusive jobs.
class SpreadScore final : public NodeScore {
 public:
  [[nodiscard]] std::string_view Name() const override { return "score/spread"; }
  void Order(const ScoreContext& context, std::span<NodeId> nodes) const override;
};

}  // namespace cohort::plugin
