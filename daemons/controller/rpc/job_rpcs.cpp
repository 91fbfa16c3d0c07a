// SPDX-License-Identifier: Apache-2.0
#include "rpc/job_rpcs.h"

#include <algorithm>
#include <set>
#include <unordered_map>

#include <fmt/format.h>

#include "cohort/fmt_absl.h"
#include "cohort/launch/mpi_type.h"
#include "cohort/text/hostlist.h"
#include "controller_log.h"
#include "job_submit_spec.h"
#include "store/records.h"

namespace cohort::controller {
namespace {

// The partitions as the submit policy's part_list shows them.
std::vector<policy::PartitionFields> PolicyPartitions(const ControllerState& state) {
  std::vector<policy::PartitionFields> parts;
  for (const config::PartitionSpec& spec : state.config.partitions) {
    policy::PartitionFields& p = parts.emplace_back();
    p.name = spec.name;
    p.nodes = hostlist::Compress(spec.nodes);
    p.state = std::string(config::PartitionStateName(state.engine.PartitionState(spec)));
    p.is_default = &spec == state.config.DefaultPartition();
    if (spec.max_time != kUnlimited) p.max_time_min = policy::MinutesOf(spec.max_time.count());
    if (spec.default_time) p.default_time_min = policy::MinutesOf(spec.default_time->count());
    p.max_nodes = spec.max_nodes.value_or(0);
  }
  return parts;
}

}  // namespace

absl::Status JobRpcs::ApplySubmitPolicy(v1::JobSpec& spec, const Identity& who) {
  if (!state_.job_submit) return absl::OkStatus();
  const policy::SubmitFields before = policy::SubmitFieldsOf(spec, who.user_name, who.uid);
  policy::SubmitFields after = before;
  absl::Status status = state_.job_submit->Submit(after, PolicyPartitions(state_), who.uid);
  if (!status.ok()) {
    Log("rpc")->info("submit_policy_refused user={} reason={:?}", who.user_name,
                     std::string(status.message()));
    return status;
  }
  policy::ApplySubmitFields(before, after, spec);
  return absl::OkStatus();
}

absl::Status JobRpcs::ApplyModifyPolicy(v1::UpdateJobRequest& request, JobRef ref,
                                        const Identity& who) {
  if (!state_.job_submit) return absl::OkStatus();
  const std::vector<JobId> ids = state_.engine.Lookup(ref);
  if (ids.empty()) return absl::OkStatus();  // the engine says what is wrong
  const Job* job = state_.engine.FindJob(ids.front());
  if (job == nullptr) return absl::OkStatus();
  policy::UpdateFields update;
  if (request.has_partition()) update.partition = request.partition();
  if (request.has_time_limit_s()) {
    update.time_limit_min = request.time_limit_s() == kUnlimited.count()
                                ? policy::kUnlimitedMinutes
                                : policy::MinutesOf(request.time_limit_s());
  }
  if (request.has_nodes()) update.nodes = request.nodes();
  const policy::UpdateFields asked = update;
  absl::Status status = state_.job_submit->Modify(
      update,
      policy::SubmitFieldsOf(state_.specs[job->id], job->request.user_name, job->request.uid),
      PolicyPartitions(state_), who.uid);
  if (!status.ok()) {
    Log("rpc")->info("update_policy_refused user={} job={} reason={:?}", who.user_name,
                     request.job_ref(), std::string(status.message()));
    return status;
  }
  if (update.partition != asked.partition) {
    if (update.partition) {
      request.set_partition(*update.partition);
    } else {
      request.clear_partition();
    }
  }
  if (update.time_limit_min != asked.time_limit_min) {
    if (!update.time_limit_min) {
      request.clear_time_limit_s();
    } else {
      request.set_time_limit_s(*update.time_limit_min == policy::kUnlimitedMinutes
                                   ? kUnlimited.count()
                                   : *update.time_limit_min * 60);
    }
  }
  if (update.nodes != asked.nodes) {
    if (update.nodes) {
      request.set_nodes(*update.nodes);
    } else {
      request.clear_nodes();
    }
  }
  return absl::OkStatus();
}

void JobRpcs::SubmitJob(v1::SubmitJobRequest& request, const Identity& who,
                        Reply<v1::SubmitJobResponse> reply) {
  if (absl::Status trusted = RequireTrusted(who, "submitting"); !trusted.ok()) {
    outbox_.Respond<v1::SubmitJobResponse>(std::move(reply), trusted);
    return;
  }
  Engine& engine = state_.engine;
  // The site's policy first: what it changes is the job as submitted (and
  // stored), checked below as any submission is.
  if (absl::Status allowed = ApplySubmitPolicy(*request.mutable_spec(), who); !allowed.ok()) {
    outbox_.Respond<v1::SubmitJobResponse>(std::move(reply), allowed);
    return;
  }
  absl::StatusOr<JobRequest> job =
      RequestFromSpec(request.spec(), who, state_.config.max_array_size);
  if (!job.ok()) {
    outbox_.Respond<v1::SubmitJobResponse>(std::move(reply), job.status());
    return;
  }
  if (absl::Status bindable =
          CheckBindingAtSubmit(request.spec(), *job, state_.config, state_.node_kinds);
      !bindable.ok()) {
    outbox_.Respond<v1::SubmitJobResponse>(std::move(reply), bindable);
    return;
  }
  if (absl::Status allowed = ContainersAllowed(state_.config, request.spec().container());
      !allowed.ok()) {
    outbox_.Respond<v1::SubmitJobResponse>(std::move(reply), allowed);
    return;
  }
  v1::SubmitJobResponse response;
  if (request.test_only()) {
    absl::StatusOr<Engine::Preview> preview = engine.TestSubmit(*job, ControllerState::Now());
    if (!preview.ok()) {
      outbox_.Respond<v1::SubmitJobResponse>(std::move(reply), preview.status());
      return;
    }
    response.set_would_run_on(preview->would_run_on);
    response.set_reason(preview->reason);
    outbox_.Respond<v1::SubmitJobResponse>(std::move(reply), std::move(response));
    return;
  }
  Effects effects;
  absl::StatusOr<JobId> id = engine.Submit(*std::move(job), ControllerState::Now(), effects);
  if (!id.ok()) {
    Log("rpc")->info("submit_refused user={} reason=\"{}\"", who.user_name, id.status());
    outbox_.Respond<v1::SubmitJobResponse>(std::move(reply), id.status());
    return;
  }
  v1::JobSpec& spec = state_.specs[*id] = std::move(*request.mutable_spec());
  spec.set_user_name(who.user_name);
  spec.mutable_env()->Swap(state_.envs[*id].mutable_env());
  outbox_.MarkNew(*id);
  response.set_job_id(*id);
  sink_.Execute(effects);
  // The id goes out once the job is durable.
  outbox_.Respond<v1::SubmitJobResponse>(std::move(reply), std::move(response));
}

void JobRpcs::CancelJob(v1::CancelJobRequest& request, const Identity& who,
                        Reply<v1::CancelJobResponse> reply) {
  if (absl::Status trusted = RequireTrusted(who, "cancelling"); !trusted.ok()) {
    outbox_.Respond<v1::CancelJobResponse>(std::move(reply), trusted);
    return;
  }
  Engine& engine = state_.engine;
  Effects effects;
  absl::Status result = absl::OkStatus();
  const Millis now = ControllerState::Now();
  for (const std::int64_t id : request.job_ids()) {
    absl::Status s = engine.Cancel(JobRef{id, -1}, request.signal(), who.AsCaller(), now, effects);
    if (!s.ok() && result.ok()) result = s;
  }
  for (const std::string& text : request.job_refs()) {
    absl::StatusOr<JobRef> ref = ParseJobRef(text);
    absl::Status s = ref.ok() ? engine.Cancel(*ref, request.signal(), who.AsCaller(), now, effects)
                              : ref.status();
    if (!s.ok() && result.ok()) result = s;
  }
  sink_.Execute(effects);
  outbox_.Respond(std::move(reply),
                  result.ok() ? absl::StatusOr<v1::CancelJobResponse>(v1::CancelJobResponse{})
                              : absl::StatusOr<v1::CancelJobResponse>(result));
}

void JobRpcs::GetJob(v1::GetJobRequest& request, const Identity& who,
                     Reply<v1::GetJobResponse> reply) {
  const Engine& engine = state_.engine;
  if (!request.job_ref().empty()) {
    absl::StatusOr<JobRef> ref = ParseJobRef(request.job_ref());
    if (!ref.ok()) {
      outbox_.Respond<v1::GetJobResponse>(std::move(reply), ref.status());
      return;
    }
    const std::vector<JobId> ids = engine.Lookup(*ref);
    request.set_job_id(ids.empty() ? ref->job : ids.front());
    if (ids.empty() && ref->task >= 0) {
      outbox_.Respond<v1::GetJobResponse>(
          std::move(reply), absl::NotFoundError(fmt::format("job {} not found; see cohort queue",
                                                            request.job_ref())));
      return;
    }
  }
  const Job* job = engine.FindJob(request.job_id());
  if (job == nullptr) {
    GetStoredJob(request.job_id(), who, std::move(reply));
    return;
  }
  if (!MaySeeJob(who, job->request.uid, state_.config.private_data)) {
    outbox_.Respond<v1::GetJobResponse>(std::move(reply), HiddenJob(job->id));
    return;
  }
  v1::GetJobResponse response;
  state_.JobToWire(*job, engine.QueuePosition(job->id), response.mutable_job());
  // A batch script may hold secrets: its owner and operators read it.
  if (!who.is_operator && job->request.uid != who.uid)
    response.mutable_job()->mutable_spec()->clear_script();
  if (const auto ranks = state_.bindings.find(job->id); ranks != state_.bindings.end()) {
    for (const v1::RankBinding& b : ranks->second) *response.mutable_job()->add_ranks() = b;
  }
  outbox_.Respond(std::move(reply), absl::StatusOr<v1::GetJobResponse>(std::move(response)));
}

void JobRpcs::GetJobUsage(v1::JobUsageRequest& request, const Identity& who,
                          Reply<v1::JobUsageResponse> reply) {
  const Engine& engine = state_.engine;
  const auto refuse = [&](absl::Status status) {
    outbox_.Respond<v1::JobUsageResponse>(std::move(reply), std::move(status));
  };
  absl::StatusOr<JobRef> ref = ParseJobRef(request.job_ref());
  if (!ref.ok()) return refuse(ref.status());
  const std::vector<JobId> ids = engine.Lookup(*ref);
  const Job* job = engine.FindJob(ids.empty() ? ref->job : ids.front());
  if (job == nullptr || (ids.empty() && ref->task >= 0)) {
    return refuse(absl::NotFoundError(fmt::format(
        "job {} not found; see cohort queue, or sacct for finished jobs", request.job_ref())));
  }
  if (!MaySeeJob(who, job->request.uid, state_.config.private_data)) {
    return refuse(HiddenJob(job->id));
  }
  if (job->state != JobState::kRunning) {
    return refuse(absl::FailedPreconditionError(fmt::format(
        "job {} is {}: sstat shows what running jobs use; see sacct -j {} for what it used",
        DisplayId(*job), JobStateName(job->state), DisplayId(*job))));
  }
  v1::JobUsageResponse response;
  response.set_display_id(DisplayId(*job));
  response.set_gather_interval_s(state_.config.job_acct_gather_frequency.count());
  for (v1::LiveUsage& launch : state_.usage.Launches(job->id, IsBatch(*job) ? "batch" : "")) {
    *response.add_steps() = std::move(launch);
  }
  outbox_.Respond(std::move(reply), absl::StatusOr<v1::JobUsageResponse>(std::move(response)));
}

void JobRpcs::GetStoredJob(JobId id, const Identity& who, Reply<v1::GetJobResponse> reply) {
  // Finished long enough ago to have left memory: the store has it. Read
  // off the state thread; the answer is converted back on it (the topology
  // is the state thread's).
  reader_.Read(
      [id](Store& store) { return store.FindJob(id); },
      [this, id, who,
       reply = std::move(reply)](absl::StatusOr<std::optional<v1::JobRecord>> stored) mutable {
        if (!stored.ok()) {
          outbox_.Respond<v1::GetJobResponse>(std::move(reply), stored.status());
          return;
        }
        if (!stored->has_value()) {
          outbox_.Respond<v1::GetJobResponse>(
              std::move(reply), absl::NotFoundError(fmt::format(
                                    "job {} not found; see cohort queue and cohort history", id)));
          return;
        }
        const std::uint32_t owner = (*stored)->uid();
        if (!MaySeeJob(who, owner, state_.config.private_data)) {
          outbox_.Respond<v1::GetJobResponse>(std::move(reply), HiddenJob(id));
          return;
        }
        v1::GetJobResponse response;
        RecordToWire(**stored, *state_.topology, response.mutable_job());
        if (!who.is_operator && owner != who.uid)
          response.mutable_job()->mutable_spec()->clear_script();
        outbox_.Respond(std::move(reply), absl::StatusOr<v1::GetJobResponse>(std::move(response)));
      });
}

void JobRpcs::ListJobs(v1::ListJobsRequest& request, const Identity& who,
                       Reply<v1::ListJobsResponse> reply) {
  const Engine& engine = state_.engine;
  std::set<JobState> states;
  for (const int s : request.states()) {
    if (const std::optional<JobState> state = FromWire(static_cast<v1::JobState>(s))) {
      states.insert(*state);
    }
  }
  if (states.empty()) states = {JobState::kPending, JobState::kRunning, JobState::kCompleting};
  std::unordered_map<JobId, int> positions;
  int position = 0;
  for (const JobId id : engine.PendingOrder()) positions[id] = ++position;
  v1::ListJobsResponse response;
  for (const auto& [id, job] : engine.Jobs()) {
    if (!states.contains(job.state)) continue;
    if (!request.all_users() && request.user_name().empty() && job.request.uid != who.uid) continue;
    if (!MaySeeJob(who, job.request.uid, state_.config.private_data)) continue;
    if (!request.user_name().empty() && job.request.user_name != request.user_name()) continue;
    const auto at = positions.find(id);
    v1::Job* out = response.add_jobs();
    state_.JobToWire(job, at == positions.end() ? 0 : at->second, out);
    out->mutable_spec()->clear_script();  // a listing does not show it; show job does
  }
  outbox_.Respond(std::move(reply), absl::StatusOr<v1::ListJobsResponse>(std::move(response)));
}

void JobRpcs::ControlJobs(v1::ControlJobsRequest& request, const Identity& who,
                          Reply<v1::ControlJobsResponse> reply) {
  if (absl::Status trusted = RequireTrusted(who, "changing jobs"); !trusted.ok()) {
    outbox_.Respond<v1::ControlJobsResponse>(std::move(reply), trusted);
    return;
  }
  if (request.job_refs().empty()) {
    outbox_.Respond<v1::ControlJobsResponse>(
        std::move(reply), absl::InvalidArgumentError("job: name at least one job"));
    return;
  }
  Engine& engine = state_.engine;
  Effects effects;
  absl::Status result = absl::OkStatus();
  v1::ControlJobsResponse response;
  const Caller caller = who.AsCaller();
  for (const std::string& text : request.job_refs()) {
    absl::StatusOr<JobRef> ref = ParseJobRef(text);
    absl::Status s = ref.status();
    if (ref.ok()) {
      const Millis now = ControllerState::Now();
      switch (request.action()) {
        case v1::JOB_HOLD:
          s = engine.Hold(*ref, caller, now, effects);
          break;
        case v1::JOB_RELEASE:
          s = engine.Release(*ref, caller, now, effects);
          break;
        case v1::JOB_REQUEUE:
          s = engine.Requeue(*ref, caller, now, effects);
          break;
        case v1::JOB_CHECKPOINT_DONE:
          s = engine.CheckpointDone(*ref, caller, now, effects);
          break;
        case v1::JOB_COMPLETE:
          s = engine.EndAllocation(*ref, request.exit_code(), caller, now, effects);
          break;
        default:
          s = absl::InvalidArgumentError("action: give hold, release, requeue or checkpoint-done");
      }
    }
    if (s.ok()) {
      response.add_done(text);
      Log("rpc")->info("job_control action={} job={} user={}", v1::JobAction_Name(request.action()),
                       text, who.user_name);
    } else if (result.ok()) {
      result = s;
    }
  }
  sink_.Execute(effects);
  // Partial success still reports the first failure; what was done is durable.
  outbox_.Respond(std::move(reply),
                  result.ok() ? absl::StatusOr<v1::ControlJobsResponse>(std::move(response))
                              : absl::StatusOr<v1::ControlJobsResponse>(result));
}

void JobRpcs::UpdateJob(v1::UpdateJobRequest& request, const Identity& who,
                        Reply<v1::UpdateJobResponse> reply) {
  if (absl::Status trusted = RequireTrusted(who, "changing jobs"); !trusted.ok()) {
    outbox_.Respond<v1::UpdateJobResponse>(std::move(reply), trusted);
    return;
  }
  absl::StatusOr<JobRef> ref = ParseJobRef(request.job_ref());
  if (!ref.ok()) {
    outbox_.Respond<v1::UpdateJobResponse>(std::move(reply), ref.status());
    return;
  }
  if (absl::Status allowed = ApplyModifyPolicy(request, *ref, who); !allowed.ok()) {
    outbox_.Respond<v1::UpdateJobResponse>(std::move(reply), allowed);
    return;
  }
  Engine::JobUpdate update;
  if (request.has_time_limit_s()) {
    if (request.time_limit_s() < 0) {
      outbox_.Respond<v1::UpdateJobResponse>(
          std::move(reply), absl::InvalidArgumentError("TimeLimit must not be negative"));
      return;
    }
    update.time_limit = std::chrono::seconds(request.time_limit_s());
  }
  if (request.has_partition()) update.partition = request.partition();
  if (request.has_nodes()) {
    if (request.nodes() < 1) {
      outbox_.Respond<v1::UpdateJobResponse>(
          std::move(reply), absl::InvalidArgumentError(fmt::format(
                                "NumNodes={}: ask for at least 1 node", request.nodes())));
      return;
    }
    update.nodes = request.nodes();
  }
  Effects effects;
  absl::Status s =
      state_.engine.Update(*ref, update, who.AsCaller(), ControllerState::Now(), effects);
  if (s.ok()) {
    // The stored spec is what a restart rebuilds the job from.
    for (const JobId id : state_.engine.Lookup(*ref)) {
      const Job* job = state_.engine.FindJob(id);
      if (job == nullptr || job->state != JobState::kPending) continue;
      v1::JobSpec& spec = state_.specs[id];
      spec.set_partition(job->request.partition);
      spec.set_nodes(job->request.nodes);
      spec.set_time_limit_s(job->request.time_limit.count());
    }
    Log("rpc")->info("job_update job={} user={}", request.job_ref(), who.user_name);
  }
  sink_.Execute(effects);
  outbox_.Respond(std::move(reply),
                  s.ok() ? absl::StatusOr<v1::UpdateJobResponse>(v1::UpdateJobResponse{})
                         : absl::StatusOr<v1::UpdateJobResponse>(s));
}

void JobRpcs::ExplainJob(v1::ExplainJobRequest& request, const Identity& who,
                         Reply<v1::ExplainJobResponse> reply) {
  Engine& engine = state_.engine;
  absl::StatusOr<JobRef> ref = ParseJobRef(request.job_ref());
  if (!ref.ok()) {
    outbox_.Respond<v1::ExplainJobResponse>(std::move(reply), ref.status());
    return;
  }
  absl::StatusOr<Explanation> why = engine.Explain(*ref, ControllerState::Now());
  if (!why.ok()) {
    outbox_.Respond<v1::ExplainJobResponse>(std::move(reply), why.status());
    return;
  }
  v1::ExplainJobResponse response;
  if (const Job* job = engine.FindJob(why->job); job != nullptr) {
    if (!MaySeeJob(who, job->request.uid, state_.config.private_data)) {
      outbox_.Respond<v1::ExplainJobResponse>(std::move(reply), HiddenJob(job->id));
      return;
    }
    state_.JobToWire(*job, engine.QueuePosition(job->id), response.mutable_job());
  }
  ExplanationToWire(*why, &response);
  outbox_.Respond(std::move(reply), absl::StatusOr<v1::ExplainJobResponse>(std::move(response)));
}

namespace {

// What a step asks of its allocation, from the request; `job` is the
// allocation, for -w's names. InvalidArgument names the option.
absl::StatusOr<alloc::StepRequest> StepRequestOf(const v1::StartStepRequest& request,
                                                 const Job& job,
                                                 const topology::Topology& topology) {
  if (request.argv().empty()) {
    return absl::InvalidArgumentError("argv: nothing to run; give -- COMMAND");
  }
  if (request.nodes() < 0 || request.tasks() < 0 || request.tasks_per_node() < 0 ||
      request.cpus_per_task() < 0 || (request.has_gpus_per_node() && request.gpus_per_node() < 0)) {
    return absl::InvalidArgumentError(
        "counts must not be negative (-N, -n, --ntasks-per-node, -c, --gpus-per-node)");
  }
  alloc::StepRequest step{
      .nodes = request.nodes(),
      .tasks = request.tasks(),
      .tasks_per_node = request.tasks_per_node(),
      .cpus_per_task = request.cpus_per_task(),
      .gpus_per_node = request.has_gpus_per_node() ? request.gpus_per_node() : -1};
  step.overcommit = request.overcommit();
  switch (request.sharing()) {
    case v1::STEP_EXACT:
      step.sharing = alloc::StepSharing::kExact;
      break;
    case v1::STEP_OVERLAP:
      step.sharing = alloc::StepSharing::kOverlap;
      break;
    default:
      step.sharing = alloc::StepSharing::kWholeNodes;
      break;
  }
  if (request.nodelist().empty()) return step;
  absl::StatusOr<std::vector<std::string>> names = hostlist::Expand(request.nodelist());
  if (!names.ok()) return absl::InvalidArgumentError(fmt::format("nodelist: {}", names.status()));
  std::vector<std::string> allocation;
  for (const alloc::NodeGrant& g : job.run.placement.grants) {
    allocation.push_back(topology.NodeName(g.node));
  }
  for (const std::string& name : *names) {
    const auto at = std::find(allocation.begin(), allocation.end(), name);
    if (at == allocation.end()) {
      return absl::InvalidArgumentError(
          fmt::format("nodelist: {} is not in job {}'s allocation ({}); name nodes of it with -w",
                      name, DisplayId(job), hostlist::Compress(allocation)));
    }
    step.node_ranks.push_back(static_cast<int>(at - allocation.begin()));
  }
  return step;
}

// The step's MPI type: what srun asked for, else the cluster's MpiDefault.
// A PMIx or PMI server's wire-up starts on the step's stream to srun,
// which an srun that sends the output to files opens only when it knows
// the step's type.
absl::StatusOr<std::string> StepMpiType(const v1::StartStepRequest& request,
                                        const std::string& mpi_default) {
  std::string type = mpi_default;
  if (!request.mpi().empty()) {
    const std::optional<std::string_view> asked = launch::CanonicalMpiType(request.mpi());
    if (!asked) {
      return absl::InvalidArgumentError(
          fmt::format("--mpi={} is no MPI type; use one of {}", request.mpi(), launch::kMpiTypes));
    }
    type = *asked;
  }
  if (launch::MpiTypeNeedsServer(type) && request.io().address().empty()) {
    return absl::FailedPreconditionError(fmt::format(
        "--mpi={} (the cluster's MpiDefault) starts its wire-up over the step's stream to srun, "
        "which this srun did not open for -o/-e: give --mpi={} to srun as well, or use --mpi=none",
        type, type));
  }
  return type;
}

}  // namespace

void JobRpcs::StartStep(v1::StartStepRequest& request, const Identity& who,
                        Reply<v1::StartStepResponse> reply) {
  if (absl::Status trusted = RequireTrusted(who, "starting a step"); !trusted.ok()) {
    outbox_.Respond<v1::StartStepResponse>(std::move(reply), trusted);
    return;
  }
  Engine& engine = state_.engine;
  absl::StatusOr<JobRef> ref = ParseJobRef(request.job_ref());
  if (!ref.ok()) {
    outbox_.Respond<v1::StartStepResponse>(std::move(reply), ref.status());
    return;
  }
  const std::vector<JobId> ids = engine.Lookup(*ref);
  const Job* job = ids.size() == 1 ? engine.FindJob(ids.front()) : nullptr;
  absl::StatusOr<alloc::StepRequest> step =
      job == nullptr ? alloc::StepRequest{} : StepRequestOf(request, *job, *state_.topology);
  if (!step.ok()) {
    outbox_.Respond<v1::StartStepResponse>(std::move(reply), step.status());
    return;
  }
  absl::StatusOr<std::string> mpi = StepMpiType(request, state_.config.mpi_default);
  if (!mpi.ok()) {
    outbox_.Respond<v1::StartStepResponse>(std::move(reply), mpi.status());
    return;
  }
  if (absl::Status container = CheckContainer(request.container()); !container.ok()) {
    outbox_.Respond<v1::StartStepResponse>(std::move(reply), container);
    return;
  }
  if (absl::Status allowed = ContainersAllowed(state_.config, request.container()); !allowed.ok()) {
    outbox_.Respond<v1::StartStepResponse>(std::move(reply), allowed);
    return;
  }
  // The engine's refusals (not found, an array, not running, another
  // user's, never fits, busy) come back as it words them.
  Effects effects;
  const Millis now = ControllerState::Now();
  const std::size_t steps_before = job == nullptr ? 0 : job->run.steps.size();
  absl::StatusOr<int> id =
      engine.StartStep(*ref, *step, who.AsCaller(), now, effects, request.token());
  if (!id.ok()) {
    outbox_.Respond<v1::StartStepResponse>(std::move(reply), id.status());
    return;
  }
  const JobId job_id = ids.front();
  const Job& started = *engine.FindJob(job_id);
  const auto it = std::find_if(started.run.steps.begin(), started.run.steps.end(),
                               [&](const JobStep& s) { return s.id == *id; });
  const bool again = started.run.steps.size() == steps_before;  // the token's step, asked again
  // The step runs the job's spec with the caller's command, environment and
  // files: what srun inside sbatch passes on.
  v1::JobSpec spec = state_.specs[job_id];
  spec.clear_script();
  spec.mutable_argv()->Swap(request.mutable_argv());
  spec.mutable_env()->Swap(request.mutable_env());
  if (!request.work_dir().empty()) spec.set_work_dir(request.work_dir());
  if (!request.output().empty() || !request.error().empty()) {
    spec.set_output(request.output());
    spec.set_error(request.error());
  }
  if (!request.name().empty()) spec.set_name(request.name());
  spec.set_mpi(*mpi);
  // The ranks share CPUs when the step or its job overcommits.
  spec.set_overcommit(spec.overcommit() || request.overcommit());
  // pyxis's rule: each --container-* option of the step over the job's
  // (sbatch's), as srun reads sbatch's from its environment; a step with no
  // image or name from either runs on the host.
  spec.mutable_container()->MergeFrom(request.container());
  if (!again) {
    state_.step_specs[{job_id, *id}] = {std::move(spec), std::move(*request.mutable_io())};
  }
  v1::StartStepResponse response;
  response.set_step_id(*id);
  response.set_job_id(job_id);
  std::vector<std::string> names;
  for (const alloc::StepNode& node : it->placement.nodes) {
    names.push_back(state_.topology->NodeName(
        started.run.placement.grants[static_cast<std::size_t>(node.node_rank)].node));
  }
  response.set_nodes(hostlist::Compress(names));
  Log("rpc")->info("{} job={} step={} nodes={} tasks={} user={}",
                   again ? "step_asked_again" : "step_started", job_id, *id, response.nodes(),
                   it->placement.tasks, who.user_name);
  sink_.Execute(effects);
  outbox_.Respond<v1::StartStepResponse>(std::move(reply), std::move(response));
}

void JobRpcs::SignalStep(v1::SignalStepRequest& request, const Identity& who,
                         Reply<v1::SignalStepResponse> reply) {
  if (absl::Status trusted = RequireTrusted(who, "signalling a step"); !trusted.ok()) {
    outbox_.Respond<v1::SignalStepResponse>(std::move(reply), trusted);
    return;
  }
  absl::StatusOr<JobRef> ref = ParseJobRef(request.job_ref());
  if (!ref.ok()) {
    outbox_.Respond<v1::SignalStepResponse>(std::move(reply), ref.status());
    return;
  }
  if (request.signal() < 0 || request.signal() > 64) {
    outbox_.Respond<v1::SignalStepResponse>(
        std::move(reply),
        absl::InvalidArgumentError(fmt::format(
            "signal: {} is not a signal number; give 1-64, or 0 to cancel", request.signal())));
    return;
  }
  Effects effects;
  absl::Status status = state_.engine.SignalStep(*ref, request.step_id(), request.signal(),
                                                 who.AsCaller(), ControllerState::Now(), effects);
  sink_.Execute(effects);
  if (!status.ok()) {
    outbox_.Respond<v1::SignalStepResponse>(std::move(reply), status);
    return;
  }
  outbox_.Respond<v1::SignalStepResponse>(std::move(reply), v1::SignalStepResponse());
}

}  // namespace cohort::controller
