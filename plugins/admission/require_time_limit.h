// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <string_view>

#include "cohort/plugin.h"

namespace cohort::plugin {

/// admission/require-time-limit: every job comes with a time limit backfill
/// can plan around. A job without --time is refused unless its partition
/// has a DefaultTime (a partition's MaxTime and a QOS' MaxWall are bounds,
/// not estimates), and so is one whose limit in force is UNLIMITED
/// (--time=UNLIMITED or DefaultTime=UNLIMITED that no MaxWall bounds).
/// Never makes a job wait.
class RequireTimeLimitAdmission final : public AdmissionCheck {
 public:
  /// The name cohort.conf chooses it by (plugins/builtin.cpp registers it).
  static constexpr std::string_view kName = "admission/require-time-limit";
  [[nodiscard]] std::string_view Name() const override { return kName; }
  /// InvalidArgument, naming --time, for a job without a time limit.
  [[nodiscard]] absl::Status CheckSubmit(const AdmissionContext& context,
                                         const Job& job) const override;
  [[nodiscard]] bool MayMakeJobsWait(const config::ClusterConfig& config) const override;
  [[nodiscard]] std::optional<Wait> Admit(const AdmissionContext& context,
                                          const Job& job) const override;
};

}  // namespace cohort::plugin
