// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <memory>
#include <span>
#include <vector>

#include "cohort/alloc/topology.h"
#include "cohort/config/cluster_config.h"
#include "cohort/engine/job.h"
#include "cohort/plugin.h"
#include "cohort/policy/fair_share.h"
#include "cohort/policy/priority.h"

namespace cohort::engine {

class JobBook;

/// Fair share and the queue order: owns the usage the running jobs are
/// charged with, and ranks pending jobs with the chosen QueueOrder policy
/// (PriorityType=).
class Prioritizer {
 public:
  /// `config` (with its default QOS declared) and `topology` outlive it.
  Prioritizer(const config::ClusterConfig& config, const topology::Topology& topology,
              std::shared_ptr<const plugin::QueueOrder> order);

  /// The multifactor factors of a job at `now` (`cohort priority`), whatever
  /// the queue order.
  [[nodiscard]] policy::PriorityFactors Of(const Job& job, Millis now) const;
  /// Sets each job's `priority` by the queue order, with each (account,
  /// user)'s fair share computed once for the batch.
  void Rank(std::span<Job* const> jobs, const JobBook& book, Millis now) const;
  /// Rank for one batch of a longer ordering: `shares` (one per slot of
  /// `book`, -1: not computed yet) keeps the fair shares across its batches.
  void Rank(std::span<Job* const> jobs, const JobBook& book, Millis now,
            std::span<double> shares) const;

  /// The QOS changed (sacctmgr): their priorities are weighed again.
  void QosChanged() { scale_ = policy::ScaleOf(config_, scale_.cluster_nodes); }

  /// Charges what the job used since it was last charged (its account's,
  /// its user's and its QOS's use).
  void Charge(Job& job, Millis now);
  /// Charges every active job of `book`, once per (account, user).
  void ChargeActive(const JobBook& book, Millis now);

  [[nodiscard]] const policy::FairShare& Usage() const { return fair_share_; }
  [[nodiscard]] policy::FairShare& Usage() { return fair_share_; }

 private:
  const config::ClusterConfig& config_;
  policy::PriorityScale scale_;
  std::shared_ptr<const plugin::QueueOrder> order_;
  policy::FairShare fair_share_;
};

}  // namespace cohort::engine
