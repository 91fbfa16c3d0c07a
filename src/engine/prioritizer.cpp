// SPDX-License-Identifier: Apache-2.0
#include "engine/prioritizer.h"

#include <algorithm>
#include <map>
#include <string_view>

#include "engine/engine_support.h"
#include "engine/job_book.h"

namespace cohort::engine {
namespace {

// What a running job has used since it was last charged: GPU-seconds and
// CPU-seconds, and for fair share the GPU-seconds, else the CPU-seconds.
// They count as charged from now on.
policy::Use TakeUnbilled(Job& job, Millis now) {
  if (!IsActive(job) || IsSuspended(job) || job.run.start_time.count() == 0) return {};
  const Millis from = std::max(job.cache.charged_until, job.run.start_time);
  if (now <= from) return {};
  const double seconds = static_cast<double>((now - from).count()) / 1000.0;
  const int gpus = GpusHeld(job);
  const int cpus = CpusHeld(job);
  job.cache.charged_until = now;
  return {.resource_seconds = (gpus > 0 ? gpus : cpus) * seconds,
          .gpu_seconds = gpus * seconds,
          .cpu_seconds = cpus * seconds};
}

}  // namespace

Prioritizer::Prioritizer(const config::ClusterConfig& config, const topology::Topology& topology,
                         std::shared_ptr<const plugin::QueueOrder> order)
    : config_(config),
      scale_(policy::ScaleOf(config, topology.NodeCount())),
      order_(std::move(order)),
      fair_share_(config.priority.decay_half_life, config.usage_reset_period) {}

policy::PriorityFactors Prioritizer::Of(const Job& job, Millis now) const {
  return policy::JobPriority(
      config_, scale_, job,
      fair_share_.Factor(config_, job.request.account, job.request.user_name, now), now);
}

void Prioritizer::Rank(std::span<Job* const> jobs, const JobBook& book, Millis now) const {
  std::vector<double> shares(book.ShareOwners().size(), -1);
  Rank(jobs, book, now, shares);
}

void Prioritizer::Rank(std::span<Job* const> jobs, const JobBook& book, Millis now,
                       std::span<double> shares) const {
  const plugin::QueueContext context{config_, fair_share_, scale_, now, shares, book.ShareOwners()};
  order_->Rank(context, jobs);
}

void Prioritizer::Charge(Job& job, Millis now) {
  const policy::Use use = TakeUnbilled(job, now);
  fair_share_.Charge(job.request.account, job.request.user_name, use, now);
  fair_share_.ChargeQos(job.qos, use, now);
}

void Prioritizer::ChargeActive(const JobBook& book, Millis now) {
  // Summed per (account, user) and charged once each: the same usage as one
  // charge per job at the same instant, without a lookup per running job.
  const auto& owners = book.ShareOwners();
  std::vector<policy::Use> by_slot(owners.size());
  std::map<std::string_view, policy::Use> by_qos;  // QOS budgets
  for (Job* job : book.Active()) {
    const policy::Use use = TakeUnbilled(*job, now);
    by_slot[static_cast<std::size_t>(job->cache.share_slot)] += use;
    by_qos[job->qos] += use;
  }
  for (std::size_t slot = 0; slot < by_slot.size(); ++slot) {
    fair_share_.Charge(owners[slot].first, owners[slot].second, by_slot[slot], now);
  }
  for (const auto& [qos, use] : by_qos) fair_share_.ChargeQos(std::string(qos), use, now);
}

}  // namespace cohort::engine
