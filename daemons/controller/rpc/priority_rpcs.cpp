// SPDX-License-Identifier: Apache-2.0
#include "rpc/priority_rpcs.h"

#include <algorithm>

#include <fmt/format.h>

namespace cohort::controller {

void PriorityRpcs::GetPriorities(v1::PriorityRequest& request, const Identity& who,
                                 Reply<v1::PriorityResponse> reply) {
  const Engine& engine = state_.engine;
  std::vector<JobId> ids;
  if (request.job_refs().empty()) {
    ids = engine.PendingOrder();
  } else {
    for (const std::string& text : request.job_refs()) {
      absl::StatusOr<JobRef> ref = ParseJobRef(text);
      if (!ref.ok()) {
        outbox_.Respond<v1::PriorityResponse>(std::move(reply), ref.status());
        return;
      }
      const std::vector<JobId> found = engine.Lookup(*ref);
      if (found.empty()) {
        outbox_.Respond<v1::PriorityResponse>(
            std::move(reply),
            absl::NotFoundError(fmt::format("job {} not found; see cohort queue", text)));
        return;
      }
      ids.insert(ids.end(), found.begin(), found.end());
    }
  }
  const config::PriorityWeights& w = state_.config.priority;
  v1::PriorityResponse response;
  response.set_weight_age(w.age);
  response.set_weight_fairshare(w.fairshare);
  response.set_weight_job_size(w.job_size);
  response.set_weight_partition(w.partition);
  response.set_weight_qos(w.qos);
  const Millis now = ControllerState::Now();
  for (const JobId id : ids) {
    const Job* job = engine.FindJob(id);
    if (job != nullptr && job->state == JobState::kPending &&
        MaySeeJob(who, job->request.uid, state_.config.private_data)) {
      AddPriority(*job, now, response);
    }
  }
  std::stable_sort(
      response.mutable_jobs()->begin(), response.mutable_jobs()->end(),
      [](const v1::JobPriority& a, const v1::JobPriority& b) { return a.total() > b.total(); });
  outbox_.Respond(std::move(reply), absl::StatusOr<v1::PriorityResponse>(std::move(response)));
}

void PriorityRpcs::AddPriority(const Job& job, Millis now, v1::PriorityResponse& response) const {
  const config::PriorityWeights& w = state_.config.priority;
  const policy::PriorityFactors f = state_.engine.PriorityOf(job, now);
  v1::JobPriority* p = response.add_jobs();
  p->set_job_id(job.id);
  p->set_display_id(DisplayId(job));
  p->set_user_name(job.request.user_name);
  p->set_account(job.request.account);
  p->set_partition(job.request.partition);
  p->set_qos(job.qos);
  p->set_total(f.total);
  p->set_age(w.age * f.age);
  p->set_fairshare(w.fairshare * f.fairshare);
  p->set_job_size(w.job_size * f.job_size);
  p->set_partition_factor(w.partition * f.partition);
  p->set_qos_factor(w.qos * f.qos);
  p->set_age_raw(f.age);
  p->set_fairshare_raw(f.fairshare);
  p->set_job_size_raw(f.job_size);
  p->set_partition_raw(f.partition);
  p->set_qos_raw(f.qos);
}

void PriorityRpcs::GetShares(v1::SharesRequest& /*request*/, const Identity& who,
                             Reply<v1::SharesResponse> reply) {
  v1::SharesResponse response;
  response.set_half_life_s(state_.config.priority.decay_half_life.count());
  for (const policy::ShareRow& row :
       state_.engine.Usage().Rows(state_.config, ControllerState::Now())) {
    // PrivateData=usage: a user sees the accounts' rows and their own.
    if (state_.config.private_data.usage && !who.is_operator && !row.user.empty() &&
        row.user != who.user_name) {
      continue;
    }
    v1::AccountShare* out = response.add_rows();
    out->set_account(row.account);
    out->set_user(row.user);
    out->set_shares(row.shares);
    out->set_norm_shares(row.norm_shares);
    out->set_usage_gpu_seconds(row.usage);
    out->set_norm_usage(row.norm_usage);
    out->set_factor(row.factor);
  }
  outbox_.Respond(std::move(reply), absl::StatusOr<v1::SharesResponse>(std::move(response)));
}

}  // namespace cohort::controller
