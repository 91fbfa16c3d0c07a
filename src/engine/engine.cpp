// SPDX-License-Identifier: Apache-2.0
// The engine's facade: each call goes to the part that owns what it changes
// (src/engine/engine_core.h lists them).
#include "cohort/engine/engine.h"

#include <algorithm>
#include <bit>
#include <map>

#include <fmt/format.h>

#include "cohort/check.h"
#include "cohort/fmt_absl.h"
#include "cohort/plugin.h"
#include "engine/account_admin.h"
#include "engine/engine_core.h"
#include "engine/steps.h"

namespace cohort {
namespace {

// The default QOS exists whether or not a QOSName= line declares it.
config::ClusterConfig WithDefaultQos(config::ClusterConfig config) {
  if (std::none_of(config.qos.begin(), config.qos.end(),
                   [&](const config::QosSpec& q) { return q.name == config.default_qos; })) {
    config::QosSpec implicit;
    implicit.name = config.default_qos;
    config.qos.push_back(implicit);
  }
  return config;
}

// Whether a restored grant's node is still configured and still has what
// the grant holds free.
bool StillFits(const topology::Topology& topology, const alloc::NodePool& pool,
               const alloc::NodeGrant& g) {
  if (g.node < 0 || g.node >= topology.NodeCount()) return false;
  const alloc::NodeFree& free = pool.Free(g.node);
  return free.cpus >= g.cpus && free.memory_mb >= g.memory_mb && (free.gpus & g.gpus) == g.gpus;
}

// The policies the configuration chooses; the shell checked the choice when
// it loaded the files (shell::LoadCluster), so a bad one here is a bug.
plugin::PluginSet PluginsOf(const config::ClusterConfig& config) {
  absl::StatusOr<plugin::PluginSet> plugins = plugin::MakePlugins(config.plugins);
  COHORT_CHECK(plugins.ok(), "the plugin choice was validated before the engine was built");
  return *std::move(plugins);
}

// A job's sub-state agrees with its state and with the data that goes with
// it: a preemption deadline while preempting, a suspension time while
// suspended, and a pending reason that names its hold.
absl::Status CheckStatus(const Job& job) {
  if (!IsValid(StatusOf(job))) {
    return absl::InternalError(fmt::format("job {} is {}, a status no job can have", job.id,
                                           JobStatusName(StatusOf(job))));
  }
  if ((job.sub == JobSubstate::kPreempting) != (job.preemption.deadline.count() != 0)) {
    return absl::InternalError(fmt::format("job {} is {} with a preemption deadline of {} ms",
                                           job.id, JobStatusName(StatusOf(job)),
                                           job.preemption.deadline.count()));
  }
  if ((job.sub == JobSubstate::kSuspended) != (job.preemption.suspended_since.count() != 0)) {
    return absl::InternalError(fmt::format("job {} is {} with a suspension time of {} ms", job.id,
                                           JobStatusName(StatusOf(job)),
                                           job.preemption.suspended_since.count()));
  }
  const bool held_reason = job.wait.reason == PendingReason::kJobHeldUser ||
                           job.wait.reason == PendingReason::kJobHeldAdmin;
  if (job.state == JobState::kPending && held_reason && !IsHeld(job)) {
    return absl::InternalError(fmt::format("job {} is {} but waits as {}", job.id,
                                           JobStatusName(StatusOf(job)),
                                           PendingReasonName(job.wait.reason)));
  }
  return absl::OkStatus();
}

// A job's running steps hold only what its allocation holds, never one CPU
// or GPU twice, and only while the job runs or stops.
absl::Status CheckSteps(const Job& job) {
  alloc::StepLedger ledger(job.run.placement.grants, job.gang.tasks_per_node,
                           job.gang.cpus_per_task, job.gang.overcommit);
  for (const JobStep& step : job.run.steps) {
    if (step.id < FirstStep(job) || step.id >= job.run.next_step ||
        step.node_exits.size() != step.placement.nodes.size()) {
      return absl::InternalError(
          fmt::format("job {} has step {}, next is {}", job.id, step.id, job.run.next_step));
    }
    if (step.state != StepState::kRunning) continue;
    if (job.state != JobState::kRunning && job.state != JobState::kCompleting) {
      return absl::InternalError(fmt::format("job {} is {} with step {} running", job.id,
                                             JobStateName(job.state), step.id));
    }
    if (absl::Status held = ledger.Hold(step.placement); !held.ok()) {
      return absl::InternalError(fmt::format("step {}.{}: {}", job.id, step.id, held.message()));
    }
  }
  return absl::OkStatus();
}

}  // namespace

namespace engine {

EngineCore::EngineCore(const config::ClusterConfig& cluster, const topology::Topology& tree,
                       alloc::NodePool nodes_pool)
    : config(WithDefaultQos(cluster)),
      plugins(PluginsOf(config)),
      topology(tree),
      pool(std::move(nodes_pool)),
      allocator(tree, plugins.allocator),
      priority(config, tree, plugins.queue_order),
      imex(config.switch_type == "nvidia_imex" ? config.imex.channel_count : 0),
      life({tree, pool, book, triggers, priority, imex, config.imex.per_segment,
            config.max_batch_requeue, config.requeue_backoff}),
      admission({config, tree, pool, plugins.admission, book, triggers, life, priority.Usage(),
                 reservations}),
      preemption({config, tree, pool, allocator, book, triggers, priority, life}),
      nodes({config, tree, pool, book, triggers, life}),
      planner({config, pool, allocator, book, triggers, priority, life, admission, preemption,
               reservations, tree}) {
  // A victim's rank that dies of the preemption warning was preempted, not
  // failed: Preemption, above Lifecycle, says so.
  life.OnSignalledExit([this](Job& job, NodeId node, int signal, Millis now, Effects& effects) {
    return preemption.EndedOnWarning(job, node, signal, now, effects);
  });
  // No agent has spoken yet: nothing may land anywhere.
  for (NodeId n = 0; n < tree.NodeCount(); ++n) nodes.UpdateCondition(n);
}

}  // namespace engine

std::string_view NodeStatusName(NodeStatus status) {
  switch (status) {
    case NodeStatus::kUnknown:
      return "UNKNOWN";
    case NodeStatus::kIdle:
      return "IDLE";
    case NodeStatus::kMixed:
      return "MIXED";
    case NodeStatus::kAllocated:
      return "ALLOCATED";
    case NodeStatus::kDraining:
      return "DRAINING";
    case NodeStatus::kDrained:
      return "DRAINED";
    case NodeStatus::kDown:
      return "DOWN";
  }
  return "UNKNOWN";
}

Engine::Engine(const config::ClusterConfig& config, const topology::Topology& topology,
               alloc::NodePool pool)
    : core_(std::make_unique<engine::EngineCore>(config, topology, std::move(pool))) {}

Engine::~Engine() = default;
Engine::Engine(Engine&&) noexcept = default;
Engine& Engine::operator=(Engine&&) noexcept = default;

absl::StatusOr<JobId> Engine::Submit(JobRequest request, Millis now, Effects& effects) {
  engine::EngineCore& core = *core_;
  absl::StatusOr<Job> resolved = core.admission.Resolve(std::move(request));
  if (!resolved.ok()) return resolved.status();
  // Refuse what can never run (the allocator remembers the answer by shape).
  const alloc::PlacementResult probe = core.allocator.Feasible(resolved->gang, core.pool);
  if (probe.outcome == alloc::Outcome::kInfeasible) {
    return absl::FailedPreconditionError(
        fmt::format("the job can never run here: {}", probe.reason));
  }
  Job job = *std::move(resolved);
  if (absl::Status s = core.admission.CheckSubmit(job, now); !s.ok()) return s;
  if (absl::Status s = core.admission.CheckQueueing(job); !s.ok()) return s;
  job.id = core.book.TakeId();
  job.submit_time = now;
  job.wait.eligible_time = now;
  job.wait.reason = job.request.hold ? PendingReason::kJobHeldUser : PendingReason::kNone;
  job.reason = PendingReasonName(job.wait.reason);
  job.wait.dependency_left = job.request.dependency;
  if (!job.request.array.tasks.empty()) {
    job.array.job_id = job.id;
    job.array.pending = job.request.array.tasks;
  }
  // A new job enters the table pending, held if it asked.
  const JobSubstate sub = job.request.hold ? JobSubstate::kHeldUser : JobSubstate::kNone;
  Job& queued = core.book.Add(std::move(job), sub, effects);
  Job* const ranked[] = {&queued};
  core.priority.Rank(ranked, core.book, now);
  core.triggers.Submitted(queued);
  engine::Lifecycle::Changed(queued, effects);
  return queued.id;
}

absl::StatusOr<Engine::Preview> Engine::TestSubmit(const JobRequest& request, Millis now) {
  engine::EngineCore& core = *core_;
  absl::StatusOr<Job> resolved = core.admission.Resolve(request);
  if (!resolved.ok()) return resolved.status();
  if (absl::Status s = core.admission.CheckSubmit(*resolved, now); !s.ok()) return s;
  const alloc::PlacementResult result = core.allocator.Place(resolved->gang, core.pool);
  Preview preview;
  switch (result.outcome) {
    case alloc::Outcome::kPlaced:
      preview.would_run_on = engine::NodeNames(core.topology, result.placement);
      break;
    case alloc::Outcome::kBusy:
      preview.reason = result.reason;
      break;
    case alloc::Outcome::kInfeasible:
      return absl::FailedPreconditionError(
          fmt::format("the job can never run here: {}", result.reason));
  }
  return preview;
}

policy::PriorityFactors Engine::PriorityOf(const Job& job, Millis now) const {
  return core_->priority.Of(job, now);
}
const policy::FairShare& Engine::Usage() const { return core_->priority.Usage(); }

absl::Status Engine::NodeRegistered(NodeId node, const NodeReport& report, Millis now,
                                    Effects& effects) {
  return core_->nodes.Registered(node, report, now, effects);
}
void Engine::NodeHeartbeat(NodeId node, Millis now) { core_->nodes.Heartbeat(node, now); }
void Engine::RankExited(JobId job, NodeId node, int exit_code, int signal, Millis now,
                        Effects& effects) {
  core_->life.RankExited(job, node, exit_code, signal, now, effects);
}
void Engine::LaunchFailed(JobId job, NodeId node, const std::string& reason, Millis now,
                          Effects& effects) {
  core_->life.LaunchFailed(job, node, reason, now, effects);
}
bool Engine::Placed(JobId job, NodeId node) const {
  const Job* found = core_->book.Find(job);
  return found != nullptr && engine::NodeRankOf(*found, node) >= 0;
}

void Engine::JobReleased(JobId job, NodeId node, Millis now, Effects& effects) {
  core_->life.JobReleased(job, node, now, effects);
}
absl::Status Engine::Drain(NodeId node, const std::string& reason, const Caller& caller, Millis now,
                           Effects& effects) {
  return core_->nodes.Drain(node, reason, caller, now, effects);
}
absl::Status Engine::Down(NodeId node, const std::string& reason, const Caller& caller, Millis now,
                          Effects& effects) {
  return core_->nodes.Down(node, reason, caller, now, effects);
}
absl::Status Engine::Resume(NodeId node, const Caller& caller, Effects& effects) {
  return core_->nodes.Resume(node, caller, effects);
}
absl::Status Engine::SetPartitionState(const std::string& partition, config::PartitionState state,
                                       const Caller& caller, Millis now, Effects& effects) {
  absl::StatusOr<bool> starts = core_->admission.SetState(partition, state, caller, now);
  if (!starts.ok()) return starts.status();
  effects.changed_partitions = true;
  if (*starts) core_->triggers.Note(engine::Trigger::kPartitionUp);
  return absl::OkStatus();
}

absl::StatusOr<std::vector<AccountAudit>> Engine::UpdateAccounts(const AccountUpdate& update,
                                                                 const Caller& caller, Millis now,
                                                                 Effects& effects) {
  engine::EngineCore& core = *core_;
  if (!caller.IsOperator()) {
    return absl::PermissionDeniedError(
        "only root and Operators= (in cohort.conf) may change accounts and users; sacctmgr show "
        "reads them");
  }
  const auto queued = [&](auto matches) {
    std::size_t n = 0;
    for (const auto* index : {&core.book.Pending(), &core.book.Active()}) {
      for (const Job* job : *index) n += matches(*job) ? 1 : 0;
    }
    return n;
  };
  const engine::InUse in_use{
      .by_account =
          [&](const std::string& account) {
            return queued([&](const Job& job) { return job.request.account == account; });
          },
      .by_qos =
          [&](const std::string& qos) {
            return queued([&](const Job& job) { return job.qos == qos; });
          },
  };
  absl::StatusOr<std::vector<AccountAudit>> audit =
      engine::ApplyAccountUpdate(update, core.config, in_use);
  if (!audit.ok()) return audit.status();
  for (AccountAudit& entry : *audit) {
    entry.time = now;
    entry.uid = caller.uid;
    core.audit.push_back(entry);
  }
  if (core.audit.size() > kAuditKept) {
    core.audit.erase(core.audit.begin(), core.audit.begin() + static_cast<std::ptrdiff_t>(
                                                                  core.audit.size() - kAuditKept));
  }
  core.admission.AccountsChanged();
  core.priority.QosChanged();
  core.triggers.Note(engine::Trigger::kAccounts);
  effects.changed_accounts = true;
  return audit;
}

AccountingState Engine::Accounting() const {
  AccountingState state = engine::ManagedPart(core_->config);
  state.audit = core_->audit;
  return state;
}

const std::vector<AccountAudit>& Engine::AccountsAudit() const { return core_->audit; }

void Engine::Tick(Millis now, Effects& effects) {
  engine::EngineCore& core = *core_;
  core.nodes.Tick(now, effects);
  if (core.reservations.Roll(now)) {
    core.triggers.Note(engine::Trigger::kReservations);
    effects.changed_reservations = true;
  }
  PlaceReservationsAtStart(now, effects);
  // A reservation's start or end may let a waiting job start.
  if (const std::optional<Millis> next = core.reservations.NextChange(now)) {
    core.triggers.WakeAt(*next);
  }
  core.priority.ChargeActive(core.book, now);
  core.planner.Tick(now);
  core.preemption.Tick(now, effects);
  core.life.Tick(now, effects);
  std::vector<JobId> forgotten = core.book.ForgetFinished(now, kFinishedRetention);
  effects.forgotten_jobs.insert(effects.forgotten_jobs.end(), forgotten.begin(), forgotten.end());
  COHORT_DCHECK(CheckInvariants().ok(), "the engine's invariants hold after a tick");
}

namespace {
template <class... Calls>
struct Overloaded : Calls... {
  using Calls::operator()...;
};
template <class... Calls>
Overloaded(Calls...) -> Overloaded<Calls...>;
}  // namespace

absl::Status Engine::Apply(const EngineInput& input, Millis now, Effects& effects,
                           JobId* submitted) {
  return std::visit(
      Overloaded{
          [&](const input::Submit& in) -> absl::Status {
            absl::StatusOr<JobId> id = Submit(in.request, now, effects);
            if (id.ok() && submitted != nullptr) *submitted = *id;
            return id.status();
          },
          [&](const input::Cancel& in) {
            return Cancel(in.job, in.signal, in.caller, now, effects);
          },
          [&](const input::Hold& in) { return Hold(in.job, in.caller, now, effects); },
          [&](const input::Release& in) { return Release(in.job, in.caller, now, effects); },
          [&](const input::Requeue& in) { return Requeue(in.job, in.caller, now, effects); },
          [&](const input::CheckpointDone& in) {
            return CheckpointDone(in.job, in.caller, now, effects);
          },
          [&](const input::NodeRegistered& in) {
            return NodeRegistered(in.node, in.report, now, effects);
          },
          [&](const input::Heartbeat& in) {
            NodeHeartbeat(in.node, now);
            return absl::OkStatus();
          },
          [&](const input::Drain& in) {
            return Drain(in.node, in.reason, in.caller, now, effects);
          },
          [&](const input::Down& in) { return Down(in.node, in.reason, in.caller, now, effects); },
          [&](const input::Resume& in) { return Resume(in.node, in.caller, effects); },
          [&](const input::RankExited& in) {
            RankExited(in.job, in.node, in.exit_code, in.signal, now, effects);
            return absl::OkStatus();
          },
          [&](const input::JobReleased& in) {
            JobReleased(in.job, in.node, now, effects);
            return absl::OkStatus();
          },
          [&](const input::LaunchFailed& in) {
            LaunchFailed(in.job, in.node, in.reason, now, effects);
            return absl::OkStatus();
          },
          [&](const input::StartStep& in) {
            return StartStep(in.job, in.request, in.caller, now, effects).status();
          },
          [&](const input::SignalStep& in) {
            return SignalStep(in.job, in.step, in.signal, in.caller, now, effects);
          },
          [&](const input::StepRankExited& in) {
            StepRankExited(in.job, in.step, in.node, in.exit_code, in.signal, now, effects);
            return absl::OkStatus();
          },
          [&](const input::EndAllocation& in) {
            return EndAllocation(in.job, in.exit_code, in.caller, now, effects);
          },
          [&](const input::Tick&) {
            Tick(now, effects);
            return absl::OkStatus();
          },
          [&](const input::Schedule&) {
            Schedule(now, effects);
            return absl::OkStatus();
          },
      },
      input);
}

void Engine::Schedule(Millis now, Effects& effects) {
  core_->planner.Schedule(now, effects);
  // Debug builds check the whole state after every pass (the unit tests
  // check it after every event); a pass already costs what the queue does.
  COHORT_DCHECK(CheckInvariants().ok(), "the engine's invariants hold after a pass");
}
bool Engine::ScheduleNeeded() const { return core_->triggers.PassNeeded(); }
std::string_view Engine::LastPassKind() const { return core_->planner.LastPassKind(); }
std::vector<std::pair<std::string_view, std::uint64_t>> Engine::PassTriggerCounts() const {
  std::vector<std::pair<std::string_view, std::uint64_t>> out;
  const auto& counts = core_->triggers.Counts();
  for (std::size_t i = 0; i < counts.size(); ++i) {
    out.emplace_back(engine::TriggerName(static_cast<engine::Trigger>(i)), counts[i]);
  }
  return out;
}

const Job* Engine::FindJob(JobId id) const { return core_->book.Find(id); }
const std::map<JobId, Job>& Engine::Jobs() const { return core_->book.All(); }
std::vector<JobId> Engine::Lookup(JobRef ref) const { return core_->book.Lookup(ref); }
std::vector<JobId> Engine::PendingOrder() const { return core_->planner.PendingOrder(); }
std::size_t Engine::PendingCount() const { return core_->book.Pending().size(); }
int Engine::QueuePosition(JobId id) const {
  const std::vector<JobId> order = PendingOrder();
  const auto it = std::find(order.begin(), order.end(), id);
  return it == order.end() ? 0 : static_cast<int>(it - order.begin()) + 1;
}
NodeView Engine::ViewNode(NodeId node) const { return core_->nodes.View(node); }
NodeAdmin Engine::Admin(NodeId node) const { return core_->nodes.Admin(node); }
config::PartitionState Engine::PartitionState(const config::PartitionSpec& partition) const {
  return core_->admission.StateOf(partition);
}
const PartitionAdmin* Engine::PartitionOverride(std::string_view partition) const {
  return core_->admission.OverrideOf(partition);
}
std::vector<PartitionAdmin> Engine::PartitionOverrides() const {
  return core_->admission.Overrides();
}
JobId Engine::NextId() const { return core_->book.NextId(); }
const alloc::NodePool& Engine::Pool() const { return core_->pool; }
const topology::Topology& Engine::GetTopology() const { return core_->topology; }
const config::ClusterConfig& Engine::Config() const { return core_->config; }

void Engine::Restore(SavedState state, Millis now, Effects& effects) {
  engine::EngineCore& core = *core_;
  COHORT_CHECK(core.book.All().empty() && core.book.NextId() == 1,
               "Restore must come before any other call");
  core.book.ReserveIdsBelow(state.next_id);
  // The accounts first: jobs are admitted again against them below.
  core.audit = std::move(state.accounting.audit);
  for (std::string& dropped : engine::MergeManaged(state.accounting, core.config)) {
    core.audit.push_back(
        {.time = now, .uid = 0, .action = "Drop", .where = "restart", .info = std::move(dropped)});
  }
  core.admission.AccountsChanged();
  core.priority.QosChanged();
  core.reservations.Restore(std::move(state.reservations));
  core.nodes.RestoreAdmin(state.nodes);
  core.admission.RestoreOverrides(state.partitions);
  core.priority.Usage().Restore(state.usage);
  for (SavedJob& saved : state.jobs) {
    Job* restored = core.book.Restore(std::move(saved));
    if (restored == nullptr) continue;
    Job& job = *restored;
    job.cache.charged_until = now;
    // A step recorded before steps kept their port had its job's moved up
    // by its id, which its ranks were given then.
    for (JobStep& step : job.run.steps) {
      if (step.master_port == 0)
        step.master_port = engine::StepPortBase(job.run.master_port, step.id);
    }
    // The store keeps the reason's name; the engine decides by the enum.
    if (job.state == JobState::kPending) {
      job.wait.reason = ParsePendingReason(job.reason).value_or(PendingReason::kNone);
    }
    const bool active = engine::IsActive(job);
    absl::StatusOr<Job> resolved = core.admission.Resolve(job.request);
    if (resolved.ok()) {
      // Indexed again with today's gang (its shape, its --switches wait).
      const auto adopt = [&](Job& j) {
        j.gang = resolved->gang;
        j.priority_tier = resolved->priority_tier;
        j.qos = resolved->qos;
      };
      if (job.state == JobState::kPending) {
        core.book.Reindex(job, [&](Job& j) {
          adopt(j);
          j.time_limit = resolved->time_limit;
        });
      } else {
        adopt(job);
      }
    } else if (job.state == JobState::kPending) {
      job.run.exit_code = 1;
      job.reason = fmt::format("no longer valid after a configuration change: {}",
                               resolved.status().message());
      core.life.Apply(job, JobEvent::kInvalidated, now, effects);
      continue;
    } else if (active) {
      // Its partition changed; keep what the running gang holds.
      job.gang.nodes = static_cast<int>(job.run.placement.grants.size());
      job.gang.tasks_per_node = job.request.tasks_per_node;
      job.gang.cpus_per_task = job.request.cpus_per_task;
      job.gang.overcommit = job.request.overcommit;
      job.gang.gpus_per_node = job.request.gpus_per_node;
      job.gang.memory_mb_per_node = job.request.memory_mb;
    }
    if (!active) continue;
    const std::size_t size = job.run.placement.grants.size();
    job.run.released.resize(size, 0);
    job.run.exited_ok.resize(size, 0);
    std::string lost;
    for (std::size_t rank = 0; rank < size; ++rank) {
      if (job.run.released[rank] != 0) continue;
      alloc::NodeGrant& g = job.run.placement.grants[rank];
      // Records keep what each node was granted; the group hold follows
      // from the job's --exclusive=topo.
      g.holds_group = job.gang.exclusivity == alloc::Exclusivity::kTopo;
      const bool known = g.node >= 0 && g.node < core.topology.NodeCount();
      if (!StillFits(core.topology, core.pool, g)) {
        job.run.released[rank] = 1;
        if (lost.empty()) {
          lost = known ? fmt::format("its share of {} no longer fits the node's configuration",
                                     core.topology.NodeName(g.node))
                       : "a node of its gang is no longer configured";
        }
        continue;
      }
      if (!IsSuspended(job)) core.pool.Commit({&g, 1});
      core.book.Holds(g.node, job.id);
      engine::NodeRuntime& runtime = core.nodes.At(g.node);
      if (!runtime.registered) {
        runtime.awaited = true;
        runtime.last_heartbeat = now;
      }
    }
    // Its spares: held again where they still fit, else gone.
    std::erase_if(job.run.spares, [&](alloc::NodeGrant& g) {
      g.holds_group = job.gang.exclusivity == alloc::Exclusivity::kTopo;
      if (job.state != JobState::kRunning || !StillFits(core.topology, core.pool, g) ||
          engine::NodeRankOf(job, g.node) >= 0) {
        return true;
      }
      core.pool.Commit({&g, 1});
      core.book.Holds(g.node, job.id);
      return false;
    });
    if (job.state != JobState::kRunning) {
      job.run.lost_ranks.clear();
      job.run.repair_at = Millis{0};
    }
    if (!core.life.RestoreImexChannels(job) && lost.empty()) {
      lost = fmt::format(
          "its IMEX channel is beyond SwitchParameters=imex_channel_count={} or another job's",
          core.imex.Count());
    }
    if (!lost.empty() && job.state == JobState::kRunning) {
      job.run.exit_code = 1;
      job.reason = lost;
      core.life.Apply(job, JobEvent::kNodeLost, now, effects);
    } else if (engine::AllReleased(job)) {
      core.life.Apply(
          job, job.state == JobState::kRunning ? JobEvent::kNodeLost : JobEvent::kAllReleased, now,
          effects);
    }
  }
  for (NodeId n = 0; n < core.topology.NodeCount(); ++n) core.nodes.UpdateCondition(n);
  core.triggers.Note(engine::Trigger::kRestored);
  COHORT_DCHECK(CheckInvariants().ok(), "a restored engine's invariants hold");
}

absl::Status Engine::CheckInvariants() const {
  const engine::EngineCore& core = *core_;
  struct Used {
    int cpus = 0;
    std::int64_t memory_mb = 0;
    std::uint64_t gpus = 0;
  };
  std::vector<Used> used(static_cast<std::size_t>(core.topology.NodeCount()));
  // --exclusive=topo: by group, the grants that hold it and the job holding it.
  std::vector<int> holds(core.topology.Groups().size(), 0);
  std::vector<JobId> holder(core.topology.Groups().size(), 0);
  if (absl::Status indexes = core.book.CheckIndexes(); !indexes.ok()) return indexes;
  // Counts what a job's grant holds: its node's resources, its group's hold.
  const auto take = [&](const alloc::NodeGrant& g, JobId id) {
    Used& u = used[static_cast<std::size_t>(g.node)];
    u.cpus += g.cpus;
    u.memory_mb += g.memory_mb;
    u.gpus |= g.gpus;
    const topology::GroupId group = core.topology.GroupOf(g.node);
    if (g.holds_group && group != topology::kNone) {
      ++holds[static_cast<std::size_t>(group)];
      holder[static_cast<std::size_t>(group)] = id;
    }
  };
  std::map<int, JobId> channels;  // IMEX channels of active jobs: each held, by one job
  for (const auto& [id, job] : core.book.All()) {
    if (absl::Status status = CheckStatus(job); !status.ok()) return status;
    if (absl::Status steps = CheckSteps(job); !steps.ok()) return steps;
    if (job.state != JobState::kPending && !IsFinished(job.state)) {
      for (const int channel : job.run.imex_channels) {
        if (!core.imex.Held(channel) || !channels.emplace(channel, id).second) {
          return absl::InternalError(
              fmt::format("IMEX channel {} of job {} is {}", channel, id,
                          core.imex.Held(channel) ? fmt::format("also job {}'s", channels[channel])
                                                  : std::string("not held")));
        }
      }
    }
    if (job.state != JobState::kPending && !IsFinished(job.state)) {
      // Its spares stay held, suspended or not.
      for (const alloc::NodeGrant& g : job.run.spares) {
        Used& u = used[static_cast<std::size_t>(g.node)];
        if ((u.gpus & g.gpus) != 0 || engine::NodeRankOf(job, g.node) >= 0) {
          return absl::InternalError(fmt::format("spare {} of job {} is allocated twice",
                                                 core.topology.NodeName(g.node), id));
        }
        take(g, id);
      }
    } else if (!job.run.spares.empty()) {
      return absl::InternalError(
          fmt::format("job {} holds spares while {}", id, JobStateName(job.state)));
    }
    if (IsSuspended(job)) continue;  // its grants are lent to its preemptor
    if (job.state == JobState::kPending || IsFinished(job.state)) {
      if (!job.run.placement.grants.empty() && job.state == JobState::kPending) {
        return absl::InternalError(fmt::format("pending job {} holds nodes", id));
      }
      continue;
    }
    if (static_cast<int>(job.run.placement.grants.size()) != job.gang.nodes) {
      return absl::InternalError(fmt::format("job {} holds {} nodes of {}", id,
                                             job.run.placement.grants.size(), job.gang.nodes));
    }
    for (std::size_t rank = 0; rank < job.run.placement.grants.size(); ++rank) {
      if (job.run.released[rank] != 0) continue;
      const alloc::NodeGrant& g = job.run.placement.grants[rank];
      Used& u = used[static_cast<std::size_t>(g.node)];
      if ((u.gpus & g.gpus) != 0) {
        return absl::InternalError(
            fmt::format("gpu of {} allocated twice (job {})", core.topology.NodeName(g.node), id));
      }
      if (job.state == JobState::kRunning && std::popcount(g.gpus) < job.gang.gpus_per_node) {
        return absl::InternalError(fmt::format("job {} holds too few gpus", id));
      }
      take(g, id);
    }
  }
  // A held group serves its holder alone.
  for (const auto& [id, job] : core.book.All()) {
    if (IsSuspended(job) || job.state == JobState::kPending || IsFinished(job.state)) continue;
    for (std::size_t rank = 0; rank < job.run.placement.grants.size(); ++rank) {
      if (job.run.released[rank] != 0) continue;
      const topology::GroupId group = core.topology.GroupOf(job.run.placement.grants[rank].node);
      if (group == topology::kNone) continue;
      const auto at = static_cast<std::size_t>(group);
      if (holds[at] > 0 && holder[at] != id) {
        return absl::InternalError(
            fmt::format("job {} has a node in a group held by job {}", id, holder[at]));
      }
    }
  }
  for (std::size_t group = 0; group < holds.size(); ++group) {
    if ((holds[group] > 0) != core.pool.GroupHeld(static_cast<topology::GroupId>(group))) {
      return absl::InternalError(fmt::format("group {} is {} by the pool but {} by the jobs", group,
                                             holds[group] > 0 ? "not held" : "held",
                                             holds[group] > 0 ? "held" : "not held"));
    }
  }
  if (static_cast<int>(channels.size()) != core.imex.Count() - core.imex.FreeCount()) {
    return absl::InternalError(fmt::format("{} IMEX channels held but {} by active jobs",
                                           core.imex.Count() - core.imex.FreeCount(),
                                           channels.size()));
  }
  for (NodeId n = 0; n < core.topology.NodeCount(); ++n) {
    const Used& u = used[static_cast<std::size_t>(n)];
    const alloc::NodeCapacity& c = core.pool.Capacity(n);
    const alloc::NodeFree& f = core.pool.Free(n);
    if (f.cpus != c.cpus - u.cpus || f.memory_mb != c.memory_mb - u.memory_mb ||
        f.gpus != (alloc::AllGpus(c.gpus) & ~u.gpus)) {
      return absl::InternalError(fmt::format(
          "node {}: free resources disagree with the jobs holding it", core.topology.NodeName(n)));
    }
  }
  return absl::OkStatus();
}

}  // namespace cohort
