// SPDX-License-Identifier: Apache-2.0
#include "steps.h"

#include <fmt/format.h>

#include "cohort/engine.h"

namespace cohort::engine {
namespace {

JobStep* FindStep(Job& job, int step) {
  for (JobStep& s : job.steps) {
    if (s.id == step) return &s;
  }
  return nullptr;
}

// One command per node of the step.
template <typename Make>
void ToEachNode(const Job& job, const JobStep& step, Effects& effects, Make make) {
  for (const alloc::StepNode& node : step.placement.nodes) {
    const alloc::NodeGrant& grant = job.placement.grants[static_cast<std::size_t>(node.node_rank)];
    effects.commands.emplace_back(make(grant.node, node));
  }
}

void StopRanks(const Job& job, JobStep& step, Effects& effects) {
  if (step.stopping) return;
  step.stopping = true;
  ToEachNode(job, step, effects, [&](NodeId node, const alloc::StepNode&) {
    return TerminateCommand{.job = job.id, .node = node, .step = step.id};
  });
}

}  // namespace

alloc::StepLedger Steps::LedgerOf(const Job& job) {
  alloc::StepLedger ledger(job.placement.grants, job.gang.tasks_per_node, job.gang.cpus_per_task);
  for (const JobStep& step : job.steps) {
    if (step.state == StepState::kRunning) ledger.Take(step.placement);
  }
  return ledger;
}

absl::StatusOr<int> Steps::Start(Job& job, const alloc::StepRequest& request, Millis now,
                                 Effects& effects) {
  if (job.state != JobState::kRunning) {
    return absl::FailedPreconditionError(
        fmt::format("job {} is {}; steps run inside a running job's allocation", DisplayId(job),
                    JobStateName(job.state)));
  }
  if (IsSuspended(job)) {
    return absl::FailedPreconditionError(fmt::format(
        "job {} is suspended by a preemption; its steps start once it resumes", DisplayId(job)));
  }
  const alloc::StepPlacementResult placed = LedgerOf(job).Place(request);
  switch (placed.outcome) {
    case alloc::Outcome::kPlaced:
      break;
    case alloc::Outcome::kBusy:
      return absl::ResourceExhaustedError(fmt::format("job {}: {}", DisplayId(job), placed.reason));
    case alloc::Outcome::kInfeasible:
      return absl::FailedPreconditionError(
          fmt::format("job {}: {}", DisplayId(job), placed.reason));
  }
  JobStep& step = job.steps.emplace_back();
  step.id = job.next_step++;
  step.placement = placed.placement;
  step.start_time = now;
  ToEachNode(job, step, effects, [&](NodeId node, const alloc::StepNode& on) {
    const alloc::NodeGrant held{
        .node = node,
        .cpus = on.cpus,
        .memory_mb = job.placement.grants[static_cast<std::size_t>(on.node_rank)].memory_mb,
        .gpus = on.gpus};
    return LaunchCommand{
        .job = job.id, .node = node, .node_rank = on.node_rank, .grant = held, .step = step.id};
  });
  effects.changed_jobs.push_back(job.id);
  return step.id;
}

void Steps::RankExited(Job& job, int step_id, int exit_code, int signal, Millis now,
                       Effects& effects) {
  JobStep* step = FindStep(job, step_id);
  if (step == nullptr || step->state != StepState::kRunning) return;
  const bool failed_before = step->exit_code != 0 || step->exit_signal != 0;
  if (!failed_before && (exit_code != 0 || signal != 0)) {
    step->exit_code = exit_code;
    step->exit_signal = signal;
    // A step is a gang: the others cannot go on without it.
    StopRanks(job, *step, effects);
  }
  if (++step->ranks_exited < step->placement.tasks) return;
  const bool failed = step->exit_code != 0 || step->exit_signal != 0;
  step->state = step->cancelled ? StepState::kCancelled
                : failed        ? StepState::kFailed
                                : StepState::kCompleted;
  step->end_time = now;
  effects.changed_jobs.push_back(job.id);
}

absl::Status Steps::Signal(Job& job, int step_id, int signal, Millis /*now*/, Effects& effects) {
  JobStep* step = FindStep(job, step_id);
  if (step == nullptr) {
    return absl::NotFoundError(
        fmt::format("job {} has no step {}; see cohort queue --steps", DisplayId(job), step_id));
  }
  if (step->state != StepState::kRunning) {
    return absl::FailedPreconditionError(fmt::format(
        "step {}.{} has already ended ({})", DisplayId(job), step_id, StepStateName(step->state)));
  }
  if (signal == 0) {
    step->cancelled = true;
    StopRanks(job, *step, effects);
  } else {
    ToEachNode(job, *step, effects, [&](NodeId node, const alloc::StepNode&) {
      return SignalCommand{
          .job = job.id, .node = node, .signal = signal, .batch_only = false, .step = step->id};
    });
  }
  effects.changed_jobs.push_back(job.id);
  return absl::OkStatus();
}

void Steps::EndWithJob(Job& job, Millis now) {
  for (JobStep& step : job.steps) {
    if (step.state != StepState::kRunning) continue;
    step.state = StepState::kCancelled;
    step.end_time = now;
  }
}

}  // namespace cohort::engine
