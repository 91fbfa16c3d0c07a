// SPDX-License-Identifier: Apache-2.0
#include "cohort/priority.h"

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

}  // namespace cohort::policy
