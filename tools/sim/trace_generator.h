// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <chrono>
#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "trace.h"

/// Synthetic traces of a GPU training cluster for cohort-sim.
namespace cohort::sim {

/// The model's knobs. docs/simulator.md describes the model.
struct GeneratorOptions {
  std::uint64_t seed = 1;
  std::chrono::seconds duration{7 * 24 * 3600};  ///< submissions span this long
  int cluster_nodes = 1024;
  int gpus_per_node = 8;
  /// Offered load: GPU-hours submitted over GPU-hours the cluster has in
  /// `duration`. Above 1 the queue grows without bound.
  double load = 0.85;
  /// How the offered GPU-hours divide between the three kinds of job.
  double pretrain_share = 0.55;
  double finetune_share = 0.40;
  double sweep_share = 0.05;
  int users = 24;         ///< spread over the three accounts: 1/6, 1/3, 1/2
  std::string partition;  ///< written into every job; empty: the default
  /// With S > 0: gangs of at least S nodes are rounded up to a multiple of S
  /// (down where that would pass the cluster) and ask for --segment=S, as
  /// jobs on NVLink blocks of S nodes do; smaller ones are left as they are.
  int segment = 0;
};

/// Draws a trace: jobs of three kinds arriving as Poisson processes whose
/// rates give each kind its share of the offered load.
///  - pre-training gangs: 64, 128 or 256 nodes (weights 5:3:2, at most the
///    cluster), every GPU of each node, runtime lognormal with median 18 h
///    (sigma 0.6, 2 h to 6 days), limit the runtime plus 30 % rounded up to
///    a day (at most 7 days); account `foundation`, QOS `high`;
///  - fine-tunes: 4, 8 or 16 nodes (2:2:1), every GPU, median 3 h (sigma 0.8,
///    10 min to 2 days), limit runtime + 50 % rounded up to an hour, except
///    1 in 20 whose limit is 80 % of the runtime (they end TIMEOUT); account
///    `applied`, QOS `normal`;
///  - sweeps: swarms of 20-200 one-GPU, one-node jobs from one user, one
///    every 1-5 s, each median 15 min (sigma 0.7, 1 min to 4 h), limit 4 h;
///    account `research`, QOS `low`.
/// Sorted by submission time. InvalidArgument for a non-positive size, a
/// load outside (0, 10] or shares that do not add up to a positive sum.
/// Deterministic for a seed (with one standard library).
[[nodiscard]] absl::StatusOr<std::vector<TraceJob>> GenerateTrace(const GeneratorOptions& options);

}  // namespace cohort::sim
