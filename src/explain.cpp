// SPDX-License-Identifier: Apache-2.0
// `cohort why`: what keeps a job from starting, and what would start it
// sooner.
#include <algorithm>

#include <fmt/format.h>

#include "cohort/engine.h"
#include "cohort/fmt_absl.h"
#include "engine_core.h"

namespace cohort {
namespace {

using engine::Hms;
using engine::MayFit;
using engine::NodeNames;

// The leaf switches that come closest to holding the gang: fitting nodes per leaf.
std::string ClosestSwitches(engine::EngineCore& core, const Job& job) {
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
  std::vector<std::string> closest;
  for (std::size_t i = 0; i < leaves.size() && i < 3; ++i) {
    const topology::Switch& sw = core.topology.GetSwitch(leaves[i].second);
    closest.push_back(
        fmt::format("{} has {} of {} nodes free enough", sw.name, leaves[i].first, sw.node_count));
  }
  return fmt::format("closest switches for its {} node{}: {}", job.gang.nodes,
                     job.gang.nodes == 1 ? "" : "s", fmt::join(closest, "; "));
}

// What would start the job sooner: fewer nodes, no --switches bound, another
// partition (each tried on the cluster as it is now).
void SuggestSooner(engine::EngineCore& core, const Job& job,
                   const alloc::PlacementResult& now_result, Explanation& e) {
  if (job.gang.nodes > 1 && now_result.outcome != alloc::Outcome::kPlaced) {
    int lo = 0, hi = job.gang.nodes - 1;
    while (lo < hi) {
      const int mid = (lo + hi + 1) / 2;
      alloc::GangRequest smaller = job.gang;
      smaller.nodes = mid;
      smaller.segment.reset();
      if (core.allocator.Place(smaller, core.pool).outcome == alloc::Outcome::kPlaced) {
        lo = mid;
      } else {
        hi = mid - 1;
      }
    }
    if (lo > 0) e.suggestions.push_back(fmt::format("with -N {} it could start now", lo));
  }
  if (job.gang.max_leaves && now_result.outcome != alloc::Outcome::kPlaced) {
    alloc::GangRequest looser = job.gang;
    looser.max_leaves.reset();
    if (core.allocator.Place(looser, core.pool).outcome == alloc::Outcome::kPlaced) {
      e.suggestions.push_back(
          fmt::format("without --switches={} it could start now, spread over more leaf switches",
                      *job.gang.max_leaves));
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
      e.suggestions.push_back(
          fmt::format("partition {} could start it now (-p {})", p.name, p.name));
    }
  }
}

// A job that waits for resources or priority: who is ahead, what the nearest
// domains lack, and what would start it sooner.
Explanation ExplainWait(engine::EngineCore& core, const Job& job, Millis now, Explanation e) {
  const std::string id = DisplayId(job);
  const PendingReason reason = job.pending_reason;
  const alloc::PartitionId partition = job.gang.partition.value_or(-1);
  std::vector<std::string> ahead;
  int ahead_count = 0;
  for (const JobId other_id : core.planner.PendingOrder()) {
    if (other_id == job.id) break;
    const Job& other = core.book.At(other_id);
    if (other.gang.partition.value_or(-1) != partition || IsHeld(other) ||
        other.pending_reason == PendingReason::kDependency ||
        other.pending_reason == PendingReason::kDependencyNeverSatisfied) {
      continue;
    }
    if (++ahead_count <= 3) {
      ahead.push_back(fmt::format("{} (priority {}, {} node{})", DisplayId(other), other.priority,
                                  other.gang.nodes, other.gang.nodes == 1 ? "" : "s"));
    }
  }
  const alloc::PlacementResult now_result = core.allocator.Place(job.gang, core.pool);
  if (ahead_count > 0) {
    e.blockers.push_back(
        fmt::format("{} job{} of higher priority wait{} ahead of it in partition "
                    "{}: {}{}",
                    ahead_count, ahead_count == 1 ? "" : "s", ahead_count == 1 ? "s" : "",
                    job.request.partition, fmt::join(ahead, ", "), ahead_count > 3 ? ", …" : ""));
  }
  if (now_result.outcome != alloc::Outcome::kPlaced) {
    e.blockers.push_back(fmt::format("resources: {}", now_result.reason));
    if (core.topology.HasSwitchTree()) e.blockers.push_back(ClosestSwitches(core, job));
  }
  if (job.reason_detail.starts_with("preempting")) e.blockers.push_back(job.reason_detail);
  SuggestSooner(core, job, now_result, e);
  if (job.expected_start.count() != 0) {
    const auto minutes =
        std::chrono::duration_cast<std::chrono::minutes>(job.expected_start - now).count();
    e.summary = fmt::format(
        "Job {} waits for {}; the backfill plan starts it by {} (in about {} "
        "minute{}).",
        id, reason == PendingReason::kPriority ? "higher-priority jobs" : "resources",
        Hms(job.expected_start), std::max<long>(minutes, 0), minutes == 1 ? "" : "s");
  } else {
    e.summary =
        fmt::format("Job {} waits for {}; no start time is known yet ({}).", id,
                    reason == PendingReason::kPriority ? "higher-priority jobs" : "resources",
                    job.time_limit == kUnlimited || ahead_count >= core.config.backfill_depth
                        ? "it is beyond the backfill depth or the jobs in its way have "
                          "no time limit"
                        : "the jobs in its way have no time limit");
  }
  if (e.suggestions.empty() && job.time_limit != kUnlimited) {
    e.suggestions.push_back("a shorter --time lets it backfill into gaps before reservations");
  }
  return e;
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
  const std::string id = DisplayId(job);
  Explanation e;
  e.expected_start = job.expected_start;
  if (job.state != JobState::kPending) {
    e.summary =
        job.state == JobState::kRunning
            ? fmt::format("Job {} is running on {}.", id, NodeNames(core.topology, job.placement))
            : fmt::format("Job {} is {}: {}.", id, JobStateName(job.state), job.reason);
    if (job.sub == JobSubstate::kPreempting) {
      e.blockers.push_back(job.reason_detail);
      e.suggestions.push_back(
          fmt::format("save a checkpoint and run cohort checkpoint-done {} to stop at once", id));
    }
    return e;
  }
  const PendingReason reason = job.pending_reason;
  if (reason == PendingReason::kJobHeldUser || reason == PendingReason::kJobHeldAdmin) {
    e.summary = fmt::format("Job {} is held and will not start until it is released.", id);
    e.blockers.push_back(job.reason_detail);
    if (reason == PendingReason::kJobHeldUser)
      e.suggestions.push_back(fmt::format("cohort release {}", id));
    return e;
  }
  if (reason == PendingReason::kDependency || reason == PendingReason::kDependencyNeverSatisfied) {
    e.summary =
        reason == PendingReason::kDependency
            ? fmt::format("Job {} waits for its dependency.", id)
            : fmt::format("Job {}'s dependency can never be satisfied; it will not start.", id);
    e.blockers.push_back(job.reason_detail);
    if (reason == PendingReason::kDependencyNeverSatisfied) {
      e.suggestions.push_back(fmt::format(
          "cancel it (cohort cancel {}) and submit again with a dependency that can hold", id));
    }
    return e;
  }
  if (reason == PendingReason::kQosMaxJobsPerUser || reason == PendingReason::kQosMaxGpusPerUser ||
      reason == PendingReason::kQosMaxGpusPerAccount ||
      reason == PendingReason::kJobArrayTaskLimit) {
    e.summary = fmt::format("Job {} waits for a limit ({}).", id, PendingReasonName(reason));
    e.blockers.push_back(job.reason_detail);
    e.suggestions.push_back(reason == PendingReason::kJobArrayTaskLimit
                                ? "the next task starts when a running one ends"
                                : "it starts when your running jobs under this limit end, or "
                                  "with another --qos");
    return e;
  }
  return ExplainWait(core, job, now, std::move(e));
}

}  // namespace cohort
