// SPDX-License-Identifier: Apache-2.0
// What users and operators do to jobs: cancel, signal, hold, release,
// requeue, checkpoint-done, start and signal steps. Each checks that the
// caller may.
#include <fmt/format.h>

#include <algorithm>
#include <csignal>

#include "cohort/engine/engine.h"
#include "cohort/text/slurm_time.h"
#include "engine/engine_core.h"
#include "engine/engine_support.h"
#include "engine/steps.h"

namespace cohort {
namespace {

absl::Status CheckOwner(const Job& job, const Caller& caller, std::string_view verb) {
  if (caller.IsOperator() || caller.uid == job.request.uid) return absl::OkStatus();
  return absl::PermissionDeniedError(
      fmt::format("job {} belongs to {}; you can {} only your own jobs (root and Operators= in "
                  "cohort.conf may act on any)",
                  DisplayId(job), job.request.user_name, verb));
}

// Acts on each job a reference names, after the owner check (`verb` names
// the action in its refusal). `act` says whether it acted on the job, or
// gives an error that ends the walk; `none` is the error when it acted on
// none of them.
template <typename Act, typename None>
absl::Status ActOnEach(engine::JobBook& book, JobRef ref, const Caller& caller,
                       std::string_view verb, Act act, None none) {
  const std::vector<JobId> ids = book.Lookup(ref);
  if (ids.empty()) {
    return absl::NotFoundError(fmt::format("job {} not found; see cohort queue", ref.job));
  }
  int acted = 0;
  for (const JobId id : ids) {
    Job& job = book.At(id);
    if (absl::Status s = CheckOwner(job, caller, verb); !s.ok()) return s;
    absl::StatusOr<bool> did = act(job);
    if (!did.ok()) return did.status();
    if (*did) ++acted;
  }
  return acted == 0 ? none(book.At(ids.front())) : absl::OkStatus();
}

// Holding or releasing one pending task of an array (`12_2`) acts on it
// alone, as in Slurm: it is split off the array's record first, keeping the
// record's hold. Nothing happens for a caller who may not act on the array.
void SplitNamedTask(engine::EngineCore& core, JobRef ref, const Caller& caller,
                    std::string_view verb, Millis now, Effects& effects) {
  if (ref.task < 0) return;
  Job* record = core.book.Find(ref.job);
  if (record == nullptr || record->state != JobState::kPending || record->array.job_id != ref.job ||
      record->array.task_id == ref.task ||
      std::find(record->array.pending.begin(), record->array.pending.end(), ref.task) ==
          record->array.pending.end() ||
      !CheckOwner(*record, caller, verb).ok()) {
    return;
  }
  core.life.SplitTask(*record, now, effects, ref.task);
}

// The one job a step is started in or signalled: a job, or one task of an
// array, after the owner check.
absl::StatusOr<Job*> OneJob(engine::JobBook& book, JobRef ref, const Caller& caller,
                            std::string_view verb) {
  const std::vector<JobId> ids = book.Lookup(ref);
  if (ids.empty()) {
    return absl::NotFoundError(fmt::format("job {} not found; see cohort queue", ref.job));
  }
  if (ids.size() > 1) {
    return absl::InvalidArgumentError(
        fmt::format("job {} is an array of {} jobs; name one task, as {}_{}", ref.job, ids.size(),
                    ref.job, book.At(ids.back()).array.task_id));
  }
  Job& job = book.At(ids.front());
  if (absl::Status s = CheckOwner(job, caller, verb); !s.ok()) return s;
  return &job;
}

}  // namespace

absl::StatusOr<int> Engine::StartStep(JobRef ref, const alloc::StepRequest& request,
                                      const Caller& caller, Millis now, Effects& effects,
                                      const std::string& token) {
  absl::StatusOr<Job*> job = OneJob(core_->book, ref, caller, "start steps in");
  if (!job.ok()) return job.status();
  if (!token.empty()) {
    for (const JobStep& step : (*job)->run.steps) {
      if (step.token == token) return step.id;
    }
  }
  // After a controller restart the allocation's nodes report back one by
  // one: a step launched to one not yet back would fail at once.
  for (const alloc::NodeGrant& grant : (*job)->run.placement.grants) {
    if (!core_->nodes.At(grant.node).registered) {
      return absl::ResourceExhaustedError(fmt::format(
          "job {}: node {} has not reported back since the controller restarted; the step "
          "starts once it has",
          DisplayId(**job), core_->topology.NodeName(grant.node)));
    }
  }
  absl::StatusOr<int> started = engine::Steps::Start(**job, request, now, effects);
  if (!started.ok()) return started;
  JobStep& step = (*job)->run.steps.back();
  step.token = token;
  // Each step's own rendezvous port: the job's moved by the step's id, then
  // on to one that no other job or step on its first node has (two jobs'
  // steps sharing a node would otherwise meet on one port).
  const NodeId master =
      (*job)
          ->run.placement.grants[static_cast<std::size_t>(step.placement.nodes.front().node_rank)]
          .node;
  step.master_port = core_->life.FreePort(
      master, engine::StepPortBase((*job)->run.master_port, step.id), **job, &step);
  return started;
}

absl::Status Engine::SignalStep(JobRef ref, int step, int signal, const Caller& caller, Millis now,
                                Effects& effects) {
  absl::StatusOr<Job*> job = OneJob(core_->book, ref, caller, "signal steps of");
  if (!job.ok()) return job.status();
  return engine::Steps::Signal(**job, step, signal, now, effects);
}

absl::Status Engine::EndAllocation(JobRef ref, int exit_code, const Caller& caller, Millis now,
                                   Effects& effects) {
  absl::StatusOr<Job*> found = OneJob(core_->book, ref, caller, "end");
  if (!found.ok()) return found.status();
  Job& job = **found;
  if (job.request.launch != JobLaunch::kAllocation) {
    return absl::FailedPreconditionError(fmt::format(
        "job {} is no allocation of cohort alloc; it ends when what it runs ends, or with "
        "cohort cancel {}",
        DisplayId(job), DisplayId(job)));
  }
  if (job.state != JobState::kRunning) {
    return absl::FailedPreconditionError(
        fmt::format("job {} is {}; only a running allocation ends this way", DisplayId(job),
                    JobStateName(job.state)));
  }
  job.run.exit_code = exit_code;
  if (exit_code != 0) {
    job.reason = fmt::format("its command (cohort alloc) exited with code {}", exit_code);
  }
  core_->life.Apply(job, exit_code == 0 ? JobEvent::kRanksSucceeded : JobEvent::kRankFailed, now,
                    effects);
  return absl::OkStatus();
}

void Engine::StepRankExited(JobId id, int step, NodeId node, int exit_code, int signal, Millis now,
                            Effects& effects) {
  Job* job = core_->book.Find(id);
  if (job == nullptr) return;
  const int node_rank = engine::NodeRankOf(*job, node);
  if (node_rank < 0) return;
  engine::Steps::RankExited(*job, step,
                            {.node_rank = node_rank,
                             .node = core_->topology.NodeName(node),
                             .exit_code = exit_code,
                             .signal = signal},
                            now, effects);
}

void Engine::AddUsage(JobId id, std::optional<int> step, const RankUsage& usage) {
  Job* job = core_->book.Find(id);
  if (job == nullptr) return;
  TaskUsage* into = &job->run.own_usage;
  if (step) {
    const auto it = std::find_if(job->run.steps.begin(), job->run.steps.end(),
                                 [&](const JobStep& s) { return s.id == *step; });
    if (it == job->run.steps.end()) return;
    into = &it->usage;
  }
  AddRankUsage(*into, usage);
}

void Engine::StepLaunchFailed(JobId id, int step, NodeId node, const std::string& reason,
                              Millis now, Effects& effects) {
  Job* job = core_->book.Find(id);
  if (job == nullptr) return;
  const int node_rank = engine::NodeRankOf(*job, node);
  if (node_rank < 0) return;
  engine::Steps::NodeEnded(*job, step, node_rank,
                           {.failed = true, .exit_code = 1, .reason = reason}, now, effects);
}

absl::Status Engine::Cancel(JobId id, int signal, const Caller& caller, Millis now,
                            Effects& effects) {
  engine::EngineCore& core = *core_;
  Job* found = core.book.Find(id);
  if (found == nullptr) {
    return absl::NotFoundError(fmt::format("job {} not found; see cohort queue", id));
  }
  Job& job = *found;
  if (!caller.IsOperator() && caller.uid != job.request.uid) {
    return absl::PermissionDeniedError(fmt::format(
        "job {} belongs to {}; you can cancel only your own jobs (root and Operators= in "
        "cohort.conf may cancel any)",
        id, job.request.user_name));
  }
  if (IsFinished(job.state)) {
    return absl::FailedPreconditionError(
        fmt::format("job {} has already finished ({})", id, JobStateName(job.state)));
  }
  if (signal != 0) {
    if (job.state != JobState::kRunning) {
      return absl::FailedPreconditionError(fmt::format(
          "job {} is {}; only running jobs can be signalled", id, JobStateName(job.state)));
    }
    for (const alloc::NodeGrant& g : job.run.placement.grants) {
      effects.commands.emplace_back(SignalCommand{id, g.node, signal, SignalScope::kRanks});
    }
    // As Slurm's: a job whose ranks were sent SIGSTOP shows STOPPED until
    // a SIGCONT.
    if ((signal == SIGSTOP && !job.run.stopped) || (signal == SIGCONT && job.run.stopped)) {
      job.run.stopped = signal == SIGSTOP;
      engine::Lifecycle::Changed(job, effects);
    }
    return absl::OkStatus();
  }
  const char* reason = caller.IsOperator() && caller.uid != job.request.uid
                           ? "cancelled by an operator"
                           : "cancelled by its owner";
  if (job.state == JobState::kCompleting) {
    // Its ranks are stopping already. An end that would queue it again
    // (scontrol requeue, a preemption, a lost node) becomes its end: it
    // does not run again, as Slurm's scancel of a requeueing job.
    if (FinalState(job.run.cause) == JobState::kPending) {
      job.run.cause = EndCause::kCancelled;
      job.reason = reason;
      engine::Lifecycle::Changed(job, effects);
    }
    return absl::OkStatus();
  }
  job.reason = reason;
  core.life.Apply(job, JobEvent::kCancelled, now, effects);
  if (job.array.job_id == job.id && job.array.task_id < 0) job.array.pending.clear();
  return absl::OkStatus();
}

absl::Status Engine::Cancel(JobRef ref, int signal, const Caller& caller, Millis now,
                            Effects& effects) {
  engine::EngineCore& core = *core_;
  const std::string name =
      ref.task >= 0 ? fmt::format("{}_{}", ref.job, ref.task) : std::to_string(ref.job);
  const std::vector<JobId> ids = core.book.Lookup(ref);
  if (ids.empty())
    return absl::NotFoundError(fmt::format("job {} not found; see cohort queue", name));
  if (ref.task >= 0) {
    Job& job = core.book.At(ids.front());
    if (job.array.task_id == ref.task || job.array.job_id != job.id) {
      return Cancel(job.id, signal, caller, now, effects);
    }
    // A task not yet created: drop it from the array.
    if (absl::Status s = CheckOwner(job, caller, "cancel"); !s.ok()) return s;
    if (signal != 0) {
      return absl::FailedPreconditionError(
          fmt::format("job {} is pending; only running jobs can be signalled", name));
    }
    std::erase(job.array.pending, ref.task);
    if (job.array.pending.empty() && job.array.task_id < 0) {
      job.reason = "every task was cancelled before it started";
      core.life.Apply(job, JobEvent::kCancelled, now, effects);
    }
    engine::Lifecycle::Changed(job, effects);
    return absl::OkStatus();
  }
  absl::Status first = absl::OkStatus();
  int acted = 0;
  for (const JobId id : ids) {
    const Job& job = core.book.At(id);
    if (IsFinished(job.state) || (signal != 0 && job.state != JobState::kRunning)) continue;
    absl::Status s = Cancel(id, signal, caller, now, effects);
    if (s.ok()) {
      ++acted;
    } else if (first.ok()) {
      first = s;
    }
  }
  if (acted > 0 || !first.ok()) return first;
  return ids.size() == 1 ? Cancel(ids.front(), signal, caller, now, effects)
                         : absl::FailedPreconditionError(
                               fmt::format("every task of array {} has already finished", name));
}

absl::Status Engine::Update(JobRef ref, const JobUpdate& update, const Caller& caller, Millis now,
                            Effects& effects) {
  engine::EngineCore& core = *core_;
  std::vector<Job*> changed;
  absl::Status updated = ActOnEach(
      core.book, ref, caller, "update",
      [&](Job& job) -> absl::StatusOr<bool> {
        if (job.state != JobState::kPending) return false;
        JobRequest request = job.request;
        if (update.time_limit) request.time_limit = *update.time_limit;
        if (update.partition) request.partition = *update.partition;
        if (update.nodes) request.nodes = *update.nodes;
        absl::StatusOr<Job> resolved = core.admission.Resolve(std::move(request));
        if (!resolved.ok()) return resolved.status();
        // The limit in force may grow by TimeLimit= or by another
        // partition's default: either way only an operator may, as Slurm.
        const bool raises = job.time_limit != kUnlimited && (resolved->time_limit == kUnlimited ||
                                                             resolved->time_limit > job.time_limit);
        if (raises && !caller.IsOperator()) {
          return absl::PermissionDeniedError(fmt::format(
              "job {}: the update would raise its time limit from {} to {}, which only an "
              "operator may; ask one, or give a TimeLimit= of at most {}",
              DisplayId(job), FormatSlurmTime(job.time_limit),
              resolved->time_limit == kUnlimited ? std::string("UNLIMITED")
                                                 : FormatSlurmTime(resolved->time_limit),
              FormatSlurmTime(job.time_limit)));
        }
        const alloc::PlacementResult probe = core.allocator.Feasible(resolved->gang, core.pool);
        if (probe.outcome == alloc::Outcome::kInfeasible) {
          return absl::FailedPreconditionError(fmt::format(
              "job {} could never run so: {}; give another NumNodes= or Partition=", DisplayId(job),
              probe.reason));
        }
        if (absl::Status s = core.admission.CheckSubmit(*resolved, now); !s.ok()) return s;
        core.book.Reindex(job, [&](Job& j) {
          j.request = std::move(resolved->request);
          j.gang = std::move(resolved->gang);
          j.time_limit = resolved->time_limit;
          j.qos = resolved->qos;
          j.priority_tier = resolved->priority_tier;
        });
        engine::Lifecycle::Changed(job, effects);
        changed.push_back(&job);
        return true;
      },
      [](const Job& first) {
        return absl::FailedPreconditionError(fmt::format(
            "job {} is not pending; only pending jobs can be updated", DisplayId(first)));
      });
  if (!changed.empty()) {
    core.priority.Rank(changed, core.book, now);
    core.triggers.Note(engine::Trigger::kUpdated);
  }
  return updated;
}

absl::Status Engine::Hold(JobRef ref, const Caller& caller, Millis now, Effects& effects) {
  engine::EngineCore& core = *core_;
  SplitNamedTask(core, ref, caller, "hold", now, effects);
  absl::Status held = ActOnEach(
      core.book, ref, caller, "hold",
      [&](Job& job) -> absl::StatusOr<bool> {
        if (job.state != JobState::kPending) return false;
        // An operator's hold outranks its owner's: the owner cannot lift it.
        core.life.Apply(job,
                        caller.IsOperator() && caller.uid != job.request.uid
                            ? JobEvent::kHeldByOperator
                            : JobEvent::kHeldByUser,
                        now, effects);
        ForgetPlan(job);
        engine::Admission::ShowHeld(job, effects);
        return true;
      },
      [](const Job& first) {
        return absl::FailedPreconditionError(
            fmt::format("job {} is not pending; only pending jobs can be held", DisplayId(first)));
      });
  if (held.ok())
    core.triggers.Note(engine::Trigger::kHeld);  // reservations it held are free for others
  return held;
}

absl::Status Engine::Release(JobRef ref, const Caller& caller, Millis now, Effects& effects) {
  engine::EngineCore& core = *core_;
  SplitNamedTask(core, ref, caller, "release", now, effects);
  absl::Status released = ActOnEach(
      core.book, ref, caller, "release",
      [&](Job& job) -> absl::StatusOr<bool> {
        if (!IsHeld(job)) return false;
        if (job.sub == JobSubstate::kHeldAdmin && !caller.IsOperator()) {
          return absl::PermissionDeniedError(fmt::format(
              "job {} was held by an operator; ask an operator to release it", DisplayId(job)));
        }
        core.life.Apply(job, JobEvent::kReleased, now, effects);
        job.wait.eligible_time = now;
        engine::Lifecycle::SetReason(job, PendingReason::kNone, "", effects);
        return true;
      },
      [](const Job& first) {
        return absl::FailedPreconditionError(
            fmt::format("job {} is not held; see cohort queue", DisplayId(first)));
      });
  if (released.ok()) core.triggers.Note(engine::Trigger::kUnheld);
  return released;
}

absl::Status Engine::Requeue(JobRef ref, const Caller& caller, Millis now, Effects& effects) {
  engine::EngineCore& core = *core_;
  return ActOnEach(
      core.book, ref, caller, "requeue",
      [&](Job& job) -> absl::StatusOr<bool> {
        if (job.state != JobState::kRunning) return false;
        job.reason = caller.IsOperator() && caller.uid != job.request.uid
                         ? "requeued by an operator"
                         : "requeued by its owner";
        core.life.Apply(job, JobEvent::kRequeued, now, effects);
        return true;
      },
      [](const Job& first) {
        return absl::FailedPreconditionError(
            fmt::format("job {} is {}; only running jobs can be requeued", DisplayId(first),
                        JobStateName(first.state)));
      });
}

absl::Status Engine::CheckpointDone(JobRef ref, const Caller& caller, Millis now,
                                    Effects& effects) {
  engine::EngineCore& core = *core_;
  return ActOnEach(
      core.book, ref, caller, "stop",
      [&](Job& job) -> absl::StatusOr<bool> {
        if (job.sub != JobSubstate::kPreempting) return false;
        const Millis since =
            job.preemption.records.empty() ? Millis{0} : now - job.preemption.records.back().time;
        core.preemption.StopVictim(
            job, fmt::format("checkpoint done after {:.1f} s", since.count() / 1000.0), now,
            effects);
        return true;
      },
      [](const Job& first) {
        return absl::FailedPreconditionError(fmt::format(
            "job {} is not being preempted; checkpoint-done ends the grace time of a job that is",
            DisplayId(first)));
      });
}

}  // namespace cohort
