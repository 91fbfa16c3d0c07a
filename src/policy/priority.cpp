// SPDX-License-Identifier: Apache-2.0
#include "cohort/policy/priority.h"

#include <algorithm>
#include <cmath>

namespace cohort::policy {
namespace {

// Clamps to [0, 1]; NaN becomes 0 so that a bad input cannot lift a job.
double Unit(double x) {
  if (!(x > 0)) return 0;
  return std::min(x, 1.0);
}

// value ÷ max in [0, 1]; 0 when the maximum is 0 or less (the factor says
// nothing when every job has the same 0).
double Ratio(int value, int max) {
  if (max <= 0) return 0;
  return Unit(static_cast<double>(value) / static_cast<double>(max));
}

}  // namespace

PriorityFactors ComputePriority(const config::PriorityWeights& weights,
                                const PriorityInputs& inputs) {
  PriorityFactors f;
  // In seconds, as doubles: a max_age of kUnlimited would overflow as
  // milliseconds (and gives an age factor of 0, as the ratio says).
  const double max_age_s = static_cast<double>(weights.max_age.count());
  const double age_s = static_cast<double>(inputs.age.count()) / 1000.0;
  if (max_age_s <= 0) {
    f.age = age_s > 0 ? 1 : 0;
  } else {
    f.age = Unit(age_s / max_age_s);
  }
  f.fairshare = Unit(inputs.fairshare);
  const double cluster = std::max(inputs.cluster_nodes, 1);
  const double nodes = std::max(inputs.nodes, 1);
  f.job_size = weights.favor_small ? Unit(1.0 - (nodes - 1.0) / cluster) : Unit(nodes / cluster);
  f.partition = Ratio(inputs.partition_tier, inputs.max_partition_tier);
  f.qos = Ratio(inputs.qos_priority, inputs.max_qos_priority);
  const double sum = weights.age * f.age + weights.fairshare * f.fairshare +
                     weights.job_size * f.job_size + weights.partition * f.partition +
                     weights.qos * f.qos;
  // Factors are ratios: 3 × (1000 × 0.1) can land a hair under 300. Such
  // rounding noise must not cost a job a whole point, so it is absorbed
  // before rounding down.
  constexpr double kRoundingSlack = 1e-6;
  f.total = static_cast<std::int64_t>(std::floor(sum + kRoundingSlack));
  return f;
}

PriorityScale ScaleOf(const config::ClusterConfig& config, int cluster_nodes) {
  PriorityScale scale;
  scale.cluster_nodes = std::max(1, cluster_nodes);
  for (const config::PartitionSpec& p : config.partitions) {
    scale.max_partition_tier = std::max(scale.max_partition_tier, p.priority_tier);
  }
  for (const config::QosSpec& q : config.qos) {
    scale.max_qos_priority = std::max(scale.max_qos_priority, q.priority);
  }
  return scale;
}

PriorityFactors JobPriority(const config::ClusterConfig& config, const PriorityScale& scale,
                            const Job& job, double fairshare, std::chrono::milliseconds now) {
  PriorityInputs in;
  in.age = job.state == JobState::kPending
               ? std::max(std::chrono::milliseconds{0}, now - job.wait.eligible_time)
               : std::chrono::milliseconds{0};
  in.nodes = job.gang.nodes;
  in.cluster_nodes = scale.cluster_nodes;
  in.fairshare = fairshare;
  in.partition_tier = job.priority_tier;
  in.max_partition_tier = scale.max_partition_tier;
  const config::QosSpec* qos = config.FindQos(job.qos);
  in.qos_priority = qos == nullptr ? 0 : qos->priority;
  in.max_qos_priority = scale.max_qos_priority;
  return ComputePriority(config.priority, in);
}

}  // namespace cohort::policy
