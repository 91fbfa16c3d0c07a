// SPDX-License-Identifier: Apache-2.0
#include "plugins/admission/limits.h"

#include <algorithm>

#include <fmt/format.h>

namespace cohort::plugin {
namespace {

template <class Map, class Key>
int At(const Map& map, const Key& key) {
  const auto it = map.find(key);
  return it == map.end() ? 0 : it->second;
}

}  // namespace

absl::Status LimitsAdmission::CheckSubmit(const AdmissionContext& /*context*/,
                                          const Job& /*job*/) const {
  return absl::OkStatus();
}

bool LimitsAdmission::MayMakeJobsWait(const config::ClusterConfig& config) const {
  return std::any_of(config.qos.begin(), config.qos.end(), [](const config::QosSpec& q) {
    return q.max_jobs_per_user || q.max_gpus_per_user || q.max_gpus_per_account;
  });
}

std::optional<Wait> LimitsAdmission::Admit(const AdmissionContext& context, const Job& job) const {
  const config::QosSpec* qos = context.config.FindQos(job.qos);
  if (qos == nullptr) return std::nullopt;
  const RunningTotals& running = context.running;
  const int gpus = GpusAsked(job);
  const int user_jobs = At(running.jobs_per_user, std::pair{job.qos, job.request.uid});
  if (qos->max_jobs_per_user && user_jobs >= *qos->max_jobs_per_user) {
    return Wait{PendingReason::kQosMaxJobsPerUser,
                fmt::format("QOS {} allows {} running jobs per user (MaxJobsPerUser)", qos->name,
                            *qos->max_jobs_per_user)};
  }
  const int user_gpus = At(running.gpus_per_user, std::pair{job.qos, job.request.uid});
  if (qos->max_gpus_per_user && user_gpus + gpus > *qos->max_gpus_per_user) {
    return Wait{PendingReason::kQosMaxGpusPerUser,
                fmt::format("QOS {} allows {} GPUs per user (MaxGpusPerUser); {} are in use and "
                            "the job needs {}",
                            qos->name, *qos->max_gpus_per_user, user_gpus, gpus)};
  }
  const int account_gpus = At(running.gpus_per_account, std::pair{job.qos, job.request.account});
  if (qos->max_gpus_per_account && account_gpus + gpus > *qos->max_gpus_per_account) {
    return Wait{PendingReason::kQosMaxGpusPerAccount,
                fmt::format("QOS {} allows {} GPUs per account (MaxGpusPerAccount); account {} "
                            "uses {} and the job needs {}",
                            qos->name, *qos->max_gpus_per_account, job.request.account,
                            account_gpus, gpus)};
  }
  return std::nullopt;
}

}  // namespace cohort::plugin
