// SPDX-License-Identifier: Apache-2.0
#include "prioritizer.h"

#include <algorithm>

#include "engine_support.h"
#include "job_book.h"

namespace cohort::engine {
namespace {

// The resource-seconds (GPU-seconds, else CPU-seconds) a running job has
// used since it was last charged; they count as charged from now on.
double TakeUnbilled(Job& job, Millis now) {
  if (!IsActive(job) || job.suspended || job.start_time.count() == 0) return 0;
  const Millis from = std::max(job.charged_until, job.start_time);
  if (now <= from) return 0;
  const int gpus = GpusHeld(job);
  const double units = gpus > 0 ? gpus : CpusHeld(job);
  job.charged_until = now;
  return units * static_cast<double>((now - from).count()) / 1000.0;
}

}  // namespace

Prioritizer::Prioritizer(const config::ClusterConfig& config, const topology::Topology& topology)
    : config_(config), topology_(topology), fair_share_(config.priority.decay_half_life) {
  for (const config::PartitionSpec& p : config.partitions) {
    max_tier_ = std::max(max_tier_, p.priority_tier);
  }
  for (const config::QosSpec& q : config.qos) max_qos_priority_ = std::max(max_qos_priority_, q.priority);
}

policy::PriorityFactors Prioritizer::Of(const Job& job, Millis now) const {
  return With(job, fair_share_.Factor(config_, job.request.account, job.request.user_name, now),
              now);
}

policy::PriorityFactors Prioritizer::With(const Job& job, double fairshare, Millis now) const {
  policy::PriorityInputs in;
  in.age =
      job.state == JobState::kPending ? std::max(Millis{0}, now - job.eligible_time) : Millis{0};
  in.nodes = job.gang.nodes;
  in.cluster_nodes = std::max(1, topology_.NodeCount());
  in.fairshare = fairshare;
  in.partition_tier = job.priority_tier;
  in.max_partition_tier = max_tier_;
  const config::QosSpec* qos = config_.FindQos(job.qos);
  in.qos_priority = qos == nullptr ? 0 : qos->priority;
  in.max_qos_priority = max_qos_priority_;
  return policy::ComputePriority(config_.priority, in);
}

void Prioritizer::Prioritize(Job& job, std::vector<double>& shares, const JobBook& book,
                             Millis now) const {
  double& share = shares[static_cast<std::size_t>(job.share_slot)];
  if (share < 0) {
    const auto& [account, user] = book.ShareOwners()[static_cast<std::size_t>(job.share_slot)];
    share = fair_share_.Factor(config_, account, user, now);
  }
  job.priority = With(job, share, now).total;
}

void Prioritizer::Charge(Job& job, Millis now) {
  fair_share_.Charge(job.request.account, job.request.user_name, TakeUnbilled(job, now), now);
}

void Prioritizer::ChargeActive(const JobBook& book, Millis now) {
  // Summed per (account, user) and charged once each: the same usage as one
  // charge per job at the same instant, without a lookup per running job.
  const auto& owners = book.ShareOwners();
  std::vector<double> by_slot(owners.size(), 0);
  for (Job* job : book.Active()) {
    by_slot[static_cast<std::size_t>(job->share_slot)] += TakeUnbilled(*job, now);
  }
  for (std::size_t slot = 0; slot < by_slot.size(); ++slot) {
    fair_share_.Charge(owners[slot].first, owners[slot].second, by_slot[slot], now);
  }
}

}  // namespace cohort::engine
