// SPDX-License-Identifier: Apache-2.0
// `cohort why`: the facts of what keeps a job from starting, and what would
// start it sooner (cli/format/why_view.cpp puts them in words).
#include <algorithm>

#include <fmt/format.h>

#include "cohort/engine/engine.h"
#include "cohort/fmt_absl.h"
#include "engine/engine_core.h"

namespace cohort {
namespace {

using engine::MayFit;

// The leaf switches that come closest to holding the gang: fitting nodes per
// leaf, the three with most first.
std::vector<LeafFit> ClosestLeaves(engine::EngineCore& core, const Job& job) {
  std::vector<std::pair<int, topology::SwitchId>> leaves;
  for (const topology::SwitchId s : core.topology.SwitchesByLevel()) {
    const topology::Switch& sw = core.topology.GetSwitch(s);
    if (sw.level != 0) continue;
    int fit = 0;
    for (const NodeId n : sw.nodes) {
      if ((!job.gang.partition || core.pool.GetPartition(*job.gang.partition).contains[n] != 0) &&
          MayFit(job.gang, core.pool, n)) {
        ++fit;
      }
    }
    leaves.emplace_back(fit, s);
  }
  std::sort(leaves.begin(), leaves.end(), [](const auto& a, const auto& b) {
    return a.first != b.first ? a.first > b.first : a.second < b.second;
  });
  std::vector<LeafFit> closest;
  for (std::size_t i = 0; i < leaves.size() && i < 3; ++i) {
    const topology::Switch& sw = core.topology.GetSwitch(leaves[i].second);
    closest.push_back({.name = sw.name, .fitting = leaves[i].first, .nodes = sw.node_count});
  }
  return closest;
}

// What would start the job sooner: fewer nodes, no --switches bound, another
// partition (each tried on the cluster as it is now).
Counterfactuals TrySooner(engine::EngineCore& core, const Job& job, bool placed_now) {
  Counterfactuals sooner;
  if (placed_now) return sooner;
  // With --segment, fewer whole segments.
  const int unit = job.gang.segment.value_or(1);
  if (job.gang.nodes > unit) {
    int lo = 0, hi = job.gang.nodes / unit - 1;
    while (lo < hi) {
      const int mid = (lo + hi + 1) / 2;
      alloc::GangRequest smaller = job.gang;
      smaller.nodes = mid * unit;
      if (core.allocator.Place(smaller, core.pool).outcome == alloc::Outcome::kPlaced) {
        lo = mid;
      } else {
        hi = mid - 1;
      }
    }
    sooner.fewer_nodes = lo * unit;
  }
  if (job.gang.max_leaves) {
    alloc::GangRequest looser = job.gang;
    looser.max_leaves.reset();
    if (core.allocator.Place(looser, core.pool).outcome == alloc::Outcome::kPlaced) {
      sooner.without_switches = *job.gang.max_leaves;
    }
  }
  for (const config::PartitionSpec& p : core.config.partitions) {
    if (p.name == job.request.partition) continue;
    JobRequest other = job.request;
    other.partition = p.name;
    other.array = {};
    absl::StatusOr<Job> resolved = core.admission.Resolve(other);
    if (!resolved.ok()) continue;
    if (core.allocator.Place(resolved->gang, core.pool).outcome == alloc::Outcome::kPlaced) {
      sooner.partitions.push_back(p.name);
    }
  }
  return sooner;
}

// A job that waits for resources or priority: who is ahead, what the nearest
// domains lack, and what would start it sooner.
void ExplainWait(engine::EngineCore& core, const Job& job, Explanation& e) {
  const alloc::PartitionId partition = job.gang.partition.value_or(-1);
  WaitFacts& wait = e.wait;
  wait.partition = job.request.partition;
  wait.nodes = job.gang.nodes;
  for (const JobId other_id : core.planner.PendingOrder()) {
    if (other_id == job.id) break;
    const Job& other = core.book.At(other_id);
    if (other.gang.partition.value_or(-1) != partition || IsHeld(other) ||
        other.wait.reason == PendingReason::kDependency ||
        other.wait.reason == PendingReason::kDependencyNeverSatisfied) {
      continue;
    }
    if (++wait.ahead_count <= 3) {
      wait.ahead.push_back({.display_id = DisplayId(other),
                            .priority = other.cache.priority,
                            .nodes = other.gang.nodes});
    }
  }
  const alloc::PlacementResult now_result = core.allocator.Place(job.gang, core.pool);
  const bool placed_now = now_result.outcome == alloc::Outcome::kPlaced;
  if (!placed_now) {
    wait.shortfall = now_result.reason;
    if (core.topology.HasSwitchTree()) wait.closest_leaves = ClosestLeaves(core, job);
  }
  if (core.preemption.PlanOf(job.id) != nullptr) wait.preempting = job.reason_detail;
  wait.has_time_limit = job.time_limit != kUnlimited;
  wait.beyond_backfill_depth =
      job.time_limit == kUnlimited || wait.ahead_count >= core.config.backfill_depth;
  e.sooner = TrySooner(core, job, placed_now);
}

}  // namespace

absl::StatusOr<Explanation> Engine::Explain(JobRef ref, Millis now) {
  engine::EngineCore& core = *core_;
  const std::vector<JobId> ids = core.book.Lookup(ref);
  if (ids.empty())
    return absl::NotFoundError(fmt::format("job {} not found; see cohort queue", ref.job));
  const Job* found = nullptr;
  for (const JobId id : ids) {
    const Job& j = core.book.At(id);
    if (j.state == JobState::kPending && (found == nullptr || found->state != JobState::kPending)) {
      found = &j;
    }
  }
  const Job& job = found != nullptr ? *found : core.book.At(ids.front());
  Explanation e;
  e.job = job.id;
  e.status = StatusOf(job);
  e.expected_start = job.cache.expected_start;
  e.explained_at = now;
  if (job.state != JobState::kPending) return e;
  e.reason = job.wait.reason;
  switch (e.reason) {
    case PendingReason::kNone:
    case PendingReason::kResources:
    case PendingReason::kPriority:
    case PendingReason::kReqNodeNotAvail:
    case PendingReason::kRequeued:
      ExplainWait(core, job, e);
      break;
    case PendingReason::kDependency:
    case PendingReason::kDependencyNeverSatisfied:
    case PendingReason::kJobHeldUser:
    case PendingReason::kJobHeldAdmin:
    case PendingReason::kQosMaxJobsPerUser:
    case PendingReason::kQosMaxGpusPerUser:
    case PendingReason::kQosMaxGpusPerAccount:
    case PendingReason::kJobArrayTaskLimit:
    case PendingReason::kBeginTime:
    case PendingReason::kPartitionDown:
    case PendingReason::kPartitionInactive:
    case PendingReason::kAssocGrpGres:
    case PendingReason::kAssocGrpCpu:
    case PendingReason::kAssocGrpNode:
    case PendingReason::kAssocGrpJobs:
    case PendingReason::kAssocMaxJobs:
    case PendingReason::kAssocGrpGresMinutes:
    case PendingReason::kAssocGrpCpuMinutes:
    case PendingReason::kReservation:
    case PendingReason::kReservedForMaintenance:
    case PendingReason::kQosGrpGres:
    case PendingReason::kQosGrpCpu:
    case PendingReason::kQosGrpNode:
    case PendingReason::kQosGrpJobs:
    case PendingReason::kQosGrpGresMinutes:
    case PendingReason::kQosGrpCpuMinutes:
      break;  // the reason and its detail say it all
  }
  return e;
}

}  // namespace cohort
