// SPDX-License-Identifier: Apache-2.0
#pragma once

// Small facts about jobs and nodes that several parts of the engine ask:
// what a job holds, whether a node may take one node of a gang, and the
// words the engine writes into reasons.

#include <chrono>
#include <string>
#include <string_view>
#include <vector>

#include "cohort/alloc/gang_allocator.h"
#include "cohort/alloc/node_pool.h"
#include "cohort/alloc/topology.h"
#include "cohort/config/cluster_config.h"
#include "cohort/engine/job.h"
#include "cohort/text/slurm_time.h"

namespace cohort::engine {

using alloc::NodeId;

[[nodiscard]] inline Millis ToMillis(std::chrono::seconds s) {
  return std::chrono::duration_cast<Millis>(s);
}

[[nodiscard]] inline bool IsActive(const Job& job) {
  return job.state == JobState::kRunning || job.state == JobState::kCompleting;
}

/// Whether `name` is one of `names`.
[[nodiscard]] bool Lists(const std::vector<std::string>& names, std::string_view name);

[[nodiscard]] int GpusHeld(const Job& job);
[[nodiscard]] int CpusHeld(const Job& job);
/// Ranks of the job that exited 0, over every node.
[[nodiscard]] int RanksOk(const Job& job);
/// Every node of the gang confirmed its ranks are gone.
[[nodiscard]] bool AllReleased(const Job& job);
/// The node rank of `node` in the job's gang; -1 when it holds none there.
[[nodiscard]] int NodeRankOf(const Job& job, NodeId node);
/// Whether the job's gang holds any node of `placement`.
[[nodiscard]] bool Touches(const Job& job, const alloc::Placement& placement);

/// The latest a running job ends: its start plus its limit (now for one
/// already stopping or past it; Millis::max() for an unlimited one).
[[nodiscard]] Millis EndBound(const Job& job, Millis now);

/// Whether one node of the gang could fit the node's free resources: an
/// upper bound of what the allocator accepts, to skip hopeless attempts.
[[nodiscard]] bool MayFit(const alloc::GangRequest& gang, const alloc::NodePool& pool, NodeId node);
/// The nodes of the gang's partition (every node without one) that may fit
/// one node of it now.
[[nodiscard]] std::vector<NodeId> NodesThatMayFit(const alloc::GangRequest& gang,
                                                  const alloc::NodePool& pool);

/// Visits the grants a job still holds in the pool (none while suspended).
template <typename Visit>
void ForEachHeldGrant(const Job& job, Visit visit) {
  if (IsSuspended(job)) return;
  for (std::size_t rank = 0; rank < job.run.placement.grants.size(); ++rank) {
    if (job.run.released[rank] == 0) visit(job.run.placement.grants[rank]);
  }
}
[[nodiscard]] std::vector<alloc::NodeGrant> HeldGrants(const Job& job);

/// USR1, or the number of a signal without a name.
[[nodiscard]] std::string SignalName(int signal);
/// A time as users read it in reasons: 2026-12-03T06:18:33, local time.
[[nodiscard]] std::string Hms(Millis t);
/// The placement's nodes as a hostlist.
[[nodiscard]] std::string NodeNames(const topology::Topology& topology,
                                    const alloc::Placement& placement);
/// The nodes as a hostlist.
[[nodiscard]] std::string NodeNames(const topology::Topology& topology,
                                    std::span<const NodeId> nodes);

}  // namespace cohort::engine
