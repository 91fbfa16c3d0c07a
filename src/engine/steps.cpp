// SPDX-License-Identifier: Apache-2.0
#include "engine/steps.h"

#include <fmt/format.h>

#include <algorithm>

#include "cohort/engine/engine_types.h"

namespace cohort::engine {
namespace {

JobStep* FindStep(Job& job, int step) {
  for (JobStep& s : job.run.steps) {
    if (s.id == step) return &s;
  }
  return nullptr;
}

// One command per node of the step.
template <typename Make>
void ToEachNode(const Job& job, const JobStep& step, Effects& effects, Make make) {
  for (const alloc::StepNode& node : step.placement.nodes) {
    const alloc::NodeGrant& grant =
        job.run.placement.grants[static_cast<std::size_t>(node.node_rank)];
    effects.commands.emplace_back(make(grant.node, node));
  }
}

void StopRanks(const Job& job, JobStep& step, Effects& effects) {
  if (step.stopping) return;
  step.stopping = true;
  ToEachNode(job, step, effects, [&](NodeId node, const alloc::StepNode&) {
    return TerminateCommand{
        .job = job.id, .node = node, .step = step.id, .attempt = job.run.attempt};
  });
}

// The index in the step's placement of the allocation's node rank; -1 when
// the step has no ranks there.
int IndexOf(const JobStep& step, int node_rank) {
  for (std::size_t i = 0; i < step.placement.nodes.size(); ++i) {
    if (step.placement.nodes[i].node_rank == node_rank) return static_cast<int>(i);
  }
  return -1;
}

bool Failed(const JobStep& step) { return step.exit_code != 0 || step.exit_signal != 0; }

// The first failure names the step's exit and stops its other ranks (a step
// is a gang: they cannot go on without it); later ones change nothing.
void Fail(const Job& job, JobStep& step, int exit_code, int signal, std::string reason,
          Effects& effects) {
  if (Failed(step)) return;
  step.exit_code = exit_code;
  step.exit_signal = signal;
  // A failure with neither a code nor a signal (a launch that failed) is
  // still one.
  if (exit_code == 0 && signal == 0) step.exit_code = 1;
  step.reason = std::move(reason);
  StopRanks(job, step, effects);
}

void EndIfDone(const Job& job, JobStep& step, Millis now, Effects& effects) {
  if (step.ranks_exited < step.placement.tasks) return;
  step.state = step.cancelled ? StepState::kCancelled
               : Failed(step) ? StepState::kFailed
                              : StepState::kCompleted;
  step.end_time = now;
  effects.changed_jobs.push_back(job.id);
}

// Sets node `index`'s count of exited ranks (never lowers it).
void CountExits(JobStep& step, std::size_t index, int exited) {
  int& count = step.node_exits[index];
  const int most = step.placement.nodes[index].tasks;
  const int now_exited = std::min(std::max(count, exited), most);
  step.ranks_exited += now_exited - count;
  count = now_exited;
}

}  // namespace

alloc::StepLedger Steps::LedgerOf(const Job& job) {
  alloc::StepLedger ledger(job.run.placement.grants, job.gang.tasks_per_node,
                           job.gang.cpus_per_task, job.gang.overcommit);
  for (const JobStep& step : job.run.steps) {
    if (step.state == StepState::kRunning) ledger.Take(step.placement);
  }
  for (std::size_t rank = 0; rank < job.run.released.size(); ++rank) {
    if (Dropped(job, rank)) ledger.Drop(static_cast<int>(rank));
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
  if (!job.run.lost_ranks.empty()) {
    // Waits, as for a busy allocation: in a moment the gang is whole again.
    return absl::ResourceExhaustedError(fmt::format(
        "job {} lost a node and is being repaired from its spares; ask again", DisplayId(job)));
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
  JobStep& step = job.run.steps.emplace_back();
  step.id = job.run.next_step++;
  step.placement = placed.placement;
  step.node_exits.assign(step.placement.nodes.size(), 0);
  step.start_time = now;
  ToEachNode(job, step, effects, [&](NodeId node, const alloc::StepNode& on) {
    const alloc::NodeGrant held{
        .node = node,
        .cpus = on.cpus,
        .memory_mb = job.run.placement.grants[static_cast<std::size_t>(on.node_rank)].memory_mb,
        .gpus = on.gpus};
    return LaunchCommand{
        .job = job.id, .node = node, .node_rank = on.node_rank, .grant = held, .step = step.id};
  });
  effects.changed_jobs.push_back(job.id);
  return step.id;
}

void Steps::RankExited(Job& job, int step_id, const RankExit& exit, Millis now, Effects& effects) {
  JobStep* step = FindStep(job, step_id);
  if (step == nullptr || step->state != StepState::kRunning) return;
  const int index = IndexOf(*step, exit.node_rank);
  if (index < 0) return;
  const auto i = static_cast<std::size_t>(index);
  if (step->node_exits[i] >= step->placement.nodes[i].tasks) return;
  if (exit.exit_code != 0 || exit.signal != 0) {
    Fail(job, *step, exit.exit_code, exit.signal,
         exit.signal != 0
             ? fmt::format("a rank on {} was killed by signal {}", exit.node, exit.signal)
             : fmt::format("a rank on {} exited with code {}", exit.node, exit.exit_code),
         effects);
  }
  CountExits(*step, i, step->node_exits[i] + 1);
  EndIfDone(job, *step, now, effects);
}

void Steps::NodeEnded(Job& job, int step_id, int node_rank, const NodeEnd& end, Millis now,
                      Effects& effects) {
  JobStep* step = FindStep(job, step_id);
  if (step == nullptr || step->state != StepState::kRunning) return;
  const int index = IndexOf(*step, node_rank);
  if (index < 0) return;
  const auto i = static_cast<std::size_t>(index);
  if (end.failed || !end.reason.empty()) {
    Fail(job, *step, end.exit_code, end.signal,
         !end.reason.empty() ? end.reason : std::string("a rank failed"), effects);
  }
  CountExits(*step, i, step->placement.nodes[i].tasks);
  EndIfDone(job, *step, now, effects);
}

std::vector<int> Steps::RunningOn(const Job& job, int node_rank) {
  std::vector<int> ids;
  for (const JobStep& step : job.run.steps) {
    if (step.state == StepState::kRunning && IndexOf(step, node_rank) >= 0) ids.push_back(step.id);
  }
  return ids;
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
      return SignalCommand{.job = job.id,
                           .node = node,
                           .signal = signal,
                           .scope = SignalScope::kRanks,
                           .step = step->id};
    });
  }
  effects.changed_jobs.push_back(job.id);
  return absl::OkStatus();
}

void Steps::EndWithJob(Job& job, Millis now) {
  for (JobStep& step : job.run.steps) {
    if (step.state != StepState::kRunning) continue;
    step.state = StepState::kCancelled;
    step.end_time = now;
  }
}

int StepPortBase(int job_port, int step) { return 20000 + (job_port - 20000 + step) % 20000; }

}  // namespace cohort::engine
