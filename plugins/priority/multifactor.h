// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <string_view>

#include "cohort/plugin.h"

namespace cohort::plugin {

/// priority/multifactor: Slurm's multifactor priority. Each job's priority
/// is the weighted sum of its age, fair share, size, partition and QOS
/// factors (PriorityWeight*= in cohort.conf; docs/scheduling.md), so that
/// the order drifts as jobs wait and as accounts use the cluster.
class MultifactorOrder final : public QueueOrder {
 public:
  /// The name cohort.conf chooses it by (plugins/builtin.cpp registers it).
  static constexpr std::string_view kName = "priority/multifactor";
  [[nodiscard]] std::string_view Name() const override { return kName; }
  void Rank(const QueueContext& context, std::span<Job* const> jobs) const override;
};

}  // namespace cohort::plugin
