// SPDX-License-Identifier: Apache-2.0
#include "plugins/admission/require_time_limit.h"

#include <fmt/format.h>

namespace cohort::plugin {

absl::Status RequireTimeLimitAdmission::CheckSubmit(const AdmissionContext& context,
                                                    const Job& job) const {
  // The engine has resolved the job: its request names its partition, and
  // a request's time limit of 0 means none was given.
  const config::PartitionSpec* partition = context.config.FindPartition(job.request.partition);
  if (job.request.time_limit.count() == 0 &&
      (partition == nullptr || !partition->default_time.has_value())) {
    return absl::InvalidArgumentError(
        fmt::format("time: the job has no time limit and partition {} has no DefaultTime; add "
                    "--time=HH:MM:SS (#SBATCH --time) so backfill can plan around it",
                    job.request.partition));
  }
  if (job.time_limit == kUnlimited) {
    return absl::InvalidArgumentError(
        "time: the job's time limit is UNLIMITED; give --time=HH:MM:SS (#SBATCH --time) so "
        "backfill can plan around it");
  }
  return absl::OkStatus();
}

bool RequireTimeLimitAdmission::MayMakeJobsWait(const config::ClusterConfig& /*config*/) const {
  return false;
}

std::optional<Wait> RequireTimeLimitAdmission::Admit(const AdmissionContext& /*context*/,
                                                     const Job& /*job*/) const {
  return std::nullopt;
}

}  // namespace cohort::plugin
