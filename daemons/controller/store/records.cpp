// SPDX-License-Identifier: Apache-2.0
#include "store/records.h"

#include <algorithm>
#include <bit>
#include <limits>

#include <fmt/format.h>

#include "cohort/fmt_absl.h"
#include "cohort/text/hostlist.h"
#include "store/reservation_records.h"
#include "store/wire.h"

namespace cohort::controller {
namespace {

// The engine's enums a record keeps as numbers: what each number means in
// a database already written. Append new values; never reorder or remove.
static_assert(static_cast<int>(EndCause::kNone) == 0 && static_cast<int>(EndCause::kSuccess) == 1 &&
                  static_cast<int>(EndCause::kRankFailed) == 2 &&
                  static_cast<int>(EndCause::kLaunchFailed) == 3 &&
                  static_cast<int>(EndCause::kCancelled) == 4 &&
                  static_cast<int>(EndCause::kTimeLimit) == 5 &&
                  static_cast<int>(EndCause::kNodeLost) == 6 &&
                  static_cast<int>(EndCause::kNodeLostRequeue) == 7 &&
                  static_cast<int>(EndCause::kPreemptRequeue) == 8 &&
                  static_cast<int>(EndCause::kRequeued) == 9,
              "JobRecord.cause stores EndCause by number: append, never reorder");
static_assert(static_cast<int>(StepState::kRunning) == 0 &&
                  static_cast<int>(StepState::kCompleted) == 1 &&
                  static_cast<int>(StepState::kFailed) == 2 &&
                  static_cast<int>(StepState::kCancelled) == 3,
              "StepRecord.state stores StepState by number: append, never reorder");
static_assert(static_cast<int>(alloc::StepSharing::kWholeNodes) == 0 &&
                  static_cast<int>(alloc::StepSharing::kExact) == 1 &&
                  static_cast<int>(alloc::StepSharing::kOverlap) == 2,
              "StepRecord.sharing stores StepSharing by number: append, never reorder");

// The largest MaxArraySize= accepts: a stored array is read whatever the
// setting is now.
constexpr int kMaxArraySizeEver = 4000001;

// The sub-state a record's flags give, for the state it was saved in.
JobSubstate SubstateOf(const v1::JobRecord& record, JobState state) {
  switch (state) {
    case JobState::kPending:
      if (record.held_by_operator()) return JobSubstate::kHeldAdmin;
      return record.held() ? JobSubstate::kHeldUser : JobSubstate::kNone;
    case JobState::kRunning:
      if (record.suspended()) return JobSubstate::kSuspended;
      return record.preemption().deadline_ms() != 0 ? JobSubstate::kPreempting : JobSubstate::kNone;
    case JobState::kCompleting:
      return record.suspended() ? JobSubstate::kSuspended : JobSubstate::kNone;
    default:
      return JobSubstate::kNone;
  }
}

// One mapping per group of the job: each writes its group's every field,
// and reads it back.

// Only where a rank's end was reported: older records have none.
void UsageToRecord(const TaskUsage& usage, v1::TaskUsageRecord& out) {
  out.set_rss_sum_kb(usage.rss_sum_kb);
  out.set_ranks(usage.ranks);
  out.set_gpu_util_max(usage.gpu_util_max);
  out.set_gpu_util_sum(usage.gpu_util_sum);
  out.set_gpu_ranks(usage.gpu_ranks);
  out.set_gpu_mem_max_mb(usage.gpu_mem_max_mb);
  out.set_gpu_mem_sum_mb(usage.gpu_mem_sum_mb);
  out.set_max_cpu_ms(usage.max_cpu_ms);
}

// A record's figures as they were written (AddRankUsage bounded them);
// negative counts, which it never wrote, read as none.
TaskUsage UsageFromRecord(std::int64_t max_rss_kb, std::int64_t cpu_ms,
                          const v1::TaskUsageRecord& r) {
  return {.max_rss_kb = max_rss_kb,
          .cpu_ms = cpu_ms,
          .max_cpu_ms = r.max_cpu_ms(),
          .rss_sum_kb = r.rss_sum_kb(),
          .ranks = std::max(r.ranks(), 0),
          .gpu_util_max = r.gpu_util_max(),
          .gpu_util_sum = r.gpu_util_sum(),
          .gpu_ranks = std::max(r.gpu_ranks(), 0),
          .gpu_mem_max_mb = r.gpu_mem_max_mb(),
          .gpu_mem_sum_mb = r.gpu_mem_sum_mb()};
}

void StepToRecord(const JobStep& step, v1::StepRecord& out) {
  out.set_id(step.id);
  for (std::size_t i = 0; i < step.placement.nodes.size(); ++i) {
    const alloc::StepNode& node = step.placement.nodes[i];
    v1::StepNodeRecord& n = *out.add_nodes();
    n.set_node_rank(node.node_rank);
    n.set_tasks(node.tasks);
    n.set_cpus(node.cpus);
    n.set_gpus(node.gpus);
    if (i < step.node_exits.size()) n.set_exited(step.node_exits[i]);
  }
  out.set_reason(step.reason);
  out.set_token(step.token);
  out.set_master_port(step.master_port);
  out.set_max_rss_kb(step.usage.max_rss_kb);
  out.set_cpu_ms(step.usage.cpu_ms);
  if (step.usage.ranks > 0) UsageToRecord(step.usage, *out.mutable_usage());
  out.set_tasks(step.placement.tasks);
  out.set_sharing(static_cast<int>(step.placement.sharing));
  out.set_state(static_cast<int>(step.state));
  out.set_start_time_ms(step.start_time.count());
  out.set_end_time_ms(step.end_time.count());
  out.set_ranks_exited(step.ranks_exited);
  out.set_exit_code(step.exit_code);
  out.set_exit_signal(step.exit_signal);
  out.set_stopping(step.stopping);
  out.set_cancelled(step.cancelled);
}

void RunToRecord(const JobRun& run, const topology::Topology& topology, v1::JobRunRecord& r) {
  r.set_cause(static_cast<int>(run.cause));
  r.set_start_time_ms(run.start_time.count());
  r.set_end_time_ms(run.end_time.count());
  r.set_attempt(run.attempt);
  r.set_exit_code(run.exit_code);
  r.set_exit_signal(run.exit_signal);
  for (std::size_t rank = 0; rank < run.placement.grants.size(); ++rank) {
    const alloc::NodeGrant& g = run.placement.grants[rank];
    v1::GrantRecord* out = r.add_grants();
    out->set_node(topology.NodeName(g.node));
    out->set_cpus(g.cpus);
    out->set_memory_mb(g.memory_mb);
    out->set_gpus(g.gpus);
    out->set_released(rank < run.released.size() && run.released[rank] != 0);
    out->set_ranks_ok(rank < run.exited_ok.size() ? run.exited_ok[rank] : 0);
  }
  r.set_master_port(run.master_port);
  r.set_warned_attempt(run.warned_attempt);
  for (const JobStep& step : run.steps) StepToRecord(step, *r.add_steps());
  r.set_next_step(run.next_step);
  r.set_own_max_rss_kb(run.own_usage.max_rss_kb);
  r.set_own_cpu_ms(run.own_usage.cpu_ms);
  if (run.own_usage.ranks > 0) UsageToRecord(run.own_usage, *r.mutable_own_usage());
  for (const int channel : run.imex_channels) r.add_imex_channels(channel);
  r.set_stopped(run.stopped);
  r.set_failure_restarts(run.failure_restarts);
  for (const alloc::NodeGrant& g : run.spares) {
    v1::GrantRecord* out = r.add_spares();
    out->set_node(topology.NodeName(g.node));
    out->set_cpus(g.cpus);
    out->set_memory_mb(g.memory_mb);
    out->set_gpus(g.gpus);
  }
  for (const int rank : run.lost_ranks) r.add_lost_ranks(rank);
  r.set_repair_at_ms(run.repair_at.count());
  r.set_lost_reason(run.lost_reason);
}

// The grants of a run and the placement's shape (for display and for the
// invariants). Nodes no longer in the topology become grants on
// topology::kNone.
void GrantsFromRecord(const v1::JobRunRecord& r, const topology::Topology& topology, JobRun& run) {
  std::vector<NodeId> nodes;
  for (const v1::GrantRecord& g : r.grants()) {
    const std::optional<NodeId> node = topology.FindNode(g.node());
    alloc::NodeGrant& grant = run.placement.grants.emplace_back();
    grant.node = node.value_or(topology::kNone);
    grant.cpus = g.cpus();
    grant.memory_mb = g.memory_mb();
    grant.gpus = g.gpus();
    run.released.push_back(g.released() ? 1 : 0);
    run.exited_ok.push_back(g.ranks_ok());
    if (node) nodes.push_back(*node);
  }
  alloc::Placement& placement = run.placement;
  for (const NodeId n : nodes) {
    if (topology.LeafOf(n) != topology::kNone) placement.leaves.push_back(topology.LeafOf(n));
    if (topology.GroupOf(n) != topology::kNone) placement.groups.push_back(topology.GroupOf(n));
  }
  for (auto* ids : {&placement.leaves, &placement.groups}) {
    std::sort(ids->begin(), ids->end());
    ids->erase(std::unique(ids->begin(), ids->end()), ids->end());
  }
  if (!nodes.empty()) {
    placement.domain = topology.LowestCommonSwitch(nodes);
    if (placement.domain != topology::kNone) {
      placement.level = topology.GetSwitch(placement.domain).level;
    }
  }
}

// One step of a run, refused when it could not have been the engine's: an
// unknown state or sharing, or an id outside first_step..next_step.
absl::StatusOr<JobStep> StepFromRecord(JobId id, const v1::StepRecord& s, int first_step,
                                       int next_step) {
  if (s.state() < 0 || s.state() > static_cast<int>(StepState::kCancelled) || s.sharing() < 0 ||
      s.sharing() > static_cast<int>(alloc::StepSharing::kOverlap) || s.id() < first_step ||
      s.id() >= next_step) {
    return absl::InvalidArgumentError(fmt::format(
        "job {}: step {} has state {}, sharing {} and next step {}, which no step can have", id,
        s.id(), s.state(), s.sharing(), next_step));
  }
  JobStep step;
  step.id = s.id();
  step.state = static_cast<StepState>(s.state());
  step.placement.sharing = static_cast<alloc::StepSharing>(s.sharing());
  step.placement.tasks = s.tasks();
  for (const v1::StepNodeRecord& n : s.nodes()) {
    step.placement.nodes.push_back(
        {.node_rank = n.node_rank(), .tasks = n.tasks(), .cpus = n.cpus(), .gpus = n.gpus()});
    step.node_exits.push_back(std::clamp(n.exited(), 0, std::max(n.tasks(), 0)));
  }
  step.reason = s.reason();
  step.token = s.token();
  step.master_port = s.master_port() >= 20000 && s.master_port() <= 39999 ? s.master_port() : 0;
  step.usage = UsageFromRecord(s.max_rss_kb(), s.cpu_ms(), s.usage());
  step.start_time = Millis(s.start_time_ms());
  step.end_time = Millis(s.end_time_ms());
  step.ranks_exited = s.ranks_exited();
  step.exit_code = s.exit_code();
  step.exit_signal = s.exit_signal();
  step.stopping = s.stopping();
  step.cancelled = s.cancelled();
  return step;
}

// The steps of a run, refused when they could not have been the engine's
// (StepFromRecord), or running steps hold more than the allocation has.
absl::Status StepsFromRecord(JobId id, const v1::JobRunRecord& r, int first_step, JobRun& run) {
  alloc::StepLedger ledger(run.placement.grants, 1, 1);
  run.next_step = std::max(r.next_step(), first_step);
  for (const v1::StepRecord& s : r.steps()) {
    absl::StatusOr<JobStep> step = StepFromRecord(id, s, first_step, run.next_step);
    if (!step.ok()) return step.status();
    run.steps.push_back(*std::move(step));
    if (run.steps.back().state != StepState::kRunning) continue;
    if (absl::Status held = ledger.Hold(run.steps.back().placement); !held.ok()) {
      return absl::InvalidArgumentError(
          fmt::format("job {}: step {}: {}", id, s.id(), held.message()));
    }
  }
  return absl::OkStatus();
}

absl::Status RunFromRecord(JobId id, const v1::JobRunRecord& r, const topology::Topology& topology,
                           int first_step, JobRun& run) {
  run.cause =
      static_cast<EndCause>(std::clamp(r.cause(), 0, static_cast<int>(EndCause::kRequeued)));
  run.start_time = Millis(r.start_time_ms());
  run.end_time = Millis(r.end_time_ms());
  run.attempt = std::max(r.attempt(), 1);
  run.exit_code = r.exit_code();
  run.exit_signal = r.exit_signal();
  GrantsFromRecord(r, topology, run);
  run.master_port = r.master_port();
  run.warned_attempt = r.warned_attempt();
  run.own_usage = UsageFromRecord(r.own_max_rss_kb(), r.own_cpu_ms(), r.own_usage());
  run.imex_channels.assign(r.imex_channels().begin(), r.imex_channels().end());
  run.stopped = r.stopped();
  run.failure_restarts = std::max(r.failure_restarts(), 0);
  for (const v1::GrantRecord& g : r.spares()) {
    // A spare no longer in the topology is gone (the engine drops it).
    const std::optional<NodeId> node = topology.FindNode(g.node());
    run.spares.push_back({.node = node.value_or(topology::kNone),
                          .cpus = g.cpus(),
                          .memory_mb = g.memory_mb(),
                          .gpus = g.gpus(),
                          .holds_group = false});
  }
  // Lost ranks must be ranks of the gang, released, each once.
  for (const int rank : r.lost_ranks()) {
    if (rank < 0 || static_cast<std::size_t>(rank) >= run.released.size() ||
        run.released[static_cast<std::size_t>(rank)] == 0 ||
        std::find(run.lost_ranks.begin(), run.lost_ranks.end(), rank) != run.lost_ranks.end()) {
      continue;
    }
    run.lost_ranks.push_back(rank);
  }
  run.repair_at = run.lost_ranks.empty() ? Millis{0} : Millis(r.repair_at_ms());
  run.lost_reason = r.lost_reason();
  return StepsFromRecord(id, r, first_step, run);
}

void PastToRecord(const PastAttempt& past, v1::PastAttemptRecord& r) {
  r.set_attempt(past.attempt);
  r.set_cause(static_cast<int>(past.cause));
  r.set_start_time_ms(past.start_time.count());
  r.set_end_time_ms(past.end_time.count());
  r.mutable_nodes()->Assign(past.nodes.begin(), past.nodes.end());
  r.set_exit_code(past.exit_code);
  r.set_exit_signal(past.exit_signal);
  r.set_reason(past.reason);
  r.set_own_max_rss_kb(past.own_usage.max_rss_kb);
  r.set_own_cpu_ms(past.own_usage.cpu_ms);
  if (past.own_usage.ranks > 0) UsageToRecord(past.own_usage, *r.mutable_own_usage());
  for (const JobStep& step : past.steps) StepToRecord(step, *r.add_steps());
}

// A past attempt; steps that could not have been the engine's are dropped
// (the record is for accounting: the job itself runs on without them).
PastAttempt PastFromRecord(JobId id, const v1::PastAttemptRecord& r, int first_step) {
  PastAttempt past{.attempt = r.attempt(),
                   .cause = static_cast<EndCause>(
                       std::clamp(r.cause(), 0, static_cast<int>(EndCause::kRequeued))),
                   .start_time = Millis(r.start_time_ms()),
                   .end_time = Millis(r.end_time_ms()),
                   .nodes = {r.nodes().begin(), r.nodes().end()},
                   .exit_code = r.exit_code(),
                   .exit_signal = r.exit_signal(),
                   .reason = r.reason(),
                   .own_usage = UsageFromRecord(r.own_max_rss_kb(), r.own_cpu_ms(), r.own_usage()),
                   .steps = {}};
  for (const v1::StepRecord& s : r.steps()) {
    absl::StatusOr<JobStep> step =
        StepFromRecord(id, s, first_step, std::numeric_limits<int>::max());
    if (step.ok()) past.steps.push_back(*std::move(step));
  }
  return past;
}

void WaitToRecord(const JobWait& wait, v1::JobWaitRecord& r) {
  // The reason's enum is not kept: Engine::Restore reads it back from the
  // job's reason, its name.
  r.set_eligible_time_ms(wait.eligible_time.count());
  r.set_dependency_left(FormatDependency(wait.dependency_left));
  r.set_restart_after_ms(wait.restart_after.count());
}

void WaitFromRecord(const v1::JobWaitRecord& r, Millis submit_time, JobWait& wait) {
  wait.eligible_time = r.eligible_time_ms() != 0 ? Millis(r.eligible_time_ms()) : submit_time;
  if (!r.dependency_left().empty()) {
    absl::StatusOr<Dependency> left = ParseDependency(r.dependency_left());
    if (left.ok()) wait.dependency_left = *std::move(left);
  }
  wait.restart_after = Millis(std::max<std::int64_t>(r.restart_after_ms(), 0));
}

void ArrayToRecord(const JobArray& array, v1::JobArrayRecord& r) {
  r.set_job_id(array.job_id);
  r.set_task_id(array.task_id);
  r.mutable_pending()->Assign(array.pending.begin(), array.pending.end());
}

void ArrayFromRecord(const v1::JobArrayRecord& r, JobArray& array) {
  array.job_id = r.job_id();
  array.task_id = r.job_id() == 0 ? -1 : r.task_id();
  array.pending.assign(r.pending().begin(), r.pending().end());
}

void PreemptionToRecord(const JobPreemption& preemption, v1::JobPreemptionRecord& r) {
  for (const PreemptionRecord& p : preemption.records) PreemptionToWire(p, r.add_records());
  r.set_deadline_ms(preemption.deadline.count());
  r.set_by(preemption.by);
  r.set_suspended_since_ms(preemption.suspended_since.count());
}

// Only a victim in its grace time has a deadline, only a suspended job a
// suspension time (records of older versions kept them after the end).
void PreemptionFromRecord(const v1::JobPreemptionRecord& r, JobSubstate sub,
                          JobPreemption& preemption) {
  for (const v1::Preemption& p : r.records()) {
    preemption.records.push_back(PreemptionFromWire(p));
  }
  preemption.by = r.by();
  if (sub == JobSubstate::kPreempting) preemption.deadline = Millis(r.deadline_ms());
  if (sub == JobSubstate::kSuspended) {
    preemption.suspended_since = Millis(std::max<std::int64_t>(r.suspended_since_ms(), 1));
  }
}

}  // namespace

v1::JobRecord ToRecord(const Job& job, const v1::JobSpec& spec,
                       const topology::Topology& topology) {
  v1::JobRecord r;
  r.set_id(job.id);
  *r.mutable_spec() = spec;
  r.mutable_spec()->clear_env();
  r.set_uid(job.request.uid);
  r.set_user_name(job.request.user_name);
  r.set_account(job.request.account);
  r.set_partition(job.request.partition);
  r.set_state(ToWire(job.state));
  r.set_reason(job.reason);
  r.set_reason_detail(job.reason_detail);
  r.set_submit_time_ms(job.submit_time.count());
  r.set_time_limit_s(job.time_limit == kUnlimited ? 0 : job.time_limit.count());
  r.set_qos(job.qos);
  r.set_held(IsHeld(job));
  r.set_held_by_operator(job.sub == JobSubstate::kHeldAdmin);
  r.set_suspended(IsSuspended(job));
  RunToRecord(job.run, topology, *r.mutable_run());
  WaitToRecord(job.wait, *r.mutable_wait());
  // Most jobs are in no array and were never preempted: their records
  // carry no message for those groups (reading one back gives the same
  // defaults), which keeps a restart's parsing to the groups a job has.
  if (job.array.job_id != 0) ArrayToRecord(job.array, *r.mutable_array());
  if (!job.preemption.records.empty() || job.preemption.by != 0) {
    PreemptionToRecord(job.preemption, *r.mutable_preemption());
  }
  for (const PastAttempt& past : job.past_attempts) PastToRecord(past, *r.add_past_attempts());
  for (const RepairRecord& repair : job.repairs) {
    v1::RepairRecordProto& out = *r.add_repairs();
    out.set_time_ms(repair.time.count());
    out.set_attempt(repair.attempt);
    out.mutable_lost()->Assign(repair.lost.begin(), repair.lost.end());
    out.mutable_replacement()->Assign(repair.replacement.begin(), repair.replacement.end());
    out.mutable_node_ranks()->Assign(repair.node_ranks.begin(), repair.node_ranks.end());
    out.set_reason(repair.reason);
    out.set_restarted(repair.restarted);
  }
  return r;
}

absl::StatusOr<SavedJob> FromRecord(const v1::JobRecord& record,
                                    const topology::Topology& topology) {
  const std::optional<JobState> state = FromWire(record.state());
  if (!state) {
    return absl::InvalidArgumentError(
        fmt::format("job {}: unknown state {}", record.id(), static_cast<int>(record.state())));
  }
  Identity owner;
  owner.uid = record.uid();
  owner.user_name = record.user_name();
  // An array task's spec still names the array; the record says which task.
  v1::JobSpec spec = record.spec();
  if (record.array().task_id() >= 0 && record.array().job_id() != 0 &&
      record.array().job_id() != record.id()) {
    spec.clear_array();
  }
  // What was accepted once stays readable whatever MaxArraySize is now.
  absl::StatusOr<JobRequest> request = RequestFromSpec(spec, owner, kMaxArraySizeEver);
  if (!request.ok()) {
    return absl::InvalidArgumentError(
        fmt::format("job {}: {}", record.id(), request.status().message()));
  }
  SavedJob saved;
  saved.status = {.state = *state, .sub = SubstateOf(record, *state)};
  Job& job = saved.job;
  job.id = record.id();
  job.request = *std::move(request);
  job.request.account = record.account();
  job.request.partition = record.partition();
  job.request.qos = record.qos();
  job.time_limit =
      record.time_limit_s() == 0 ? kUnlimited : std::chrono::seconds(record.time_limit_s());
  job.qos = record.qos();
  job.submit_time = Millis(record.submit_time_ms());
  job.reason = record.reason();
  job.reason_detail = record.reason_detail();
  if (absl::Status run =
          RunFromRecord(record.id(), record.run(), topology, FirstStep(job), job.run);
      !run.ok()) {
    return run;
  }
  WaitFromRecord(record.wait(), job.submit_time, job.wait);
  ArrayFromRecord(record.array(), job.array);
  PreemptionFromRecord(record.preemption(), saved.status.sub, job.preemption);
  // The most recent, as the engine keeps them.
  const int past = record.past_attempts_size();
  for (int i = std::max(past - static_cast<int>(kPastAttemptsKept), 0); i < past; ++i) {
    job.past_attempts.push_back(PastFromRecord(job.id, record.past_attempts(i), FirstStep(job)));
  }
  const int repairs = record.repairs_size();
  for (int i = std::max(repairs - static_cast<int>(kRepairsKept), 0); i < repairs; ++i) {
    const v1::RepairRecordProto& in = record.repairs(i);
    job.repairs.push_back({.time = Millis(in.time_ms()),
                           .attempt = in.attempt(),
                           .lost = {in.lost().begin(), in.lost().end()},
                           .replacement = {in.replacement().begin(), in.replacement().end()},
                           .node_ranks = {in.node_ranks().begin(), in.node_ranks().end()},
                           .reason = in.reason(),
                           .restarted = in.restarted()});
  }
  return saved;
}

double GpuHours(const v1::JobRecord& record, std::int64_t now_ms) {
  const v1::JobRunRecord& run = record.run();
  if (run.start_time_ms() == 0 || run.grants().empty()) return 0;
  const std::int64_t end = run.end_time_ms() > 0 ? run.end_time_ms() : now_ms;
  int gpus = 0;
  for (const v1::GrantRecord& g : run.grants()) gpus += std::popcount(g.gpus());
  return gpus * static_cast<double>(std::max<std::int64_t>(end - run.start_time_ms(), 0)) / 3.6e6;
}

void RecordToWire(const v1::JobRecord& record, const topology::Topology& topology, v1::Job* out) {
  const v1::JobRunRecord& run = record.run();
  const v1::JobArrayRecord& array = record.array();
  out->set_id(record.id());
  *out->mutable_spec() = record.spec();
  out->mutable_spec()->set_partition(record.partition());
  out->mutable_spec()->set_account(record.account());
  out->mutable_spec()->set_user_name(record.user_name());
  out->set_uid(record.uid());
  out->set_state(record.state());
  out->set_reason(record.reason());
  out->set_reason_detail(record.reason_detail());
  out->set_submit_time_ms(record.submit_time_ms());
  out->set_eligible_time_ms(record.wait().eligible_time_ms() != 0 ? record.wait().eligible_time_ms()
                                                                  : record.submit_time_ms());
  out->set_start_time_ms(run.start_time_ms());
  out->set_end_time_ms(run.end_time_ms());
  std::vector<std::string> nodes;
  std::vector<std::string> leaves;
  for (const v1::GrantRecord& g : run.grants()) {
    nodes.push_back(g.node());
    const std::optional<NodeId> node = topology.FindNode(g.node());
    if (node && topology.LeafOf(*node) != topology::kNone) {
      const std::string& leaf = topology.GetSwitch(topology.LeafOf(*node)).name;
      if (std::find(leaves.begin(), leaves.end(), leaf) == leaves.end()) leaves.push_back(leaf);
    }
  }
  out->set_nodes(hostlist::Compress(nodes));
  out->set_leaves(fmt::format("{}", fmt::join(leaves, ",")));
  std::vector<alloc::NodeGrant> grants;
  for (const std::string& name : nodes) {
    grants.push_back({.node = topology.FindNode(name).value_or(topology::kNone)});
  }
  PlacementToWire(topology, grants, nodes, record.spec().segment(), out->mutable_placement());
  *out->mutable_imex_channels() = run.imex_channels();
  out->set_stopped(run.stopped() && record.state() == v1::JOB_RUNNING);
  out->set_exit_code(run.exit_code());
  out->set_exit_signal(run.exit_signal());
  out->set_attempt(run.attempt());
  out->set_time_limit_s(record.time_limit_s());
  out->set_gpu_hours(GpuHours(record, run.end_time_ms()));
  out->set_array_job_id(array.job_id());
  out->set_array_task_id(array.job_id() == 0 ? -1 : array.task_id());
  out->set_display_id(array.job_id() != 0 && array.task_id() >= 0
                          ? fmt::format("{}_{}", array.job_id(), array.task_id())
                          : std::to_string(record.id()));
  out->set_qos(record.qos());
  *out->mutable_preemptions() = record.preemption().records();
  // The steps as the engine's job has them; a record the engine could not
  // read shows none.
  UsageToWire(UsageFromRecord(run.own_max_rss_kb(), run.own_cpu_ms(), run.own_usage()), *out);
  if (absl::StatusOr<SavedJob> saved = FromRecord(record, topology); saved.ok()) {
    StepsToWire(saved->job, saved->status.state, topology, out);
  }
}

std::vector<v1::Reservation> StateRecords::Reservations() const {
  std::vector<v1::Reservation> out;
  const Millis now = ControllerState::Now();
  for (const AdvanceReservation& r : state_.engine.Reservations()) {
    ReservationToWire(r, *state_.topology, now, out.emplace_back());
  }
  return out;
}

bool StateRecords::JobRow(JobId id, WithEnv with_env, StateBatch::JobRow& row) {
  const Job* job = state_.engine.FindJob(id);
  if (job == nullptr) return false;
  row.record = ToRecord(*job, state_.specs[id], *state_.topology);
  if (with_env == WithEnv::kYes) {
    const auto env = state_.envs.find(id);
    row.env = env == state_.envs.end() ? v1::JobSpec().SerializeAsString()
                                       : env->second.SerializeAsString();
  }
  return true;
}

}  // namespace cohort::controller
