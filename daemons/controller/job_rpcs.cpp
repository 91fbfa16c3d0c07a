// SPDX-License-Identifier: Apache-2.0
#include "job_rpcs.h"

#include <set>
#include <unordered_map>

#include <fmt/format.h>

#include "cohort/fmt_absl.h"
#include "controller_log.h"
#include "records.h"

namespace cohort::controller {

void JobRpcs::SubmitJob(v1::SubmitJobRequest& request, const Identity& who,
                        Reply<v1::SubmitJobResponse> reply) {
  if (absl::Status trusted = RequireTrusted(who, "submitting"); !trusted.ok()) {
    outbox_.Respond<v1::SubmitJobResponse>(std::move(reply), trusted);
    return;
  }
  Engine& engine = state_.engine;
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
    absl::Status s = engine.Cancel(JobRef{id, -1}, request.signal(), Caller{who.uid}, now, effects);
    if (!s.ok() && result.ok()) result = s;
  }
  for (const std::string& text : request.job_refs()) {
    absl::StatusOr<JobRef> ref = ParseJobRef(text);
    absl::Status s = ref.ok() ? engine.Cancel(*ref, request.signal(), Caller{who.uid}, now, effects)
                              : ref.status();
    if (!s.ok() && result.ok()) result = s;
  }
  sink_.Execute(effects);
  outbox_.Respond(std::move(reply),
                  result.ok() ? absl::StatusOr<v1::CancelJobResponse>(v1::CancelJobResponse{})
                              : absl::StatusOr<v1::CancelJobResponse>(result));
}

void JobRpcs::GetJob(v1::GetJobRequest& request, const Identity& /*who*/,
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
    GetStoredJob(request.job_id(), std::move(reply));
    return;
  }
  v1::GetJobResponse response;
  JobToWire(*job, state_.specs[job->id], engine, engine.QueuePosition(job->id),
            response.mutable_job());
  if (const auto ranks = state_.bindings.find(job->id); ranks != state_.bindings.end()) {
    for (const v1::RankBinding& b : ranks->second) *response.mutable_job()->add_ranks() = b;
  }
  outbox_.Respond(std::move(reply), absl::StatusOr<v1::GetJobResponse>(std::move(response)));
}

void JobRpcs::GetStoredJob(JobId id, Reply<v1::GetJobResponse> reply) {
  // Finished long enough ago to have left memory: the store has it. Read
  // off the state thread; the answer is converted back on it (the topology
  // is the state thread's).
  reader_.Read(
      [id](Store& store) { return store.FindJob(id); },
      [this, id,
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
        v1::GetJobResponse response;
        RecordToWire(**stored, *state_.topology, response.mutable_job());
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
    if (!request.user_name().empty() && job.request.user_name != request.user_name()) continue;
    const auto at = positions.find(id);
    v1::Job* out = response.add_jobs();
    JobToWire(job, state_.specs[id], engine, at == positions.end() ? 0 : at->second, out);
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
  const Caller caller{who.uid};
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

void JobRpcs::ExplainJob(v1::ExplainJobRequest& request, const Identity& /*who*/,
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
    JobToWire(*job, state_.specs[job->id], engine, engine.QueuePosition(job->id),
              response.mutable_job());
  }
  ExplanationToWire(*why, &response);
  outbox_.Respond(std::move(reply), absl::StatusOr<v1::ExplainJobResponse>(std::move(response)));
}

}  // namespace cohort::controller
