// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <string_view>

#include "cohort/plugin.h"

namespace cohort::plugin {

/// priority/fifo: first come, first served within each partition tier, as
/// Slurm's priority/basic. Every job gets priority 0, so the oldest job id
/// goes first; a requeued job keeps its id and its place. Usage and age
/// change nothing, which makes the order predictable on a cluster one team
/// shares, and backfill still starts later jobs where they delay no one.
class FifoOrder final : public QueueOrder {
 public:
  /// The name cohort.conf chooses it by (plugins/builtin.cpp registers it).
  static constexpr std::string_view kName = "priority/fifo";
  [[nodiscard]] std::string_view Name() const override { return kName; }
  void Rank(const QueueContext& context, std::span<Job* const> jobs) const override;
};

}  // namespace cohort::plugin
