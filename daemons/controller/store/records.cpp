// SPDX-License-Identifier: Apache-2.0
#include "store/records.h"

#include <algorithm>
#include <bit>

#include <fmt/format.h>

#include "cohort/fmt_absl.h"
#include "cohort/text/hostlist.h"
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
      return record.preempt_deadline_ms() != 0 ? JobSubstate::kPreempting : JobSubstate::kNone;
    case JobState::kCompleting:
      return record.suspended() ? JobSubstate::kSuspended : JobSubstate::kNone;
    default:
      return JobSubstate::kNone;
  }
}

void StepsToRecord(const Job& job, v1::JobRecord& r) {
  for (const JobStep& step : job.steps) {
    v1::StepRecord& out = *r.add_steps();
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
    out.set_max_rss_kb(step.max_rss_kb);
    out.set_cpu_ms(step.cpu_ms);
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
  r.set_next_step(job.next_step);
  r.set_own_max_rss_kb(job.own_max_rss_kb);
  r.set_own_cpu_ms(job.own_cpu_ms);
}

// The steps of a record, refused when they could not have been the
// engine's: an unknown state or sharing, or running steps holding more than
// the allocation has.
absl::Status StepsFromRecord(const v1::JobRecord& record, Job& job) {
  alloc::StepLedger ledger(job.placement.grants, 1, 1);
  job.next_step = std::max(record.next_step(), FirstStep(job));
  job.own_max_rss_kb = record.own_max_rss_kb();
  job.own_cpu_ms = record.own_cpu_ms();
  for (const v1::StepRecord& s : record.steps()) {
    JobStep& step = job.steps.emplace_back();
    step.id = s.id();
    if (s.state() < 0 || s.state() > static_cast<int>(StepState::kCancelled) || s.sharing() < 0 ||
        s.sharing() > static_cast<int>(alloc::StepSharing::kOverlap) || s.id() < FirstStep(job) ||
        s.id() >= job.next_step) {
      return absl::InvalidArgumentError(fmt::format(
          "job {}: step {} has state {}, sharing {} and next step {}, which no step can have",
          record.id(), s.id(), s.state(), s.sharing(), job.next_step));
    }
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
    step.max_rss_kb = s.max_rss_kb();
    step.cpu_ms = s.cpu_ms();
    step.start_time = Millis(s.start_time_ms());
    step.end_time = Millis(s.end_time_ms());
    step.ranks_exited = s.ranks_exited();
    step.exit_code = s.exit_code();
    step.exit_signal = s.exit_signal();
    step.stopping = s.stopping();
    step.cancelled = s.cancelled();
    if (step.state != StepState::kRunning) continue;
    if (absl::Status held = ledger.Hold(step.placement); !held.ok()) {
      return absl::InvalidArgumentError(
          fmt::format("job {}: step {}: {}", record.id(), s.id(), held.message()));
    }
  }
  return absl::OkStatus();
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
  r.set_cause(static_cast<int>(job.cause));
  r.set_reason(job.reason);
  r.set_reason_detail(job.reason_detail);
  r.set_submit_time_ms(job.submit_time.count());
  r.set_start_time_ms(job.start_time.count());
  r.set_end_time_ms(job.end_time.count());
  r.set_attempt(job.attempt);
  r.set_exit_code(job.exit_code);
  r.set_exit_signal(job.exit_signal);
  r.set_time_limit_s(job.time_limit == kUnlimited ? 0 : job.time_limit.count());
  r.set_master_port(job.master_port);
  r.set_warned_attempt(job.warned_attempt);
  r.set_qos(job.qos);
  r.set_held(IsHeld(job));
  r.set_held_by_operator(job.sub == JobSubstate::kHeldAdmin);
  r.set_array_job_id(job.array_job_id);
  r.set_array_task_id(job.array_task_id);
  r.mutable_array_pending()->Assign(job.array_pending.begin(), job.array_pending.end());
  for (const PreemptionRecord& p : job.preemptions) PreemptionToWire(p, r.add_preemptions());
  r.set_preempt_deadline_ms(job.preempt_deadline.count());
  r.set_preempted_by(job.preempted_by);
  r.set_suspended(IsSuspended(job));
  r.set_suspended_since_ms(job.suspended_since.count());
  r.set_eligible_time_ms(job.eligible_time.count());
  r.set_dependency_left(FormatDependency(job.dependency_left));
  for (std::size_t rank = 0; rank < job.placement.grants.size(); ++rank) {
    const alloc::NodeGrant& g = job.placement.grants[rank];
    v1::GrantRecord* out = r.add_grants();
    out->set_node(topology.NodeName(g.node));
    out->set_cpus(g.cpus);
    out->set_memory_mb(g.memory_mb);
    out->set_gpus(g.gpus);
    out->set_released(rank < job.released.size() && job.released[rank] != 0);
    out->set_ranks_ok(rank < job.exited_ok.size() ? job.exited_ok[rank] : 0);
  }
  StepsToRecord(job, r);
  return r;
}

absl::StatusOr<Job> FromRecord(const v1::JobRecord& record, const topology::Topology& topology) {
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
  if (record.array_task_id() >= 0 && record.array_job_id() != 0 &&
      record.array_job_id() != record.id()) {
    spec.clear_array();
  }
  // What was accepted once stays readable whatever MaxArraySize is now.
  absl::StatusOr<JobRequest> request = RequestFromSpec(spec, owner, kMaxArraySizeEver);
  if (!request.ok()) {
    return absl::InvalidArgumentError(
        fmt::format("job {}: {}", record.id(), request.status().message()));
  }
  Job job;
  job.id = record.id();
  job.request = *std::move(request);
  job.request.account = record.account();
  job.request.partition = record.partition();
  job.state = *state;
  job.cause =
      static_cast<EndCause>(std::clamp(record.cause(), 0, static_cast<int>(EndCause::kRequeued)));
  job.reason = record.reason();
  job.reason_detail = record.reason_detail();
  job.submit_time = Millis(record.submit_time_ms());
  job.start_time = Millis(record.start_time_ms());
  job.end_time = Millis(record.end_time_ms());
  job.attempt = std::max(record.attempt(), 1);
  job.exit_code = record.exit_code();
  job.exit_signal = record.exit_signal();
  job.time_limit =
      record.time_limit_s() == 0 ? kUnlimited : std::chrono::seconds(record.time_limit_s());
  job.master_port = record.master_port();
  job.warned_attempt = record.warned_attempt();
  job.qos = record.qos();
  job.request.qos = record.qos();
  job.array_job_id = record.array_job_id();
  job.array_task_id = record.array_job_id() == 0 ? -1 : record.array_task_id();
  job.array_pending.assign(record.array_pending().begin(), record.array_pending().end());
  for (const v1::Preemption& p : record.preemptions()) {
    job.preemptions.push_back(PreemptionFromWire(p));
  }
  job.preempted_by = record.preempted_by();
  job.sub = SubstateOf(record, job.state);
  // Only a victim in its grace time has a deadline, only a suspended job a
  // suspension time (records of older versions kept them after the end).
  if (job.sub == JobSubstate::kPreempting)
    job.preempt_deadline = Millis(record.preempt_deadline_ms());
  if (job.sub == JobSubstate::kSuspended) {
    job.suspended_since = Millis(std::max<std::int64_t>(record.suspended_since_ms(), 1));
  }
  job.eligible_time =
      Millis(record.eligible_time_ms() != 0 ? record.eligible_time_ms() : record.submit_time_ms());
  if (!record.dependency_left().empty()) {
    absl::StatusOr<Dependency> left = ParseDependency(record.dependency_left());
    if (left.ok()) job.dependency_left = *std::move(left);
  }
  std::vector<NodeId> nodes;
  for (const v1::GrantRecord& g : record.grants()) {
    const std::optional<NodeId> node = topology.FindNode(g.node());
    alloc::NodeGrant& grant = job.placement.grants.emplace_back();
    grant.node = node.value_or(topology::kNone);
    grant.cpus = g.cpus();
    grant.memory_mb = g.memory_mb();
    grant.gpus = g.gpus();
    job.released.push_back(g.released() ? 1 : 0);
    job.exited_ok.push_back(g.ranks_ok());
    if (node) nodes.push_back(*node);
  }
  // The placement's shape, for display and for the invariants.
  for (const NodeId n : nodes) {
    if (topology.LeafOf(n) != topology::kNone) job.placement.leaves.push_back(topology.LeafOf(n));
    if (topology.GroupOf(n) != topology::kNone) job.placement.groups.push_back(topology.GroupOf(n));
  }
  for (auto* ids : {&job.placement.leaves, &job.placement.groups}) {
    std::sort(ids->begin(), ids->end());
    ids->erase(std::unique(ids->begin(), ids->end()), ids->end());
  }
  if (!nodes.empty()) {
    job.placement.domain = topology.LowestCommonSwitch(nodes);
    if (job.placement.domain != topology::kNone) {
      job.placement.level = topology.GetSwitch(job.placement.domain).level;
    }
  }
  if (absl::Status steps = StepsFromRecord(record, job); !steps.ok()) return steps;
  return job;
}

double GpuHours(const v1::JobRecord& record, std::int64_t now_ms) {
  if (record.start_time_ms() == 0 || record.grants().empty()) return 0;
  const std::int64_t end = record.end_time_ms() > 0 ? record.end_time_ms() : now_ms;
  int gpus = 0;
  for (const v1::GrantRecord& g : record.grants()) gpus += std::popcount(g.gpus());
  return gpus * static_cast<double>(std::max<std::int64_t>(end - record.start_time_ms(), 0)) /
         3.6e6;
}

void RecordToWire(const v1::JobRecord& record, const topology::Topology& topology, v1::Job* out) {
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
  out->set_start_time_ms(record.start_time_ms());
  out->set_end_time_ms(record.end_time_ms());
  std::vector<std::string> nodes;
  std::vector<std::string> leaves;
  for (const v1::GrantRecord& g : record.grants()) {
    nodes.push_back(g.node());
    const std::optional<NodeId> node = topology.FindNode(g.node());
    if (node && topology.LeafOf(*node) != topology::kNone) {
      const std::string& leaf = topology.GetSwitch(topology.LeafOf(*node)).name;
      if (std::find(leaves.begin(), leaves.end(), leaf) == leaves.end()) leaves.push_back(leaf);
    }
  }
  out->set_nodes(hostlist::Compress(nodes));
  out->set_leaves(fmt::format("{}", fmt::join(leaves, ",")));
  out->set_exit_code(record.exit_code());
  out->set_exit_signal(record.exit_signal());
  out->set_attempt(record.attempt());
  out->set_time_limit_s(record.time_limit_s());
  out->set_gpu_hours(GpuHours(record, record.end_time_ms()));
  out->set_array_job_id(record.array_job_id());
  out->set_array_task_id(record.array_job_id() == 0 ? -1 : record.array_task_id());
  out->set_display_id(record.array_job_id() != 0 && record.array_task_id() >= 0
                          ? fmt::format("{}_{}", record.array_job_id(), record.array_task_id())
                          : std::to_string(record.id()));
  out->set_qos(record.qos());
  *out->mutable_preemptions() = record.preemptions();
  // The steps as the engine's job has them; a record the engine could not
  // read shows none.
  out->set_max_rss_kb(record.own_max_rss_kb());
  out->set_total_cpu_ms(record.own_cpu_ms());
  if (absl::StatusOr<Job> job = FromRecord(record, topology); job.ok()) {
    StepsToWire(*job, topology, out);
  }
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
