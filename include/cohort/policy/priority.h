// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <chrono>
#include <cstdint>

#include "cohort/config/cluster_config.h"
#include "cohort/engine/job.h"

/// Multifactor job priority, as Slurm's priority/multifactor: each factor a
/// number in [0, 1], the total the weighted sum.
namespace cohort::policy {

/// What a pending job's priority is computed from.
struct PriorityInputs {
  std::chrono::milliseconds age{0};  ///< time since it became eligible (submit or release)
  int nodes = 1;                     ///< nodes it asks for
  int cluster_nodes = 1;             ///< nodes of the cluster
  double fairshare = 0;              ///< FairShare::Factor, in [0, 1]
  int partition_tier = 1;            ///< its partition's PriorityTier
  int max_partition_tier = 1;        ///< the highest PriorityTier of the cluster
  int qos_priority = 0;              ///< its QOS's Priority
  int max_qos_priority = 0;          ///< the highest QOS Priority of the cluster
};

/// Each factor in [0, 1] and the weighted total.
struct PriorityFactors {
  double age = 0;        ///< min(age ÷ PriorityMaxAge, 1)
  double fairshare = 0;  ///< as given
  double job_size = 0;   ///< nodes ÷ cluster nodes (or 1 − that + 1/cluster with FavorSmall)
  double partition = 0;  ///< tier ÷ highest tier (0 when every tier is 0)
  double qos = 0;        ///< Priority ÷ highest QOS Priority (0 when all are 0)
  /// Σ weight × factor, rounded down: what jobs are ordered by.
  std::int64_t total = 0;
};

[[nodiscard]] PriorityFactors ComputePriority(const config::PriorityWeights& weights,
                                              const PriorityInputs& inputs);

/// The cluster-wide bounds the factors are normalised by.
struct PriorityScale {
  int cluster_nodes = 1;
  int max_partition_tier = 0;
  int max_qos_priority = 0;
};
/// The highest partition tier and QOS priority of `config`, and its nodes.
[[nodiscard]] PriorityScale ScaleOf(const config::ClusterConfig& config, int cluster_nodes);
/// A job's factors at `now` with its owner's fair-share factor `fairshare`
/// (age counts only while it is pending).
[[nodiscard]] PriorityFactors JobPriority(const config::ClusterConfig& config,
                                          const PriorityScale& scale, const Job& job,
                                          double fairshare, std::chrono::milliseconds now);

}  // namespace cohort::policy
