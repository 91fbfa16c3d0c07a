// SPDX-License-Identifier: Apache-2.0
#include "engine/node_book.h"

#include <fmt/format.h>

#include <algorithm>
#include <utility>

#include "cohort/alloc/placement_check.h"
#include "cohort/engine/engine_types.h"
#include "engine/engine_support.h"
#include "engine/job_book.h"
#include "engine/lifecycle.h"
#include "engine/pass_triggers.h"
#include "engine/steps.h"

namespace cohort::engine {

NodeBook::NodeBook(const Parts& parts)
    : config_(parts.config),
      topology_(parts.topology),
      pool_(parts.pool),
      book_(parts.book),
      triggers_(parts.triggers),
      life_(parts.life),
      nodes_(static_cast<std::size_t>(parts.topology.NodeCount())) {}

absl::Status NodeBook::Registered(NodeId node, const NodeReport& report, Millis now,
                                  Effects& effects) {
  NodeRuntime& runtime = At(node);
  const alloc::NodeCapacity& want = pool_.Capacity(node);
  runtime.registered = true;
  runtime.awaited = false;
  runtime.last_heartbeat = now;
  runtime.down = false;
  runtime.down_reason.clear();
  runtime.down_time = Millis{0};
  if (report.cpus < want.cpus || report.memory_mb < want.memory_mb || report.gpus < want.gpus) {
    DrainForController(
        runtime,
        fmt::format(
            "agent reports {} CPUs, {} MB, {} GPUs; its NodeName line says {} CPUs, {} MB, {} GPUs",
            report.cpus, report.memory_mb, report.gpus, want.cpus, want.memory_mb, want.gpus),
        now);
  }
  if (!report.gpu_groups.empty() && report.gpus == want.gpus) {
    // Locality from discovery; a report that does not cover the node's GPUs
    // leaves the single default group.
    (void)pool_.SetGpuGroups(node, report.gpu_groups);
  }
  // Reconcile: ranks the engine does not expect there are stopped; exits the
  // engine may have missed (it was restored from an older state, or the
  // stream dropped) are applied; jobs placed there whose ranks are neither
  // running nor reported have lost this node.
  std::set<JobId> accounted;              // the job's own launch was reported
  std::set<std::pair<JobId, int>> steps;  // a step's launch was reported
  const std::string& name = topology_.NodeName(node);
  for (const RunningReport& running : report.running) {
    Job* it = book_.Find(running.job);
    const int rank = it == nullptr ? -1 : NodeRankOf(*it, node);
    const bool current = rank >= 0 &&
                         (running.attempt == 0 || running.attempt == it->run.attempt) &&
                         IsActive(*it) && it->run.released[static_cast<std::size_t>(rank)] == 0;
    if (running.step) {
      const std::vector<int> live = current && it->state == JobState::kRunning
                                        ? Steps::RunningOn(*it, rank)
                                        : std::vector<int>{};
      if (std::find(live.begin(), live.end(), *running.step) == live.end()) {
        effects.commands.emplace_back(TerminateCommand{
            .job = running.job, .node = node, .step = running.step, .attempt = running.attempt});
      } else {
        steps.emplace(running.job, *running.step);
      }
      continue;
    }
    // Unknown, finished, elsewhere, an older attempt, or stopping (the
    // terminate may have been lost with the old stream): stop it (again).
    if (!current || it->state == JobState::kCompleting) {
      effects.commands.emplace_back(
          TerminateCommand{.job = running.job, .node = node, .attempt = running.attempt});
    }
    if (!current) continue;
    accounted.insert(running.job);
    life_.CountOk(*it, rank, running.ranks_ok, now, effects);
  }
  for (const FinishedReport& finished : report.finished) {
    Job* found = book_.Find(finished.job);
    if (found == nullptr || (!finished.step && accounted.contains(finished.job))) continue;
    Job& job = *found;
    const int rank = NodeRankOf(job, node);
    if (rank < 0 || (finished.attempt != 0 && finished.attempt != job.run.attempt) ||
        !IsActive(job) || job.run.released[static_cast<std::size_t>(rank)] != 0) {
      continue;
    }
    if (finished.step) {
      steps.emplace(finished.job, *finished.step);
      Steps::NodeEnd end{.ranks_ok = finished.ranks_ok,
                         .failed = finished.failed || !finished.launch_error.empty(),
                         .exit_code = finished.exit_code,
                         .signal = finished.signal,
                         .reason = finished.launch_error};
      if (end.failed && end.reason.empty()) {
        end.reason =
            finished.signal != 0
                ? fmt::format("a rank on {} was killed by signal {}", name, finished.signal)
                : fmt::format("a rank on {} exited with code {}", name, finished.exit_code);
      }
      Steps::NodeEnded(job, *finished.step, rank, end, now, effects);
      continue;
    }
    accounted.insert(finished.job);
    life_.ApplyFinished(job, node, rank, finished, now, effects);
  }
  const std::set<JobId> expected = book_.JobsOn(node);
  for (const JobId id : expected) {
    Job& job = book_.At(id);
    const int rank = NodeRankOf(job, node);
    if (rank < 0) continue;  // the job's spare: nothing of it runs there
    for (const int step : Steps::RunningOn(job, rank)) {
      if (steps.contains({id, step})) continue;
      Steps::NodeEnded(
          job, step, rank,
          {.failed = true,
           .exit_code = 1,
           .reason = fmt::format("its ranks on {} vanished when the agent restarted", name)},
          now, effects);
    }
    if (accounted.contains(id)) continue;
    // A batch job runs nothing of its own beyond its first node, an
    // allocation nowhere: the node stays the job's until the job ends.
    if (OwnRanksOn(job, rank) == 0 && job.state == JobState::kRunning) continue;
    if (job.state == JobState::kRunning && rank >= 0 &&
        now - job.run.start_time < kAgentKeepsFinishedLaunches) {
      // The agent would list a launch it got since then, running or
      // finished: this one never reached it (the stream, or the controller
      // that sent it, went down in between). Send it again.
      effects.commands.emplace_back(
          LaunchCommand{id, node, rank, job.run.placement.grants[static_cast<std::size_t>(rank)]});
      continue;
    }
    if (job.state == JobState::kRunning) {
      job.run.exit_code = 1;
      job.reason = fmt::format("{} on {} vanished when the agent restarted",
                               IsBatch(job) ? "its batch script" : "its ranks", name);
      life_.Apply(job, JobEvent::kNodeLost, now, effects);
    }
    if (rank >= 0) life_.JobReleased(id, node, now, effects);
  }
  UpdateCondition(node);
  effects.changed_nodes.push_back(node);
  triggers_.Note(Trigger::kNodeUp);
  return absl::OkStatus();
}

void NodeBook::Lost(NodeId node, const std::string& reason, Millis now, Effects& effects) {
  NodeRuntime& runtime = At(node);
  runtime.down = true;
  runtime.down_reason = reason;
  runtime.down_time = now;
  UpdateCondition(node);
  effects.changed_nodes.push_back(node);
  EndJobsOn(node, reason, now, effects);
}

void NodeBook::EndJobsOn(NodeId node, const std::string& reason, Millis now, Effects& effects) {
  NodeRuntime& runtime = At(node);
  const std::set<JobId> jobs = book_.JobsOn(node);
  for (const JobId id : jobs) {
    Job& job = book_.At(id);
    const bool in_gang = NodeRankOf(job, node) >= 0;
    if (life_.HoldForRepair(job, node, reason, now, effects)) {
      if (in_gang && !runtime.admin.drain) {
        // A node that failed a gang takes no new work when it comes back
        // until an operator has looked at it.
        DrainForController(runtime,
                           fmt::format("failed job {}'s gang, which is repaired from spares: {}",
                                       DisplayId(job), reason),
                           now);
      }
      continue;
    }
    if (life_.DropNode(job, node, reason, now, effects)) continue;  // --no-kill
    if (job.state == JobState::kRunning) {
      job.run.exit_code = 1;
      job.reason = fmt::format("node {} was lost: {}", topology_.NodeName(node), reason);
    }
    life_.Apply(job, JobEvent::kNodeLost, now, effects);
    // The lost node cannot confirm; its share is released now (it is DOWN
    // and takes nothing new until its agent registers again).
    const int rank = NodeRankOf(job, node);
    if (rank >= 0) life_.JobReleased(id, node, now, effects);
  }
}

namespace {

// Why a node's state was set, by whom (none: the controller) and when.
void Stamp(NodeAdmin& admin, std::string reason, std::optional<std::uint32_t> uid, Millis now) {
  admin.reason = std::move(reason);
  admin.uid = uid;
  admin.since = now;
}

}  // namespace

void NodeBook::DrainForController(NodeRuntime& runtime, std::string reason, Millis now) {
  runtime.admin.drain = true;
  Stamp(runtime.admin, std::move(reason), std::nullopt, now);
}

absl::Status NodeBook::Drain(NodeId node, const std::string& reason, const Caller& caller,
                             Millis now, Effects& effects) {
  if (!caller.IsOperator()) {
    return absl::PermissionDeniedError("only root and Operators= (in cohort.conf) may drain nodes");
  }
  if (reason.empty()) {
    return absl::InvalidArgumentError("reason: say why the node is drained (--reason TEXT)");
  }
  NodeRuntime& runtime = At(node);
  runtime.admin.drain = true;
  Stamp(runtime.admin, reason, caller.uid, now);
  UpdateCondition(node);
  effects.changed_nodes.push_back(node);
  return absl::OkStatus();
}

absl::Status NodeBook::Down(NodeId node, const std::string& reason, const Caller& caller,
                            Millis now, Effects& effects) {
  if (!caller.IsOperator()) {
    return absl::PermissionDeniedError(
        "only root and Operators= (in cohort.conf) may set nodes DOWN");
  }
  if (reason.empty()) {
    return absl::InvalidArgumentError(
        "reason: say why the node is set DOWN (scontrol update NodeName=... State=DOWN "
        "Reason=\"...\")");
  }
  NodeRuntime& runtime = At(node);
  const bool was_down = runtime.admin.down;
  runtime.admin.down = true;
  Stamp(runtime.admin, reason, caller.uid, now);
  UpdateCondition(node);
  effects.changed_nodes.push_back(node);
  if (was_down || runtime.down) return absl::OkStatus();  // its jobs ended then
  // Its agent is there: it ends the ranks (a lost node's agent fences
  // them itself).
  for (const JobId id : book_.JobsOn(node)) {
    effects.commands.emplace_back(
        TerminateCommand{.job = id, .node = node, .attempt = book_.At(id).run.attempt});
  }
  EndJobsOn(node, fmt::format("set DOWN by an operator: {}", reason), now, effects);
  return absl::OkStatus();
}

absl::Status NodeBook::Resume(NodeId node, const Caller& caller, Effects& effects) {
  if (!caller.IsOperator()) {
    return absl::PermissionDeniedError(
        "only root and Operators= (in cohort.conf) may resume nodes");
  }
  NodeRuntime& runtime = At(node);
  if (runtime.down && !runtime.admin.down) {
    return absl::FailedPreconditionError(
        fmt::format("node {} is down ({}); it comes back when its agent registers",
                    topology_.NodeName(node), runtime.down_reason));
  }
  runtime.admin = NodeAdmin{};
  UpdateCondition(node);
  effects.changed_nodes.push_back(node);
  triggers_.Note(Trigger::kNodeResumed);
  return absl::OkStatus();
}

void NodeBook::UpdateCondition(NodeId node) {
  const NodeRuntime& runtime = At(node);
  alloc::NodeCondition condition = alloc::NodeCondition::kUp;
  if (!runtime.registered || runtime.down || runtime.admin.down) {
    condition = alloc::NodeCondition::kDown;
  } else if (runtime.admin.drain) {
    condition = alloc::NodeCondition::kDrained;
  }
  pool_.SetCondition(node, condition);
}

NodeView NodeBook::View(NodeId node) const {
  const NodeRuntime& runtime = At(node);
  NodeView view;
  // An operator's word first: a node set DOWN that is also lost is down
  // for the operator's reason until resumed.
  if (runtime.down && !runtime.admin.down) {
    view.reason = runtime.down_reason;
    view.reason_time = runtime.down_time;
  } else if (runtime.admin.drain || runtime.admin.down) {
    view.reason = runtime.admin.reason;
    view.reason_uid = runtime.admin.uid;
    view.reason_time = runtime.admin.since;
  }
  view.jobs.assign(book_.JobsOn(node).begin(), book_.JobsOn(node).end());
  view.not_responding = runtime.not_responding;
  view.last_heard = runtime.registered ? runtime.last_heartbeat : Millis{0};
  if (runtime.down || runtime.admin.down) {
    view.status = NodeStatus::kDown;
  } else if (!runtime.registered) {
    view.status = NodeStatus::kUnknown;
  } else if (runtime.admin.drain) {
    view.status = book_.JobsOn(node).empty() ? NodeStatus::kDrained : NodeStatus::kDraining;
  } else if (pool_.IsIdle(node)) {
    view.status = NodeStatus::kIdle;
    if (topology_.IsSpare(node)) {
      view.reason = fmt::format("spare: kept for repairs of gangs in {} (SpareNodes=)",
                                alloc::GroupName(topology_, topology_.GroupOf(node)));
    }
  } else {
    const alloc::NodeFree& free = pool_.Free(node);
    view.status = free.cpus == 0 || (pool_.Capacity(node).gpus > 0 && free.gpus == 0)
                      ? NodeStatus::kAllocated
                      : NodeStatus::kMixed;
  }
  return view;
}

NodeAdmin NodeBook::Admin(NodeId node) const { return At(node).admin; }

void NodeBook::Heartbeat(NodeId node, Millis now) {
  NodeRuntime& runtime = At(node);
  runtime.last_heartbeat = now;
  runtime.not_responding = false;
}

void NodeBook::Tick(Millis now, Effects& effects) {
  const config::ClusterConfig& config = config_;
  const Millis node_timeout = ToMillis(config.node_timeout);
  // Three heartbeats (the agents send ten per NodeTimeout), at least 3 s.
  const Millis not_responding =
      std::min(node_timeout, std::max(node_timeout * 3 / 10, Millis(3000)));
  for (NodeId n = 0; n < static_cast<NodeId>(nodes_.size()); ++n) {
    NodeRuntime& runtime = At(n);
    const bool silent =
        runtime.registered && !runtime.down && now - runtime.last_heartbeat > not_responding;
    if (silent != runtime.not_responding) {
      runtime.not_responding = silent;
      effects.changed_nodes.push_back(n);
    }
    if ((runtime.registered || runtime.awaited) && !runtime.down &&
        now - runtime.last_heartbeat > node_timeout) {
      Lost(n,
           runtime.registered
               ? fmt::format("not responding for {} s (NodeTimeout)", config.node_timeout.count())
               : fmt::format("its agent did not register within {} s (NodeTimeout) of the "
                             "controller's restart",
                             config.node_timeout.count()),
           now, effects);
    }
  }
}

void NodeBook::RestoreAdmin(const std::vector<std::pair<NodeId, NodeAdmin>>& admin) {
  for (const auto& [node, settings] : admin) {
    if (node < 0 || node >= static_cast<NodeId>(nodes_.size())) continue;
    At(node).admin = settings;
  }
}

}  // namespace cohort::engine
