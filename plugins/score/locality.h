// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <string_view>

#include "cohort/plugin.h"

namespace cohort::plugin {

/// score/locality: best fit. The fullest nodes that still fit come first
/// (fewest GPUs left over, then fewest CPUs, then the lowest id), which keeps
/// emptier nodes whole for wider jobs; within a node the allocator packs the
/// GPUs of one locality group.
class LocalityScore final : public NodeScore {
 public:
  /// The name cohort.conf chooses it by (plugins/builtin.cpp registers it).
  static constexpr std::string_view kName = "score/locality";
  [[nodiscard]] std::string_view Name() const override { return kName; }
  void Order(const ScoreContext& context, std::span<NodeId> nodes) const override;
};

}  // namespace cohort::plugin
