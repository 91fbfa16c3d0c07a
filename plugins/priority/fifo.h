// SPDX-License-Identifier: Apache-2.0
#pragma once

#include "cohort/plugin.h"

namespace cohort::plugin {

/// priority/fifo: first come, first served within each partition tier, as
/// Slurm's priority/basic. Every job gets priority 0, so the oldest job id
/// goes first; a requeued job keeps its id and its place. Usage and age
/// change nothing, which makes the order predictable on a cluster one team
/// shares, and backfill still starts later jobs where they delay no one.
class FifoOrder final : public QueueOrder {
 public:
  [[nodiscard]] std::string_view Name() const override { return "priority/fifo"; }
  void Rank(const QueueContext& context, std::span<Job* const> jobs) const override;
};

}  // namespace cohort::plugin
