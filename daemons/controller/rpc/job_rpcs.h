// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <boost/asio/io_context.hpp>

#include "cohort/v1/cohort.pb.h"
#include "controller_state.h"
#include "outbox.h"
#include "store/store_reader.h"
#include "store/wire.h"
#include "worker.h"

namespace cohort::controller {

/// The Controller service's calls on jobs: submit, cancel, show, list,
/// hold/release/requeue, explain. Each runs on the state thread (io()) and
/// answers through the outbox, so that a reply never tells of a change
/// before it is durable. Errors: InvalidArgument (a malformed reference or
/// spec), NotFound, PermissionDenied (anonymous callers changing jobs, or
/// another user's job), FailedPrecondition (the job's state forbids it).
class JobRpcs {
 public:
  JobRpcs(boost::asio::io_context& state_io, ControllerState& state, Outbox& outbox,
          StoreReader& reader, EffectSink& sink)
      : io_(state_io), state_(state), outbox_(outbox), reader_(reader), sink_(sink) {}

  /// Where the calls run: the state thread.
  boost::asio::io_context& io() { return io_; }

  void SubmitJob(v1::SubmitJobRequest& request, const Identity& who,
                 Reply<v1::SubmitJobResponse> reply);
  void CancelJob(v1::CancelJobRequest& request, const Identity& who,
                 Reply<v1::CancelJobResponse> reply);
  /// A job in memory, else (finished long ago) as the store keeps it.
  void GetJob(v1::GetJobRequest& request, const Identity& who, Reply<v1::GetJobResponse> reply);
  /// sstat: what a running job's launches use now (UsageBook), for whoever
  /// may see the job; FailedPrecondition for a job that is not running.
  void GetJobUsage(v1::JobUsageRequest& request, const Identity& who,
                   Reply<v1::JobUsageResponse> reply);
  void ListJobs(v1::ListJobsRequest& request, const Identity& who,
                Reply<v1::ListJobsResponse> reply);
  /// Hold, release, requeue or checkpoint-done of each job named; partial
  /// success reports the first failure (what was done is durable).
  void ControlJobs(v1::ControlJobsRequest& request, const Identity& who,
                   Reply<v1::ControlJobsResponse> reply);
  /// scontrol update: a pending job's TimeLimit, Partition or NumNodes.
  void UpdateJob(v1::UpdateJobRequest& request, const Identity& who,
                 Reply<v1::UpdateJobResponse> reply);
  void ExplainJob(v1::ExplainJobRequest& request, const Identity& who,
                  Reply<v1::ExplainJobResponse> reply);
  /// `cohort run` inside a job: places a step in the job's allocation and
  /// launches it with the caller's command, environment and files.
  /// ResourceExhausted when it fits only once running steps end;
  /// FailedPrecondition when it never fits (what it asks and what the
  /// allocation has) or the job is not running.
  void StartStep(v1::StartStepRequest& request, const Identity& who,
                 Reply<v1::StartStepResponse> reply);
  /// Signals a running step's ranks; signal 0 cancels the step.
  void SignalStep(v1::SignalStepRequest& request, const Identity& who,
                  Reply<v1::SignalStepResponse> reply);

 private:
  /// Runs the site's submit policy (JobSubmitPlugins=lua) on a submission,
  /// changing `spec` as it says; its refusal or failure otherwise.
  absl::Status ApplySubmitPolicy(v1::JobSpec& spec, const Identity& who);
  /// Runs its slurm_job_modify on an update of job `ref`, changing
  /// `request` as it says; its refusal or failure otherwise.
  absl::Status ApplyModifyPolicy(v1::UpdateJobRequest& request, JobRef ref, const Identity& who);
  void GetStoredJob(JobId id, const Identity& who, Reply<v1::GetJobResponse> reply);

  boost::asio::io_context& io_;
  ControllerState& state_;
  Outbox& outbox_;
  StoreReader& reader_;
  EffectSink& sink_;
};

}  // namespace cohort::controller
