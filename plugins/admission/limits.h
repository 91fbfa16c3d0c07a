// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <string_view>

#include "cohort/plugin.h"

namespace cohort::plugin {

/// admission/limits: the QOS running limits. A job waits while its user
/// runs MaxJobsPerUser jobs of its QOS, or while starting it would take its
/// user past MaxGpusPerUser or its account past MaxGpusPerAccount GPUs of
/// its QOS. Refuses nothing at submission: a job that could never fit a
/// GPU limit is the engine's to refuse (src/engine/admission.cpp).
class LimitsAdmission final : public AdmissionCheck {
 public:
  /// The name cohort.conf chooses it by (plugins/builtin.cpp registers it).
  static constexpr std::string_view kName = "admission/limits";
  [[nodiscard]] std::string_view Name() const override { return kName; }
  [[nodiscard]] absl::Status CheckSubmit(const AdmissionContext& context,
                                         const Job& job) const override;
  /// Whether some QOS has MaxJobsPerUser, MaxGpusPerUser or MaxGpusPerAccount.
  [[nodiscard]] bool MayMakeJobsWait(const config::ClusterConfig& config) const override;
  [[nodiscard]] std::optional<Wait> Admit(const AdmissionContext& context,
                                          const Job& job) const override;
};

}  // namespace cohort::plugin
