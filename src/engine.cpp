// SPDX-License-Identifier: Apache-2.0
#include "cohort/engine.h"

#include <signal.h>
#include <string.h>

#include <algorithm>
#include <bit>

#include <fmt/format.h>

#include "cohort/check.h"
#include "cohort/fmt_absl.h"
#include "cohort/hostlist.h"
#include "cohort/slurm_time.h"

namespace cohort {
namespace {

// Finished jobs stay visible to `cohort show job` this long, then leave
// memory (history is kept by the store).
constexpr Millis kFinishedRetention = std::chrono::minutes(5);

int RanksOk(const Job& job) {
  int ok = 0;
  for (const int n : job.exited_ok) ok += n;
  return ok;
}

bool AllReleased(const Job& job) {
  return std::all_of(job.released.begin(), job.released.end(), [](std::uint8_t r) { return r; });
}

// USR1, or the number for a signal without a name.
std::string SignalText(int signal) {
  const char* name = ::sigabbrev_np(signal);
  return name == nullptr ? std::to_string(signal) : std::string(name);
}

// Whether a running job is due its warning: its lead before a time limit
// longer than the lead is reached. Never for an unlimited job, nor twice in
// one attempt.
bool WarningDue(const Job& job, Millis now) {
  const TimeWarning& warning = job.request.warning;
  if (job.state != JobState::kRunning || warning.signal == 0 ||
      job.warned_attempt == job.attempt || job.time_limit == kUnlimited ||
      job.time_limit <= warning.before) {
    return false;
  }
  return now - job.start_time >= std::chrono::duration_cast<Millis>(job.time_limit - warning.before);
}

std::string Names(const topology::Topology& topology, const alloc::Placement& placement) {
  std::vector<std::string> names;
  names.reserve(placement.grants.size());
  for (const alloc::NodeGrant& g : placement.grants) names.push_back(topology.NodeName(g.node));
  return hostlist::Compress(names);
}

}  // namespace

std::string_view NodeStatusName(NodeStatus status) {
  switch (status) {
    case NodeStatus::kUnknown: return "UNKNOWN";
    case NodeStatus::kIdle: return "IDLE";
    case NodeStatus::kMixed: return "MIXED";
    case NodeStatus::kAllocated: return "ALLOCATED";
    case NodeStatus::kDraining: return "DRAINING";
    case NodeStatus::kDrained: return "DRAINED";
    case NodeStatus::kDown: return "DOWN";
  }
  return "UNKNOWN";
}

Engine::Engine(const config::ClusterConfig& config, const topology::Topology& topology,
               alloc::NodePool pool)
    : config_(config),
      topology_(topology),
      pool_(std::move(pool)),
      allocator_(topology),
      nodes_(static_cast<std::size_t>(topology.NodeCount())),
      fair_share_(config.priority.decay_half_life) {
  // The default QOS exists whether or not a QOSName= line declares it.
  if (std::none_of(config_.qos.begin(), config_.qos.end(),
                   [&](const config::QosSpec& q) { return q.name == config_.default_qos; })) {
    config::QosSpec implicit;
    implicit.name = config_.default_qos;
    config_.qos.push_back(implicit);
  }
  for (const config::PartitionSpec& p : config_.partitions) {
    max_tier_ = std::max(max_tier_, p.priority_tier);
  }
  for (const config::QosSpec& q : config_.qos) max_qos_priority_ = std::max(max_qos_priority_, q.priority);
  // No agent has spoken yet: nothing may land anywhere.
  for (NodeId n = 0; n < topology.NodeCount(); ++n) UpdateCondition(n);
}

absl::StatusOr<Job> Engine::Resolve(JobRequest request) const {
  Job job;
  const config::PartitionSpec* partition = request.partition.empty()
                                               ? config_.DefaultPartition()
                                               : config_.FindPartition(request.partition);
  if (partition == nullptr) {
    std::vector<std::string> names;
    for (const config::PartitionSpec& p : config_.partitions) names.push_back(p.name);
    return absl::InvalidArgumentError(fmt::format("partition: no partition \"{}\"; partitions: {}",
                                                  request.partition, fmt::join(names, ", ")));
  }
  request.partition = partition->name;
  if (request.account.empty()) request.account = request.user_name;
  if (!partition->allow_accounts.empty() &&
      std::find(partition->allow_accounts.begin(), partition->allow_accounts.end(),
                request.account) == partition->allow_accounts.end()) {
    return absl::PermissionDeniedError(
        fmt::format("account: partition {} allows accounts {}; \"{}\" is not one of them; pass -A",
                    partition->name, fmt::join(partition->allow_accounts, ","), request.account));
  }
  if (!partition->allow_users.empty() &&
      std::find(partition->allow_users.begin(), partition->allow_users.end(),
                request.user_name) == partition->allow_users.end()) {
    return absl::PermissionDeniedError(
        fmt::format("partition: {} allows users {}; \"{}\" is not one of them; pass -p", partition->name,
                    fmt::join(partition->allow_users, ","), request.user_name));
  }
  const std::string qos_name = request.qos.empty() ? config_.default_qos : request.qos;
  const config::QosSpec* qos = config_.FindQos(qos_name);
  if (qos == nullptr) {
    std::vector<std::string> names;
    for (const config::QosSpec& q : config_.qos) names.push_back(q.name);
    return absl::InvalidArgumentError(
        fmt::format("qos: no QOS \"{}\"; QOS: {}", qos_name, fmt::join(names, ", ")));
  }
  if (partition->max_nodes && request.nodes > *partition->max_nodes) {
    return absl::InvalidArgumentError(
        fmt::format("nodes: partition {} allows at most {} nodes per job; the job asks for {}",
                    partition->name, *partition->max_nodes, request.nodes));
  }
  if (request.time_limit.count() < 0) {
    return absl::InvalidArgumentError("time: the time limit is negative");
  }
  if (request.time_limit.count() == 0) {
    job.time_limit = partition->default_time.value_or(partition->max_time);
  } else if (partition->max_time != kUnlimited && request.time_limit > partition->max_time) {
    return absl::InvalidArgumentError(
        fmt::format("time: {} is over partition {}'s MaxTime {}; ask for less with -t",
                    FormatSlurmTime(request.time_limit), partition->name,
                    FormatSlurmTime(partition->max_time)));
  } else {
    job.time_limit = request.time_limit;
  }
  if (qos->max_wall) {
    if (request.time_limit.count() > 0 && request.time_limit > *qos->max_wall) {
      return absl::InvalidArgumentError(
          fmt::format("time: {} is over QOS {}'s MaxWall {}; ask for less with -t",
                      FormatSlurmTime(request.time_limit), qos->name, FormatSlurmTime(*qos->max_wall)));
    }
    if (job.time_limit == kUnlimited || job.time_limit > *qos->max_wall) {
      job.time_limit = *qos->max_wall;
    }
  }
  if (qos->max_gpus_per_user && request.gpus_per_node * request.nodes > *qos->max_gpus_per_user) {
    return absl::FailedPreconditionError(fmt::format(
        "the job can never run here: QOS {} allows {} GPUs per user (MaxGpusPerUser) and the job "
        "asks for {}; ask for fewer or use another --qos",
        qos->name, *qos->max_gpus_per_user, request.gpus_per_node * request.nodes));
  }
  if (qos->max_gpus_per_account &&
      request.gpus_per_node * request.nodes > *qos->max_gpus_per_account) {
    return absl::FailedPreconditionError(fmt::format(
        "the job can never run here: QOS {} allows {} GPUs per account (MaxGpusPerAccount) and "
        "the job asks for {}; ask for fewer or use another --qos",
        qos->name, *qos->max_gpus_per_account, request.gpus_per_node * request.nodes));
  }
  job.qos = qos->name;
  if (request.switches < 0) {
    return absl::InvalidArgumentError("switches: the leaf switch count must be at least 1");
  }
  if (request.warning.signal < 0 || request.warning.signal > 64) {
    return absl::InvalidArgumentError(fmt::format(
        "signal: {} is not a signal number; give 1-64 (--signal=USR1@90)", request.warning.signal));
  }
  if (request.warning.before.count() < 0 || request.warning.before > kMaxWarningLead) {
    return absl::InvalidArgumentError(
        fmt::format("signal: the warning {} s before the time limit is outside 0-{} s",
                    request.warning.before.count(), kMaxWarningLead.count()));
  }

  alloc::GangRequest& gang = job.gang;
  gang.nodes = request.nodes;
  gang.tasks_per_node = request.tasks_per_node;
  gang.cpus_per_task = request.cpus_per_task;
  gang.gpus_per_node = request.gpus_per_node;
  gang.memory_mb_per_node = request.memory_mb;
  gang.exclusivity = request.exclusivity;
  gang.partition = pool_.FindPartition(partition->name);
  gang.features = request.features;
  if (request.switches > 0) gang.max_leaves = request.switches;
  auto resolve_names = [&](const std::vector<std::string>& names, std::string_view option,
                           std::vector<NodeId>& out) -> absl::Status {
    for (const std::string& name : names) {
      const std::optional<NodeId> id = topology_.FindNode(name);
      if (!id) {
        return absl::InvalidArgumentError(
            fmt::format("{}: no node {}; see cohort nodes", option, name));
      }
      out.push_back(*id);
    }
    return absl::OkStatus();
  };
  if (absl::Status s = resolve_names(request.nodelist, "nodelist", gang.required_nodes); !s.ok()) {
    return s;
  }
  if (absl::Status s = resolve_names(request.exclude, "exclude", gang.excluded_nodes); !s.ok()) {
    return s;
  }
  if (absl::Status valid = alloc::ValidateGangRequest(gang); !valid.ok()) return valid;
  job.priority_tier = partition->priority_tier;
  job.request = std::move(request);
  job.request.qos = job.qos;
  return job;
}

absl::StatusOr<JobId> Engine::Submit(JobRequest request, Millis now, Effects& effects) {
  absl::StatusOr<Job> resolved = Resolve(std::move(request));
  if (!resolved.ok()) return resolved.status();
  // Refuse what can never run (the allocator remembers the answer by shape).
  const alloc::PlacementResult probe = allocator_.Feasible(resolved->gang, pool_);
  if (probe.outcome == alloc::Outcome::kInfeasible) {
    return absl::FailedPreconditionError(fmt::format("the job can never run here: {}", probe.reason));
  }
  Job job = *std::move(resolved);
  for (const DependencyTerm& term : job.request.dependency.terms) {
    if (term.type == DependencyType::kSingleton) continue;
    if (!jobs_.contains(term.job)) {
      return absl::InvalidArgumentError(fmt::format(
          "dependency: job {} is not known (jobs leave the queue 5 minutes after they end; see "
          "cohort history)",
          term.job));
    }
  }
  const config::QosSpec* qos = config_.FindQos(job.qos);
  if (qos != nullptr && qos->max_submit_jobs_per_user) {
    std::size_t queued = 0;
    for (const auto* index : {&pending_, &active_}) {
      for (const Job* other : *index) {
        if (other->qos == job.qos && other->request.uid == job.request.uid) {
          queued += other->array_pending.empty() ? 1 : other->array_pending.size();
        }
      }
    }
    const std::size_t adding = job.request.array.tasks.empty() ? 1 : job.request.array.tasks.size();
    if (queued + adding > static_cast<std::size_t>(*qos->max_submit_jobs_per_user)) {
      return absl::ResourceExhaustedError(fmt::format(
          "QOS {} allows {} queued jobs per user (MaxSubmitJobsPerUser); you have {} and this "
          "submission adds {}; wait for some to end or cancel some",
          job.qos, *qos->max_submit_jobs_per_user, queued, adding));
    }
  }
  job.id = next_id_++;
  job.submit_time = now;
  job.eligible_time = now;
  job.state = JobState::kPending;
  job.reason = "None";
  job.held = job.request.hold;
  if (job.held) job.reason = "JobHeldUser";
  job.dependency_left = job.request.dependency;
  NoteDependencies(job);
  if (!job.request.array.tasks.empty()) {
    job.array_job_id = job.id;
    job.array_pending = job.request.array.tasks;
  }
  job.priority = PriorityOf(job, now).total;
  schedule_needed_ = true;
  submitted_.push_back(job.id);
  const JobId id = job.id;
  auto [it, inserted] = jobs_.emplace(id, std::move(job));
  COHORT_CHECK(inserted, "job id reused");
  Index(it->second);
  Changed(it->second, effects);
  return id;
}

absl::StatusOr<Engine::Preview> Engine::TestSubmit(const JobRequest& request) {
  absl::StatusOr<Job> resolved = Resolve(request);
  if (!resolved.ok()) return resolved.status();
  const alloc::PlacementResult result = allocator_.Place(resolved->gang, pool_);
  Preview preview;
  switch (result.outcome) {
    case alloc::Outcome::kPlaced:
      preview.would_run_on = Names(topology_, result.placement);
      break;
    case alloc::Outcome::kBusy: preview.reason = result.reason; break;
    case alloc::Outcome::kInfeasible:
      return absl::FailedPreconditionError(
          fmt::format("the job can never run here: {}", result.reason));
  }
  return preview;
}

absl::Status Engine::Cancel(JobId id, int signal, const Caller& caller, Millis now,
                            Effects& effects) {
  auto it = jobs_.find(id);
  if (it == jobs_.end()) {
    return absl::NotFoundError(fmt::format("job {} not found; see cohort queue", id));
  }
  Job& job = it->second;
  if (!caller.IsOperator() && caller.uid != job.request.uid) {
    return absl::PermissionDeniedError(
        fmt::format("job {} belongs to {}; you can cancel only your own jobs", id,
                    job.request.user_name));
  }
  if (IsFinished(job.state)) {
    return absl::FailedPreconditionError(
        fmt::format("job {} has already finished ({})", id, JobStateName(job.state)));
  }
  if (signal != 0) {
    if (job.state != JobState::kRunning) {
      return absl::FailedPreconditionError(
          fmt::format("job {} is {}; only running jobs can be signalled", id,
                      JobStateName(job.state)));
    }
    for (const alloc::NodeGrant& g : job.placement.grants) {
      effects.commands.emplace_back(SignalCommand{id, g.node, signal, false});
    }
    return absl::OkStatus();
  }
  job.reason = caller.IsOperator() && caller.uid != job.request.uid ? "cancelled by an operator"
                                                                    : "cancelled by its owner";
  Apply(job, JobEvent::kCancelled, now, effects);
  if (job.array_job_id == job.id && job.array_task_id < 0) job.array_pending.clear();
  return absl::OkStatus();
}

void Engine::Changed(Job& job, Effects& effects) {
  if (effects.changed_jobs.empty() || effects.changed_jobs.back() != job.id) {
    effects.changed_jobs.push_back(job.id);
  }
}

void Engine::Apply(Job& job, JobEvent event, Millis now, Effects& effects) {
  const std::optional<JobState> next = Transition(job.state, event);
  if (!next) return;
  const JobState before = job.state;
  if (before == JobState::kPending && *next == JobState::kCancelled) {
    job.cause = EndCause::kCancelled;
    job.end_time = now;
    SetState(job, JobState::kCancelled);
    Changed(job, effects);
    NeedPass();  // it may have been what the jobs behind it waited for
    return;
  }
  if (before == JobState::kRunning && *next == JobState::kCompleting) {
    job.cause = CauseOf(event);
    if (job.cause == EndCause::kNodeLost && job.request.requeue) {
      job.cause = EndCause::kNodeLostRequeue;
    }
    SetState(job, JobState::kCompleting);
    if (job.cause != EndCause::kSuccess) StopGang(job, effects);
    Changed(job, effects);
    // Every node may already have confirmed (a launch failure on all).
    if (AllReleased(job)) {
      Finish(job, now, effects);
    }
    return;
  }
  if (before == JobState::kCompleting && event == JobEvent::kAllReleased) {
    Finish(job, now, effects);
    return;
  }
  SetState(job, *next);
  Changed(job, effects);
}

void Engine::StopGang(Job& job, Effects& effects) {
  for (std::size_t rank = 0; rank < job.placement.grants.size(); ++rank) {
    if (job.released[rank] == 0) {
      // Stopped ranks handle no SIGTERM: wake them to shut down cleanly.
      if (job.suspended) {
        effects.commands.emplace_back(SignalCommand{job.id, job.placement.grants[rank].node, SIGCONT, false});
      }
      effects.commands.emplace_back(TerminateCommand{job.id, job.placement.grants[rank].node});
    }
  }
}

void Engine::Finish(Job& job, Millis now, Effects& effects) {
  const JobState final_state = FinalState(job.cause);
  ChargeUsage(job, now);
  job.end_time = now;
  if (job.suspended) {
    job.suspended = false;  // its grants went back to the pool when it was suspended
  }
  if (final_state == JobState::kPending) {
    // Requeued: back in the queue with the same id and the next attempt.
    SetState(job, JobState::kPending);
    job.reason = "Requeued";
    job.reason_detail = job.cause == EndCause::kPreemptRequeue
                            ? fmt::format("preempted by job {}; runs again when resources allow",
                                          job.preempted_by)
                        : job.cause == EndCause::kRequeued ? "requeued by cohort requeue"
                                                           : "a node of its last attempt was lost";
    job.preempt_deadline = Millis{0};
    job.preempted_by = 0;
    job.eligible_time = now;
    job.cause = EndCause::kNone;
    job.placement = {};
    job.released.clear();
    job.exited_ok.clear();
    ++job.attempt;
    NeedPass();
  } else {
    SetState(job, final_state);
  }
  Changed(job, effects);
}

int Engine::MasterPort(const Job& job) const {
  // From the job's id, spread over 20000-39999, and never one that another
  // running job uses on the same master node.
  const NodeId master = job.placement.grants.front().node;
  std::set<int> taken;
  for (const JobId other : nodes_[static_cast<std::size_t>(master)].jobs) {
    const Job& o = jobs_.at(other);
    if (o.id != job.id && !o.placement.grants.empty() && o.placement.grants.front().node == master) {
      taken.insert(o.master_port);
    }
  }
  int port = 20000 + static_cast<int>(job.id % 20000);
  while (taken.contains(port)) port = port == 39999 ? 20000 : port + 1;
  return port;
}

int Engine::NodeRankOf(const Job& job, NodeId node) const {
  for (std::size_t i = 0; i < job.placement.grants.size(); ++i) {
    if (job.placement.grants[i].node == node) return static_cast<int>(i);
  }
  return -1;
}

void Engine::ReleaseNode(Job& job, int node_rank, Effects& effects) {
  if (job.released[static_cast<std::size_t>(node_rank)] != 0) return;
  job.released[static_cast<std::size_t>(node_rank)] = 1;
  const alloc::NodeGrant& grant = job.placement.grants[static_cast<std::size_t>(node_rank)];
  if (!job.suspended) pool_.Release({&grant, 1});
  nodes_[static_cast<std::size_t>(grant.node)].jobs.erase(job.id);
  effects.changed_nodes.push_back(grant.node);
  released_nodes_.push_back(grant.node);
  if (job.array_job_id != 0) released_array_task_ = true;
  NeedReleasePass(job);
}

void Engine::RankExited(JobId id, NodeId node, int exit_code, int signal, Millis now,
                        Effects& effects) {
  auto it = jobs_.find(id);
  if (it == jobs_.end()) return;
  Job& job = it->second;
  const int rank = NodeRankOf(job, node);
  if (rank < 0) return;
  if (exit_code == 0 && signal == 0) {
    CountOk(job, rank, job.exited_ok[static_cast<std::size_t>(rank)] + 1, now, effects);
    return;
  }
  if (job.state == JobState::kRunning && signal != 0 && job.warned_attempt == job.attempt &&
      signal == job.request.warning.signal) {
    // A rank that does not handle the warning dies of it (USR1's default):
    // the job met its time limit early; it did not fail.
    job.exit_code = exit_code;
    job.exit_signal = signal;
    job.reason = fmt::format(
        "time limit {} reached: a rank on {} ended on the warning signal {} sent {} s before it",
        FormatSlurmTime(job.time_limit), topology_.NodeName(node), SignalText(signal),
        job.request.warning.before.count());
    Apply(job, JobEvent::kTimeLimit, now, effects);
    return;
  }
  if (job.state == JobState::kRunning) {
    // The first failure names the job's exit; ranks killed by the gang stop
    // that follows do not overwrite it.
    job.exit_code = exit_code;
    job.exit_signal = signal;
    job.reason = signal != 0 ? fmt::format("a rank on {} was killed by signal {}",
                                           topology_.NodeName(node), signal)
                             : fmt::format("a rank on {} exited with code {}",
                                           topology_.NodeName(node), exit_code);
  }
  Apply(job, JobEvent::kRankFailed, now, effects);
}

void Engine::LaunchFailed(JobId id, NodeId node, const std::string& reason, Millis now,
                          Effects& effects) {
  auto it = jobs_.find(id);
  if (it == jobs_.end() || NodeRankOf(it->second, node) < 0) return;
  Job& job = it->second;
  if (job.state == JobState::kRunning) {
    job.exit_code = 1;
    // Agents name their node first already; say it once.
    const std::string& name = topology_.NodeName(node);
    job.reason = reason.starts_with(name + ": ")
                     ? fmt::format("launch failed on {}", reason)
                     : fmt::format("launch failed on {}: {}", name, reason);
  }
  Apply(job, JobEvent::kLaunchFailed, now, effects);
}

void Engine::JobReleased(JobId id, NodeId node, Millis now, Effects& effects) {
  auto it = jobs_.find(id);
  if (it == jobs_.end()) return;
  Job& job = it->second;
  const int rank = NodeRankOf(job, node);
  if (rank < 0 || IsFinished(job.state) || job.state == JobState::kPending) return;
  ReleaseNode(job, rank, effects);
  // A node can only run out of ranks while the job runs if each of them
  // exited 0; the job runs on until every node is done.
  if (AllReleased(job)) {
    if (job.state == JobState::kRunning) {
      // Released everywhere without every exit reported: treat as success
      // only if all ranks said so.
      const int ranks = job.gang.nodes * job.gang.tasks_per_node;
      Apply(job, RanksOk(job) == ranks ? JobEvent::kRanksSucceeded : JobEvent::kRankFailed, now,
            effects);
    } else {
      Apply(job, JobEvent::kAllReleased, now, effects);
    }
  }
}

absl::Status Engine::NodeRegistered(NodeId node, const NodeReport& report, Millis now,
                                    Effects& effects) {
  NodeRuntime& runtime = nodes_[static_cast<std::size_t>(node)];
  const alloc::NodeCapacity& want = pool_.Capacity(node);
  runtime.registered = true;
  runtime.awaited = false;
  runtime.last_heartbeat = now;
  runtime.down = false;
  runtime.down_reason.clear();
  if (report.cpus < want.cpus || report.memory_mb < want.memory_mb || report.gpus < want.gpus) {
    runtime.drain = true;
    runtime.drain_reason = fmt::format(
        "agent reports {} CPUs, {} MB, {} GPUs; its NodeName line says {} CPUs, {} MB, {} GPUs",
        report.cpus, report.memory_mb, report.gpus, want.cpus, want.memory_mb, want.gpus);
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
  std::set<JobId> accounted;
  for (const RunningReport& running : report.running) {
    auto it = jobs_.find(running.job);
    const int rank = it == jobs_.end() ? -1 : NodeRankOf(it->second, node);
    const bool current =
        rank >= 0 && (running.attempt == 0 || running.attempt == it->second.attempt) &&
        (it->second.state == JobState::kRunning || it->second.state == JobState::kCompleting) &&
        it->second.released[static_cast<std::size_t>(rank)] == 0;
    // Unknown, finished, elsewhere, an older attempt, or stopping (the
    // terminate may have been lost with the old stream): stop it (again).
    if (!current || it->second.state == JobState::kCompleting) {
      effects.commands.emplace_back(TerminateCommand{running.job, node});
    }
    if (!current) continue;
    accounted.insert(running.job);
    CountOk(it->second, rank, running.ranks_ok, now, effects);
  }
  for (const FinishedReport& finished : report.finished) {
    auto it = jobs_.find(finished.job);
    if (it == jobs_.end() || accounted.contains(finished.job)) continue;
    Job& job = it->second;
    const int rank = NodeRankOf(job, node);
    if (rank < 0 || (finished.attempt != 0 && finished.attempt != job.attempt) ||
        (job.state != JobState::kRunning && job.state != JobState::kCompleting) ||
        job.released[static_cast<std::size_t>(rank)] != 0) {
      continue;
    }
    accounted.insert(finished.job);
    ApplyFinished(job, node, rank, finished, now, effects);
  }
  const std::set<JobId> expected = runtime.jobs;
  for (const JobId id : expected) {
    if (accounted.contains(id)) continue;
    Job& job = jobs_.at(id);
    const int rank = NodeRankOf(job, node);
    if (job.state == JobState::kRunning) {
      job.exit_code = 1;
      job.reason = fmt::format("its ranks on {} vanished when the agent restarted",
                               topology_.NodeName(node));
      Apply(job, JobEvent::kNodeLost, now, effects);
    }
    if (rank >= 0) JobReleased(id, node, now, effects);
  }
  UpdateCondition(node);
  effects.changed_nodes.push_back(node);
  NeedPass();
  return absl::OkStatus();
}

void Engine::CountOk(Job& job, int node_rank, int ranks_ok, Millis now, Effects& effects) {
  int& count = job.exited_ok[static_cast<std::size_t>(node_rank)];
  if (ranks_ok <= count) return;
  count = std::min(ranks_ok, job.gang.tasks_per_node);
  if (RanksOk(job) == job.gang.nodes * job.gang.tasks_per_node) {
    Apply(job, JobEvent::kRanksSucceeded, now, effects);
  }
}

void Engine::ApplyFinished(Job& job, NodeId node, int node_rank, const FinishedReport& report,
                           Millis now, Effects& effects) {
  if (!report.launch_error.empty()) {
    LaunchFailed(job.id, node, report.launch_error, now, effects);
  } else {
    CountOk(job, node_rank, report.ranks_ok, now, effects);
    if (report.failed) {
      const bool named = report.exit_code != 0 || report.signal != 0;
      RankExited(job.id, node, named ? report.exit_code : 1, report.signal, now, effects);
    }
  }
  JobReleased(job.id, node, now, effects);
}

void Engine::Warn(Job& job, Effects& effects) {
  const TimeWarning& warning = job.request.warning;
  job.warned_attempt = job.attempt;
  for (std::size_t rank = 0; rank < job.placement.grants.size(); ++rank) {
    // B: is for the batch script, which is global rank 0, on node rank 0.
    if (warning.batch_only && rank > 0) break;
    // A node whose ranks all exited 0 has nothing left to warn.
    if (job.released[rank] != 0) continue;
    effects.commands.emplace_back(
        SignalCommand{job.id, job.placement.grants[rank].node, warning.signal, warning.batch_only});
  }
  job.reason_detail = fmt::format("sent {} to {} {} s before the time limit {} (--signal)",
                                  SignalText(warning.signal),
                                  warning.batch_only ? "the batch script (rank 0)" : "every rank",
                                  warning.before.count(), FormatSlurmTime(job.time_limit));
  Changed(job, effects);
}

void Engine::NodeHeartbeat(NodeId node, Millis now) {
  nodes_[static_cast<std::size_t>(node)].last_heartbeat = now;
}

void Engine::NodeLost(NodeId node, const std::string& reason, Millis now, Effects& effects) {
  NodeRuntime& runtime = nodes_[static_cast<std::size_t>(node)];
  runtime.down = true;
  runtime.down_reason = reason;
  UpdateCondition(node);
  effects.changed_nodes.push_back(node);
  const std::set<JobId> jobs = runtime.jobs;
  for (const JobId id : jobs) {
    Job& job = jobs_.at(id);
    if (job.state == JobState::kRunning) {
      job.exit_code = 1;
      job.reason = fmt::format("node {} was lost: {}", topology_.NodeName(node), reason);
    }
    Apply(job, JobEvent::kNodeLost, now, effects);
    // The lost node cannot confirm; its share is released now (it is DOWN
    // and takes nothing new until its agent registers again).
    const int rank = NodeRankOf(job, node);
    if (rank >= 0) JobReleased(id, node, now, effects);
  }
}

absl::Status Engine::Drain(NodeId node, const std::string& reason, const Caller& caller,
                           Effects& effects) {
  if (!caller.IsOperator()) {
    return absl::PermissionDeniedError("only root can drain nodes");
  }
  if (reason.empty()) {
    return absl::InvalidArgumentError("reason: say why the node is drained (--reason TEXT)");
  }
  NodeRuntime& runtime = nodes_[static_cast<std::size_t>(node)];
  runtime.drain = true;
  runtime.drain_reason = reason;
  UpdateCondition(node);
  effects.changed_nodes.push_back(node);
  return absl::OkStatus();
}

absl::Status Engine::Resume(NodeId node, const Caller& caller, Effects& effects) {
  if (!caller.IsOperator()) {
    return absl::PermissionDeniedError("only root can resume nodes");
  }
  NodeRuntime& runtime = nodes_[static_cast<std::size_t>(node)];
  if (runtime.down) {
    return absl::FailedPreconditionError(
        fmt::format("node {} is down ({}); it comes back when its agent registers",
                    topology_.NodeName(node), runtime.down_reason));
  }
  runtime.drain = false;
  runtime.drain_reason.clear();
  UpdateCondition(node);
  effects.changed_nodes.push_back(node);
  NeedPass();
  return absl::OkStatus();
}

void Engine::UpdateCondition(NodeId node) {
  const NodeRuntime& runtime = nodes_[static_cast<std::size_t>(node)];
  alloc::NodeCondition condition = alloc::NodeCondition::kUp;
  if (!runtime.registered || runtime.down) {
    condition = alloc::NodeCondition::kDown;
  } else if (runtime.drain) {
    condition = alloc::NodeCondition::kDrained;
  }
  pool_.SetCondition(node, condition);
}

void Engine::Tick(Millis now, Effects& effects) {
  const Millis node_timeout = std::chrono::duration_cast<Millis>(config_.node_timeout);
  for (NodeId n = 0; n < static_cast<NodeId>(nodes_.size()); ++n) {
    const NodeRuntime& runtime = nodes_[static_cast<std::size_t>(n)];
    if ((runtime.registered || runtime.awaited) && !runtime.down &&
        now - runtime.last_heartbeat > node_timeout) {
      NodeLost(n,
               runtime.registered
                   ? fmt::format("not responding for {} s (NodeTimeout)", config_.node_timeout.count())
                   : fmt::format("its agent did not register within {} s (NodeTimeout) of the "
                                 "controller's restart",
                                 config_.node_timeout.count()),
               now, effects);
    }
  }
  ChargeUsage(now);
  if (!pending_.empty() && now - last_full_pass_ >= kFullPassEvery) NeedPass();
  // Stopping or warning a job changes the index being walked: walk a copy.
  const std::vector<Job*> active(active_.begin(), active_.end());
  for (Job* entry : active) {
    Job& job = *entry;
    if (job.state == JobState::kRunning && job.preempt_deadline.count() != 0 &&
        now >= job.preempt_deadline && !job.suspended) {
      StopVictim(job, fmt::format("stopped at the end of its {} s grace time", GraceOf(job).count()),
                 now, effects);
    } else if (job.state == JobState::kRunning && !job.suspended && job.time_limit != kUnlimited &&
               now - job.start_time >= std::chrono::duration_cast<Millis>(job.time_limit)) {
      job.reason = fmt::format("time limit {} reached", FormatSlurmTime(job.time_limit));
      Apply(job, JobEvent::kTimeLimit, now, effects);
    } else if (WarningDue(job, now)) {
      Warn(job, effects);
    }
  }
  const std::vector<Job*> waits(switch_waits_.begin(), switch_waits_.end());
  for (Job* job : waits) {
    if (now - job->submit_time >= std::chrono::duration_cast<Millis>(job->request.switches_wait)) {
      // --switches=N@wait: past the wait the job takes any leaves.
      switch_waits_.erase(job);
      job->gang.max_leaves.reset();
      NeedPass();
    }
  }
  while (!finished_.empty() && now - finished_.begin()->first > kFinishedRetention) {
    const JobId id = finished_.begin()->second;
    finished_.erase(finished_.begin());
    const Job& job = jobs_.at(id);
    if (job.array_job_id != 0 && job.array_job_id != id) {
      auto it = array_tasks_.find(job.array_job_id);
      if (it != array_tasks_.end()) {
        std::erase(it->second, id);
        if (it->second.empty()) array_tasks_.erase(it);
      }
    }
    jobs_.erase(id);
    effects.forgotten_jobs.push_back(id);
  }
}

void Engine::SetState(Job& job, JobState next) {
  if (job.state == next) return;
  Unindex(job);
  job.state = next;
  Index(job);
}

void Engine::Index(Job& job) {
  if (job.share_slot < 0) {
    auto key = std::pair{job.request.account, job.request.user_name};
    auto [it, fresh] = share_slots_.try_emplace(key, static_cast<int>(share_owners_.size()));
    if (fresh) share_owners_.push_back(std::move(key));
    job.share_slot = it->second;
  }
  if (job.state == JobState::kPending) {
    pending_.insert(&job);
    ++pending_shapes_[ShapeOf(job.gang)];
    if (job.gang.max_leaves && job.request.switches_wait.count() > 0) switch_waits_.insert(&job);
  } else if (job.state == JobState::kRunning || job.state == JobState::kCompleting) {
    active_.insert(&job);
  } else {
    finished_.emplace(job.end_time, job.id);
  }
}

void Engine::Unindex(Job& job) {
  if (job.state == JobState::kPending) {
    pending_.erase(&job);
    // Counted with the gang it was indexed with (Restore indexes again
    // when it changes one; CheckInvariants compares).
    if (const auto shape = pending_shapes_.find(ShapeOf(job.gang));
        shape != pending_shapes_.end() && --shape->second == 0) {
      pending_shapes_.erase(shape);
    }
    switch_waits_.erase(&job);
  } else if (job.state == JobState::kRunning || job.state == JobState::kCompleting) {
    active_.erase(&job);
  } else {
    finished_.erase({job.end_time, job.id});
  }
}

const Job* Engine::FindJob(JobId id) const {
  const auto it = jobs_.find(id);
  return it == jobs_.end() ? nullptr : &it->second;
}

NodeAdmin Engine::Admin(NodeId node) const {
  const NodeRuntime& runtime = nodes_[static_cast<std::size_t>(node)];
  return NodeAdmin{runtime.drain, runtime.drain ? runtime.drain_reason : std::string()};
}

void Engine::Restore(SavedState state, Millis now, Effects& effects) {
  COHORT_CHECK(jobs_.empty() && next_id_ == 1, "Restore must come before any other call");
  next_id_ = std::max<JobId>(state.next_id, 1);
  for (const auto& [node, admin] : state.nodes) {
    if (node < 0 || node >= topology_.NodeCount()) continue;
    NodeRuntime& runtime = nodes_[static_cast<std::size_t>(node)];
    runtime.drain = admin.drain;
    runtime.drain_reason = admin.reason;
  }
  fair_share_.Restore(state.usage);
  for (Job& saved : state.jobs) {
    next_id_ = std::max(next_id_, saved.id + 1);
    auto [it, inserted] = jobs_.emplace(saved.id, std::move(saved));
    if (!inserted) continue;
    Job& job = it->second;
    job.share_slot = -1;  // numbered by this engine
    Index(job);
    job.charged_until = now;
    if (job.array_task_id >= 0 && job.id != job.array_job_id) {
      array_tasks_[job.array_job_id].push_back(job.id);
    }
    const bool active = job.state == JobState::kRunning || job.state == JobState::kCompleting;
    absl::StatusOr<Job> resolved = Resolve(job.request);
    if (resolved.ok()) {
      // Indexed again with today's gang (its shape, its --switches wait).
      const bool pending = job.state == JobState::kPending;
      if (pending) Unindex(job);
      job.gang = resolved->gang;
      job.priority_tier = resolved->priority_tier;
      job.qos = resolved->qos;
      if (pending) {
        job.time_limit = resolved->time_limit;
        Index(job);
      }
    } else if (job.state == JobState::kPending) {
      job.cause = EndCause::kLaunchFailed;
      job.exit_code = 1;
      job.reason = fmt::format("no longer valid after a configuration change: {}",
                               resolved.status().message());
      job.end_time = now;
      SetState(job, JobState::kFailed);
      Changed(job, effects);
      continue;
    } else if (active) {
      // Its partition changed; keep what the running gang holds.
      job.gang.nodes = static_cast<int>(job.placement.grants.size());
      job.gang.tasks_per_node = job.request.tasks_per_node;
      job.gang.cpus_per_task = job.request.cpus_per_task;
      job.gang.gpus_per_node = job.request.gpus_per_node;
      job.gang.memory_mb_per_node = job.request.memory_mb;
    }
    if (!active) continue;
    const std::size_t size = job.placement.grants.size();
    job.released.resize(size, 0);
    job.exited_ok.resize(size, 0);
    std::string lost;
    for (std::size_t rank = 0; rank < size; ++rank) {
      if (job.released[rank] != 0) continue;
      const alloc::NodeGrant& g = job.placement.grants[rank];
      const bool known = g.node >= 0 && g.node < topology_.NodeCount();
      const alloc::NodeFree* free = known ? &pool_.Free(g.node) : nullptr;
      if (free == nullptr || free->cpus < g.cpus || free->memory_mb < g.memory_mb ||
          (free->gpus & g.gpus) != g.gpus) {
        job.released[rank] = 1;
        if (lost.empty()) {
          lost = known ? fmt::format("its share of {} no longer fits the node's configuration",
                                     topology_.NodeName(g.node))
                       : "a node of its gang is no longer configured";
        }
        continue;
      }
      if (!job.suspended) pool_.Commit({&g, 1});
      NodeRuntime& runtime = nodes_[static_cast<std::size_t>(g.node)];
      runtime.jobs.insert(job.id);
      if (!runtime.registered) {
        runtime.awaited = true;
        runtime.last_heartbeat = now;
      }
    }
    if (!lost.empty() && job.state == JobState::kRunning) {
      job.exit_code = 1;
      job.reason = lost;
      Apply(job, JobEvent::kNodeLost, now, effects);
    } else if (AllReleased(job)) {
      Apply(job, job.state == JobState::kRunning ? JobEvent::kNodeLost : JobEvent::kAllReleased,
            now, effects);
    }
  }
  for (NodeId n = 0; n < topology_.NodeCount(); ++n) UpdateCondition(n);
  NeedPass();
}

NodeView Engine::ViewNode(NodeId node) const {
  const NodeRuntime& runtime = nodes_[static_cast<std::size_t>(node)];
  NodeView view;
  view.reason = runtime.down ? runtime.down_reason : runtime.drain_reason;
  view.jobs.assign(runtime.jobs.begin(), runtime.jobs.end());
  if (runtime.down) {
    view.status = NodeStatus::kDown;
  } else if (!runtime.registered) {
    view.status = NodeStatus::kUnknown;
  } else if (runtime.drain) {
    view.status = runtime.jobs.empty() ? NodeStatus::kDrained : NodeStatus::kDraining;
  } else if (pool_.IsIdle(node)) {
    view.status = NodeStatus::kIdle;
  } else {
    const alloc::NodeFree& free = pool_.Free(node);
    view.status = free.cpus == 0 || (pool_.Capacity(node).gpus > 0 && free.gpus == 0)
                      ? NodeStatus::kAllocated
                      : NodeStatus::kMixed;
  }
  return view;
}

absl::Status Engine::CheckInvariants() const {
  struct Used {
    int cpus = 0;
    std::int64_t memory_mb = 0;
    std::uint64_t gpus = 0;
  };
  std::vector<Used> used(static_cast<std::size_t>(topology_.NodeCount()));
  // Every job is in the index of its state, and the indexes hold nothing else.
  std::size_t indexed = 0;
  for (const auto& [id, job] : jobs_) {
    const bool in_pending = pending_.contains(&job);
    const bool in_active = active_.contains(&job);
    const bool in_finished = finished_.contains({job.end_time, id});
    const bool want_pending = job.state == JobState::kPending;
    const bool want_active = job.state == JobState::kRunning || job.state == JobState::kCompleting;
    if (in_pending != want_pending || in_active != want_active ||
        in_finished != (!want_pending && !want_active)) {
      return absl::InternalError(fmt::format("job {} ({}) is in the wrong state index", id,
                                             JobStateName(job.state)));
    }
    ++indexed;
  }
  if (indexed != pending_.size() + active_.size() + finished_.size()) {
    return absl::InternalError("a state index holds a job the engine no longer has");
  }
  std::map<GangShape, int> shapes;
  for (const Job* job : pending_) ++shapes[ShapeOf(job->gang)];
  if (shapes != pending_shapes_) {
    return absl::InternalError("the pending jobs' gang shapes are not those counted");
  }
  for (const auto& [id, job] : jobs_) {
    if (job.suspended) continue;  // its grants are lent to its preemptor
    if (job.state == JobState::kPending || IsFinished(job.state)) {
      if (!job.placement.grants.empty() && job.state == JobState::kPending) {
        return absl::InternalError(fmt::format("pending job {} holds nodes", id));
      }
      continue;
    }
    if (static_cast<int>(job.placement.grants.size()) != job.gang.nodes) {
      return absl::InternalError(fmt::format("job {} holds {} nodes of {}", id,
                                             job.placement.grants.size(), job.gang.nodes));
    }
    for (std::size_t rank = 0; rank < job.placement.grants.size(); ++rank) {
      if (job.released[rank] != 0) continue;
      const alloc::NodeGrant& g = job.placement.grants[rank];
      Used& u = used[static_cast<std::size_t>(g.node)];
      if ((u.gpus & g.gpus) != 0) {
        return absl::InternalError(fmt::format("gpu of {} allocated twice (job {})",
                                               topology_.NodeName(g.node), id));
      }
      if (job.state == JobState::kRunning && std::popcount(g.gpus) < job.gang.gpus_per_node) {
        return absl::InternalError(fmt::format("job {} holds too few gpus", id));
      }
      u.cpus += g.cpus;
      u.memory_mb += g.memory_mb;
      u.gpus |= g.gpus;
    }
  }
  for (NodeId n = 0; n < topology_.NodeCount(); ++n) {
    const Used& u = used[static_cast<std::size_t>(n)];
    const alloc::NodeCapacity& c = pool_.Capacity(n);
    const alloc::NodeFree& f = pool_.Free(n);
    if (f.cpus != c.cpus - u.cpus || f.memory_mb != c.memory_mb - u.memory_mb ||
        f.gpus != (alloc::AllGpus(c.gpus) & ~u.gpus)) {
      return absl::InternalError(
          fmt::format("node {}: free resources disagree with the jobs holding it",
                      topology_.NodeName(n)));
    }
  }
  return absl::OkStatus();
}

}  // namespace cohort
